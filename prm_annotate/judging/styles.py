"""What a judge's answer style is: how its prompt numbers the paragraphs, how its verdict is parsed
(strictly: a verdict is read, never guessed), and the answer part constrained decoding forces.

Each parser returns the 0-based first error (-1: no error) or raises `ParseFailure` saying why;
paragraph numbers of 1-based prompts are converted there, at the edge.

Constrained decoding: free text stops at `answer_lead`, and `answer_regex(n)` (which starts with
that lead) is what must follow for a response of n paragraphs. The lead is part of the forced
text, not of the prompt, so the model tokenizes it its own way: a prompt cut after `\\boxed{`
would split a token the judge learned as one (e.g. `{-`), and a small trained judge then never
chose -1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


class ParseFailure(ValueError):
    pass


@dataclass(frozen=True)
class JudgeStyle:
    name: str
    description: str  # for --help
    first_paragraph: int  # how the prompt numbers paragraphs
    parse: Callable[[str, int], int]  # (verdict text, number of steps) -> first error
    answer_lead: str
    answer_regex: Callable[[int], str]  # number of steps -> the forced answer's pattern
