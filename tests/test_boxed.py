"""The one `\\boxed{}` reader (prm_annotate/boxed.py) and what each of its callers accepts from it.

The readers it replaced (a MATH solution's answer in formats.py, the judge's verdict, the world's
truth) are kept here as references, written as they were: on text without escaped braces the
shared reader must give exactly what they gave."""
from __future__ import annotations

import random
import re

import pytest

from prm_annotate.boxed import box_at, find_boxes, last_boxed
from prm_annotate.grading.answers import extract_final_answer
from prm_annotate.judging import ParseFailure, read_verdict
from prm_annotate.judging.processbench import parse_processbench
from prm_annotate.world.truth import boxed_values


def _old_formats_last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1: j]
    return None


def _old_judge_contents(text: str) -> list[str] | str:
    out = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            return "unclosed"
        out.append(text[m.end(): i - 1].strip())
    return out


_OLD_TRUTH_BOXED = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}")


def _texts(seed: int, n: int) -> list[str]:
    """Random box soup without escaped braces (where the old readers paired braces differently)."""
    rng = random.Random(seed)
    parts = ["\\boxed", "\\boxed ", "\\fbox", "{", "}", " ", "3", "-1", "x", "\n", "$", " and ", "\\frac", "\\\\"]
    return [t for t in ("".join(rng.choice(parts) for _ in range(rng.randint(1, 16))) for _ in range(n))
            if "\\{" not in t and "\\}" not in t]


def test_the_callers_read_what_their_old_readers_read():
    from prm_annotate.judging.processbench import boxed_contents as _boxed_contents

    for text in _texts(0, 4000):
        assert last_boxed(text) == _old_formats_last_boxed(text), text
        assert boxed_values(text) == _OLD_TRUTH_BOXED.findall(text), text
        old = _old_judge_contents(text)
        if "\\fbox" in text or re.search(r"\\boxed\s*[^\s{]|\\boxed\s*$", text):
            continue  # the judge now reads every kind of box (below); the old reader took braced \boxed only
        if old == "unclosed":
            with pytest.raises(ParseFailure, match="unclosed"):
                _boxed_contents(text)
        else:
            assert _boxed_contents(text) == old, text


@pytest.mark.parametrize("text, grader, judge, math, truth", [
    ("\\boxed{3}", "3", 3, "3", ["3"]),
    ("\\boxed {3}", "3", 3, None, []),                 # a space: the grader and the judge read it
    ("\\fbox{3}", "3", 3, None, []),                   # \fbox: the grader and the judge (a box is an answer)
    ("\\boxed 3", "3", "without braces", None, []),    # a bare argument: the grader; the judge refuses it
    ("\\boxed{ 3 }", "3", 3, " 3 ", ["3"]),             # MATH's answer is kept as written
    ("\\boxed{{3}}", "{3}", "not a paragraph", "{3}", []),  # braces inside: no answer in the world
    ("\\boxed{3", "\\boxed{3", "unclosed", None, []),  # the grader falls back to the bare last line
    ("\\boxed{1} and \\boxed{2}", "1, 2", "conflicting", "2", ["1", "2"]),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}", "not a paragraph", "\\{1, 2\\}", []),  # escaped braces are content
])
def test_each_caller_takes_the_boxes_it_accepts(text, grader, judge, math, truth):
    assert extract_final_answer(text) == grader
    if isinstance(judge, int):
        assert parse_processbench(text, 5) == judge == read_verdict(text, 5)
    else:
        with pytest.raises(ParseFailure, match=judge):
            parse_processbench(text, 5)
        assert read_verdict(text, 5) is None
    assert last_boxed(text) == math
    assert boxed_values(text) == truth


def test_boxes_nest_and_escaped_braces_do_not_close():
    text = "a \\boxed{\\boxed{2}} b \\boxed{x\\}y} \\fbox{z"
    boxes = find_boxes(text)
    assert [(b.command, b.content) for b in boxes] == [
        ("boxed", "\\boxed{2}"), ("boxed", "2"), ("boxed", "x\\}y"), ("fbox", None)]
    assert text[boxes[0].start:boxes[0].end] == "\\boxed{\\boxed{2}}"
    assert [b.content for b in find_boxes(text, last=2)] == ["x\\}y", None]
    assert box_at(text, 2).content == "\\boxed{2}" and box_at(text, 0) is None
