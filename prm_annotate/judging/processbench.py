"""ProcessBench's answer style: paragraphs from 0, the answer in \\boxed{index}, \\boxed{-1} for
no error. Refused: no answer, an answer that is not a paragraph index, an index outside the
response, and several answers that disagree (the same answer repeated is fine)."""
from __future__ import annotations

import re

from prm_annotate.boxed import find_boxes
from prm_annotate.judging.styles import JudgeStyle, ParseFailure


def boxed_contents(text: str) -> list[str]:
    """Contents of every \\boxed{...}, braces matched (a \\boxed{\\frac{1}{2}} is one answer)."""
    boxes = [b for b in find_boxes(text) if b.command == "boxed" and b.braced]
    if any(not b.closed for b in boxes):
        raise ParseFailure("an unclosed \\boxed{")
    return [b.content.strip() for b in boxes]


def parse_processbench(text: str, n_steps: int) -> int:
    answers = set(boxed_contents(text))
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


def _answer_regex(n_steps: int) -> str:
    return rf"\\boxed\{{(-1|{'|'.join(str(i) for i in range(n_steps))})\}}"


STYLE = JudgeStyle("processbench", "\\boxed{index} from 0", 0, parse_processbench, "\\boxed", _answer_regex)
