"""Reading first-error predictions and gold labels, and turning first errors into step labels.

Shared by `evaluate`, `compare`, `export` and `stats`.

Step-label convention (ProcessBench annotates only the earliest wrong step): for a first error
`f` over `n` steps, steps `0..f-1` are right (True), step `f` is wrong (False), and steps after
`f` carry no label at all — they are neither right nor wrong. `f == -1` labels all `n` steps right.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from prm_annotate.errors import InputError
from prm_annotate.io.inputs import read_records
from prm_annotate.records import check_first_error, step_labels  # noqa: F401  (step_labels: read from here too)

MISSING = object()


def get_path(obj: Any, dotted: str) -> Any:
    """`obj["a"]["b"]` for `"a.b"`; MISSING when any part is absent."""
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return MISSING
        obj = obj[part]
    return obj


def read_raw(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Records as they are in the file (JSONL or a JSON array), with where they are."""
    # The generic format with the default field map hands every object through unchanged.
    return read_records(path, "generic")


def first_error_value(value: Any, path: str, where: str, field: str) -> int | None:
    """A first-error prediction: an int >= -1, or None for "no prediction"."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(path, where, f"{field} must be an integer step index or null, got {value!r}")
    if value < -1:
        raise InputError(path, where, f"{field} = {value} is below -1")
    return value


def step_count(obj: dict[str, Any]) -> int | None:
    steps = obj.get("steps")
    return len(steps) if isinstance(steps, list) else None


@dataclass
class Gold:
    id: str
    label: int
    n_steps: int | None
    record: dict[str, Any]


def records_by_id(path: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, id, record) for each record; a missing or duplicate id is bad input."""
    seen: dict[str, str] = {}
    for where, obj in read_raw(path):
        rid = obj.get("id")
        if not isinstance(rid, str) or not rid:
            raise InputError(path, where, "record has no string `id`")
        if rid in seen:
            raise InputError(path, where, f"duplicate id {rid!r} (first seen at {seen[rid]})")
        seen[rid] = where
        yield where, rid, obj


def load_gold(path: str, label_field: str = "label") -> dict[str, Gold]:
    """Gold first errors by id, from a ProcessBench JSON array or a JSONL file with `label`."""
    gold: dict[str, Gold] = {}
    for where, rid, obj in records_by_id(path):
        label = first_error_value(get_path(obj, label_field), path, where, label_field)
        if label is None:
            raise InputError(path, where, f"gold record has no `{label_field}`")
        n_steps = step_count(obj)
        if n_steps is not None:
            try:
                check_first_error(label, n_steps, label_field)
            except ValueError as exc:
                raise InputError(path, where, str(exc)) from None
        gold[rid] = Gold(rid, label, n_steps, obj)
    if not gold:
        raise InputError(path, "line 0", "the gold file has no records")
    return gold


@dataclass
class Prediction:
    id: str
    first_error: int | None  # None: no prediction (missing field, null, or unparsed judgement)
    n_steps: int | None
    labels: list[bool] | None  # explicit step labels (consensus records), if the record has them
    record: dict[str, Any]


def load_predictions(path: str, field: str | None) -> tuple[str, dict[str, Prediction]]:
    """Predictions by id, and the field they were read from (`None`: detected from the first record).

    A field that no record has is bad input (a misspelt --pred-field would score as "no prediction")."""
    preds: dict[str, Prediction] = {}
    present = False
    for where, rid, obj in records_by_id(path):
        if field is None:
            try:
                field = detect_field(obj)
            except ValueError as exc:
                raise InputError(path, where, f"{exc}; name it with FILE=dotted.path") from None
        labels = obj.get("labels")
        if labels is not None and not (isinstance(labels, list) and all(isinstance(x, bool) for x in labels)):
            raise InputError(path, where, "`labels` must be a list of true/false")
        value = get_path(obj, field)
        present = present or value is not MISSING
        preds[rid] = Prediction(rid, first_error_value(value, path, where, field), step_count(obj), labels, obj)
    if preds and not present:
        raise InputError(path, "line 1", f"no record has the field {field!r}")
    return field or "first_error", preds


def detect_field(obj: dict[str, Any]) -> str:
    """Where a record of a known type keeps its first error."""
    if "labels" in obj and "first_error" in obj:
        return "first_error"  # consensus
    if isinstance(obj.get("judge"), dict) and not isinstance(obj.get("mc"), dict):
        return "judge.first_error"
    if isinstance(obj.get("mc"), dict) and not isinstance(obj.get("judge"), dict):
        return "mc.first_error"
    if "first_error" in obj:
        return "first_error"
    if "label" in obj:
        return "label"  # ProcessBench-style gold
    if isinstance(obj.get("judge"), dict):
        raise ValueError("the record has both mc.first_error and judge.first_error")
    raise ValueError("cannot tell where this record keeps its first error")
