"""PRMBench as published (hitsmy/PRMBench_Preview, `prmbench_preview.jsonl`; the record shape of
ssmisya/PRMBench's docs/data_format.md): `idx`, `classification` (one of nine error categories),
`modified_question` and `modified_process` (what is evaluated), `error_steps` (1-indexed, several
per response; none for `multi_solutions`), and the original question and process beside them.

A row becomes the response PRMBench's `prmtest_classified` task evaluates: id
`<classification>_<idx>` (the task's own), the modified question as the problem, and the modified
process as the steps with each step's leading "Step k." / "k." number taken off, as PRMBench's
runner for Qwen2.5-Math-PRM does before tagging the steps (`remove_step_prefix`). Every field of
the row is kept (`error_steps` and `classification` are the gold `evaluate --benchmark prmbench`
reads). The task's extra "correct_" responses (the original process of each `redundency` row) count
only for a `correct` category that PRMScore leaves out; they are not made here.
"""
from __future__ import annotations

import re
from typing import Any

from prm_annotate.io.inputs.base import FieldMap, InputFormat

_STEP_NUMBER = re.compile(r"^(Step\s*\d+\.\s*|\d+\.\s*)", re.IGNORECASE)


def strip_step_number(step: str) -> str:
    """PRMBench's `remove_step_prefix`: strip, then drop a leading 'Step k. ' or 'k. '."""
    return _STEP_NUMBER.sub("", step.strip())


def response_id(obj: dict[str, Any]) -> str:
    return f"{obj.get('classification')}_{obj.get('idx')}"


def detect(obj: dict[str, Any]) -> bool:
    return "modified_process" in obj and "error_steps" in obj and "classification" in obj


def normalise(obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    out = dict(obj)
    out["id"] = response_id(obj)
    out["problem"] = obj.get("modified_question")
    process = obj.get("modified_process")
    out["steps"] = [strip_step_number(s) for s in process] if isinstance(process, list) and all(
        isinstance(s, str) for s in process) else process
    return out


FORMAT = InputFormat("prmbench", normalise, detect, summary="PRMBench's original and modified processes")
