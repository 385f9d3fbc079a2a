"""ProcessBench's answer style: paragraphs from 0, the answer in \\boxed{index}, \\boxed{-1} for
no error. Every box of the verdict is read (`\\boxed` and `\\fbox`, as prm_annotate/boxed.py
finds them) and they must all name the same index: equal indices in
different spellings agree (`\\boxed{03}` beside `\\boxed{3}` reads 3). Refused, since any of them
could move the first error: no answer; an unclosed box; a box without braces (`\\boxed 12` cut
after its first digit reads 1); a box command spelled otherwise
(`\\Boxed`, `\\BOXED`: a reader blind to it would take another box for the answer); an answer
that is not a paragraph index; an index outside the response; boxes naming different indices."""
from __future__ import annotations

import re

from prm_annotate.boxed import find_boxes
from prm_annotate.judging.styles import JudgeStyle, ParseFailure, refuse_thought

_INDEX = re.compile(r"-?[0-9]+")
_BOX_LIKE = re.compile(r"\\(boxed|fbox)(?![A-Za-z])", re.I)


def boxed_contents(text: str) -> list[str]:
    """Contents of every box, stripped (braces matched: a \\boxed{\\frac{1}{2}} is one answer)."""
    for m in _BOX_LIKE.finditer(text):
        if m.group(1) not in ("boxed", "fbox"):
            raise ParseFailure(f"a box written \\{m.group(1)}, not \\boxed")
    boxes = find_boxes(text)
    if any(not b.braced for b in boxes):
        # `\boxed 12` cut after its first digit would read 1: a bare box is refused, not read.
        raise ParseFailure("a \\boxed without braces")
    if any(not b.closed for b in boxes):
        raise ParseFailure("an unclosed \\boxed{")
    return [b.content.strip() for b in boxes]


def parse_processbench(text: str, n_steps: int) -> int:
    refuse_thought(text)
    answers = boxed_contents(text)
    if not answers:
        raise ParseFailure("no \\boxed{} answer")
    for answer in answers:
        if not _INDEX.fullmatch(answer):
            raise ParseFailure(f"the answer {answer!r} is not a paragraph index")
    indices = {int(a) for a in answers}
    if len(indices) > 1:
        raise ParseFailure(f"conflicting answers: {', '.join(map(str, sorted(indices)))}")
    index = indices.pop()
    if not -1 <= index < n_steps:
        raise ParseFailure(f"index {index} is outside -1..{n_steps - 1}")
    return index


def _answer_regex(n_steps: int) -> str:
    return rf"\\boxed\{{(-1|{'|'.join(str(i) for i in range(n_steps))})\}}"


STYLE = JudgeStyle("processbench", "\\boxed{index} from 0", 0, parse_processbench, "\\boxed", _answer_regex)
