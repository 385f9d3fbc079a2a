"""Input formats: generic JSONL, GSM8K, MATH and ProcessBench, read as they are published.

Each reader turns a source row into the generic shape (`id`, `problem`, `answer` / `steps`) and
keeps every other field. Ids that a format lacks are made from the format, the file's stem and
the 0-based row index: `gsm8k-test-7` is row 7 of GSM8K's test.jsonl.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal

from prm_annotate.boxed import last_boxed
from prm_annotate.errors import InputError
from prm_annotate.io.jsonl import STDIO, OnError, iter_json_array, iter_jsonl

Format = Literal["auto", "generic", "gsm8k", "math", "processbench"]
FORMATS: tuple[str, ...] = ("auto", "generic", "gsm8k", "math", "processbench")


@dataclass(frozen=True)
class FieldMap:
    """`--id-field/--problem-field/--answer-field`: where a generic file keeps these."""

    id: str = "id"
    problem: str = "problem"
    answer: str = "answer"


def _starts_with_bracket(path: str) -> bool:
    if path == STDIO:
        head = sys.stdin.buffer.peek(64)
    else:
        try:
            with open(path, "rb") as fh:
                head = fh.read(64)
        except OSError:
            return False  # open_input reports it properly
    return head.lstrip()[:1] == b"["


def detect(obj: dict[str, Any]) -> str:
    if "steps" in obj and "label" in obj:
        return "processbench"
    if "question" in obj and "####" in str(obj.get("answer", "")):
        return "gsm8k"
    if "problem" in obj and "solution" in obj and "id" not in obj:
        return "math"
    return "generic"


def _normalise(fmt: str, obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    if fmt == "gsm8k":
        out = {k: v for k, v in obj.items() if k not in ("question", "answer")}
        solution = str(obj.get("answer", ""))
        out.setdefault("id", f"gsm8k-{stem}-{index}")
        out["problem"] = obj.get("question")
        out["answer"] = solution.rsplit("####", 1)[-1].strip() if "####" in solution else None
        out["solution"] = solution
        return out
    if fmt == "math":
        out = dict(obj)
        out.setdefault("id", f"math-{stem}-{index}")
        if out.get("answer") in (None, "") and isinstance(obj.get("solution"), str):
            out["answer"] = last_boxed(obj["solution"])
        return out
    if fmt == "processbench":
        return dict(obj)
    if fields == FieldMap():
        return obj
    out = {k: v for k, v in obj.items() if k not in (fields.id, fields.problem, fields.answer)}
    for target, source in (("id", fields.id), ("problem", fields.problem), ("answer", fields.answer)):
        if source in obj:
            out[target] = obj[source]
    return out


def read_records(path: str | Path, fmt: str = "auto", fields: FieldMap = FieldMap(),
                 on_error: OnError | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (where, record in the generic shape). The format is detected from the first record.

    Unparseable lines raise InputError, or go to `on_error` and are skipped.
    """
    name = str(path)
    if fmt not in FORMATS:
        raise InputError(name, "line 0", f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    rows = iter_json_array(name) if _starts_with_bracket(name) else iter_jsonl(name, on_error)
    stem = "stdin" if name == STDIO else Path(name).stem
    for index, (where, obj) in enumerate(rows):
        if fmt == "auto":
            fmt = detect(obj)
        yield where, _normalise(fmt, obj, stem, index, fields)
