"""ProcessBench as published (a JSON array per split): `id`, `problem`, `steps`, `label` (the
0-based first wrong step, -1 for none), `final_answer_correct`, `generator`; already generic."""
from __future__ import annotations

from typing import Any

from prm_annotate.io.inputs.base import FieldMap, InputFormat


def detect(obj: dict[str, Any]) -> bool:
    return "steps" in obj and "label" in obj


def normalise(obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    return dict(obj)


FORMAT = InputFormat("processbench", normalise, detect,
                     summary="ProcessBench's split files: steps and the first-error label")
