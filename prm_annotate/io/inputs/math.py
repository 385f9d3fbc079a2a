"""MATH (and MATH-500) as published: `problem`, `solution` with the answer in its last `\\boxed{}`,
`answer` where the release has one, and no `id`."""
from __future__ import annotations

from typing import Any

from prm_annotate.boxed import last_boxed
from prm_annotate.io.inputs.base import FieldMap, InputFormat


def detect(obj: dict[str, Any]) -> bool:
    return "problem" in obj and "solution" in obj and "id" not in obj


def normalise(obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    out = dict(obj)
    out.setdefault("id", f"math-{stem}-{index}")
    if out.get("answer") in (None, "") and isinstance(obj.get("solution"), str):
        out["answer"] = last_boxed(obj["solution"])
    return out


FORMAT = InputFormat("math", normalise, detect, summary="MATH rows: problem, the boxed answer of its solution")
