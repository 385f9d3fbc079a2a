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

import re
from dataclasses import dataclass
from typing import Any, Callable


class ParseFailure(ValueError):
    pass


def reason_kind(error: str) -> str:
    """A parse error without its particulars (numbers, quoted text; what follows a colon) to tally
    reasons by kind; the tags it names are kept (`no <conclusion>`): they say what was missing."""
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"", "…", error.split(":")[0]))


_THOUGHT = re.compile(r"</?think>", re.I)


def refuse_thought(text: str) -> None:
    """A `<think>` block left in a verdict is refused: a draft answer in it could be read for the
    verdict (`judge --reasoning` splits the thought off before parsing)."""
    m = _THOUGHT.search(text)
    if m is not None:
        raise ParseFailure(f"a {m.group()} tag in the answer: the reasoning was not split off (--reasoning)")


TWO_VERDICTS = "two different verdicts"


def one_verdict(parts: list[str], n_steps: int, parse: Callable[[str, int], Any]) -> tuple[str | None, str | None]:
    """An answer that thought again between `parts` (thinking.tags.answer_parts): (the part to read, None)
    when its parts that hold a verdict agree, else (None, why): it has no single verdict and is
    never read as one of them."""
    read = []
    for part in parts:
        try:
            read.append((part, parse(part, n_steps)))
        except ParseFailure:
            continue
    if len({verdict for _, verdict in read}) > 1:
        said = ", then ".join(str(verdict) for _, verdict in read)
        what = "first errors" if all(isinstance(verdict, int) for _, verdict in read) else "readings"
        return None, f"{TWO_VERDICTS} in one answer, thinking again between them: {what} {said}"
    return (read[-1][0] if read else parts[-1]), None


@dataclass(frozen=True)
class JudgeStyle:
    name: str
    summary: str  # one line, for --help
    first_paragraph: int  # how the prompt numbers paragraphs
    parse: Callable[[str, int], int]  # (verdict text, number of steps) -> first error
    answer_lead: str
    answer_regex: Callable[[int], str]  # number of steps -> the forced answer's pattern
    # The whole reading, where it says more than the first error (the slips style's slips and
    # corrections): two answers of one vote must agree on it, not only on the first error.
    reading: Callable[[str, int], Any] | None = None

    def read_all(self, text: str, n_steps: int) -> Any:
        return (self.reading or self.parse)(text, n_steps)
