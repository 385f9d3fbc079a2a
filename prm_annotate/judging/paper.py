"""The paper's answer style (its Appendix C protocol): paragraphs from 1, one `<analysis_k>` per
paragraph, then `<conclusion>Correct</conclusion>` or `Incorrect: paragraph k`."""
from __future__ import annotations

import re

from prm_annotate.judging.styles import JudgeStyle, ParseFailure

_CONCLUSION = re.compile(r"<conclusion>(.*?)</conclusion>", re.S | re.I)
_VERDICT = re.compile(r"(correct)|incorrect(?:\s*[:,.\-]?\s*(?:paragraph|para\.?)?\s*(\d+))?", re.I)
_ANALYSIS = re.compile(r"<analysis_(\d+)>", re.I)


def parse_paper(text: str, n_steps: int) -> int:
    """`Incorrect: paragraph k` counts k from 1. A bare "Incorrect" is read as the paper's protocol
    defines it: analyses stop at the first wrong paragraph, so it is the last analysis — accepted
    only when the analyses are numbered 1, 2, ..., m without gaps."""
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


def _answer_regex(n_steps: int) -> str:
    numbers = "|".join(str(i) for i in range(1, n_steps + 1))
    return rf"<conclusion>\n?(Correct|Incorrect: paragraph ({numbers}))\n?</conclusion>"


STYLE = JudgeStyle("paper", "<conclusion>, paragraphs from 1", 1, parse_paper, "<conclusion>", _answer_regex)
