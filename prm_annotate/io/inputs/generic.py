"""Generic JSONL: records already in the generic shape, or mapped to it by `--id-field`,
`--problem-field` and `--answer-field`."""
from __future__ import annotations

from typing import Any

from prm_annotate.io.inputs.base import FieldMap, InputFormat


_DEFAULT = FieldMap()


def normalise(obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    if fields == _DEFAULT:  # a map made once: this runs for every record of a large file
        return obj
    out = {k: v for k, v in obj.items() if k not in (fields.id, fields.problem, fields.answer)}
    for target, source in (("id", fields.id), ("problem", fields.problem), ("answer", fields.answer)):
        if source in obj:
            out[target] = obj[source]
    return out


FORMAT = InputFormat("generic", normalise,
                     summary="this project's records: id, problem, answer and/or steps or response")
