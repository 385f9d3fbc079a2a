"""Strict parsers for judge outputs: a verdict is read, never guessed.

Each parser returns the 0-based first error (-1: no error) or raises `ParseFailure` saying why.
Paragraph numbers of 1-based prompts are converted here, at the edge. Refused: no answer, an
answer that is not a paragraph number, a number outside the response's paragraphs, and several
answers that disagree (the same answer repeated is fine).

The two styles also define the answer part that constrained decoding forces: free text stops at
`answer_lead`, and `answer_regex(n)` (which starts with that lead) is what must follow for a
response of n paragraphs. The lead is part of the forced text, not of the prompt, so the model
tokenizes it its own way: a prompt cut after `\\boxed{` would split a token the judge learned as
one (e.g. `{-`), and a small trained judge then never chose -1.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from prm_annotate.boxed import find_boxes


class ParseFailure(ValueError):
    pass


def _boxed_contents(text: str) -> list[str]:
    """Contents of every \\boxed{...}, braces matched (a \\boxed{\\frac{1}{2}} is one answer)."""
    boxes = [b for b in find_boxes(text) if b.command == "boxed" and b.braced]
    if any(not b.closed for b in boxes):
        raise ParseFailure("an unclosed \\boxed{")
    return [b.content.strip() for b in boxes]


def parse_processbench(text: str, n_steps: int) -> int:
    """ProcessBench's answer: \\boxed{index}, paragraphs from 0, \\boxed{-1} for no error."""
    answers = set(_boxed_contents(text))
    if not answers:
        raise ParseFailure("no \\boxed{} answer")
    if len(answers) > 1:
        raise ParseFailure(f"conflicting answers: {', '.join(sorted(answers))}")
    answer = answers.pop()
    if not re.fullmatch(r"-?\d+", answer):
        raise ParseFailure(f"the answer {answer!r} is not a paragraph index")
    index = int(answer)
    if not -1 <= index < n_steps:
        raise ParseFailure(f"index {index} is outside -1..{n_steps - 1}")
    return index


_CONCLUSION = re.compile(r"<conclusion>(.*?)</conclusion>", re.S | re.I)
_VERDICT = re.compile(r"(correct)|incorrect(?:\s*[:,.\-]?\s*(?:paragraph|para\.?)?\s*(\d+))?", re.I)
_ANALYSIS = re.compile(r"<analysis_(\d+)>", re.I)


def parse_paper(text: str, n_steps: int) -> int:
    """The paper's style: `<conclusion>Correct</conclusion>`, or `Incorrect: paragraph k` with k
    counted from 1. A bare "Incorrect" is read as the paper's protocol defines it: analyses stop
    at the first wrong paragraph, so it is the last analysis — accepted only when the analyses are
    numbered 1, 2, ..., m without gaps."""
    bodies = _CONCLUSION.findall(text)
    if not bodies:
        raise ParseFailure("no <conclusion>")
    found: set[int] = set()
    for body in bodies:
        m = _VERDICT.fullmatch(body.strip().rstrip("."))
        if m is None:
            raise ParseFailure(f"the conclusion {body.strip()[:40]!r} is neither Correct nor Incorrect")
        if m.group(1):
            found.add(-1)
            continue
        if m.group(2) is not None:
            number = int(m.group(2))
        else:
            numbers = [int(x) for x in _ANALYSIS.findall(text)]
            if not numbers or numbers != list(range(1, len(numbers) + 1)):
                raise ParseFailure("a bare Incorrect without consecutive <analysis_k> tags to locate the error")
            number = numbers[-1]
        if not 1 <= number <= n_steps:
            raise ParseFailure(f"paragraph {number} is outside 1..{n_steps}")
        found.add(number - 1)
    if len(found) > 1:
        raise ParseFailure(f"conflicting conclusions: {sorted(found)}")
    return found.pop()


@dataclass(frozen=True)
class Style:
    name: str
    first_paragraph: int  # how the prompt numbers paragraphs
    parse: object  # Callable[[str, int], int]
    answer_lead: str  # free generation stops before this; the constrained answer starts with it

    def answer_regex(self, n_steps: int) -> str:
        numbers = "|".join(str(i) for i in range(self.first_paragraph, n_steps + self.first_paragraph))
        if self.name == "paper":
            return rf"<conclusion>\n?(Correct|Incorrect: paragraph ({numbers}))\n?</conclusion>"
        return rf"\\boxed\{{(-1|{numbers})\}}"


STYLES = {
    "processbench": Style("processbench", 0, parse_processbench, "\\boxed"),
    "paper": Style("paper", 1, parse_paper, "<conclusion>"),
}


def read_verdict(text: str, n_steps: int, style: str = "processbench") -> int | None:
    """The first error a verdict gives, by the style's strict parser; None where the judge stage
    counts a parse failure. For readers that only score verdicts (the world's measurements)."""
    try:
        return STYLES[style].parse(text, n_steps)
    except ParseFailure:
        return None


def aggregate_votes(votes: list[int | None]) -> int | None:
    """Majority of the parsed votes; a tie goes to the earliest error (-1, "no error", counts as
    later than any step), since a PRM label should not pass a step that judges flagged as often as
    they passed it. No parsed vote: None."""
    counts: dict[int, int] = {}
    for v in votes:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    if not counts:
        return None
    top = max(counts.values())
    tied = [v for v, c in counts.items() if c == top]
    errors = [v for v in tied if v >= 0]
    return min(errors) if errors else -1
