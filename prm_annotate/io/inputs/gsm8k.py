"""GSM8K as published: `question`, and `answer` holding the solution with the gold answer after `####`."""
from __future__ import annotations

from typing import Any

from prm_annotate.io.inputs.base import FieldMap, InputFormat


def detect(obj: dict[str, Any]) -> bool:
    return "question" in obj and "####" in str(obj.get("answer", ""))


def normalise(obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k not in ("question", "answer")}
    solution = str(obj.get("answer", ""))
    out.setdefault("id", f"gsm8k-{stem}-{index}")
    out["problem"] = obj.get("question")
    out["answer"] = solution.rsplit("####", 1)[-1].strip() if "####" in solution else None
    out["solution"] = solution
    return out


FORMAT = InputFormat("gsm8k", normalise, detect, summary="GSM8K rows: question, answer after ####")
