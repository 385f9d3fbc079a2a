"""Labelled examples from records: the problem, the labelled steps, their labels and MC scores.

Inputs: consensus records (their own `labels`), rollout records (labels from `mc.first_error`),
judged records (from `judge.first_error`; unjudged records are skipped) or ProcessBench-style
records (from `label`). Labels follow `labels.step_labels`: right before the first error, wrong at
it; steps after the first error are dropped, exactly as `consensus` truncates. With
`recovery=True` (`export --labels recovery`) the labels are the record's `Recovery.step_labels`
over every step instead: a consensus record's own `recovery` (the recovery rule's), a rollout's
`mc.recovery`, a judged record's `judge.recovery`; a record without one is skipped, counted.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from pydantic import ValidationError

from prm_annotate.errors import InputError
from prm_annotate.io.jsonl import is_stream
from prm_annotate.records import Consensus, Judged, Rollout, recovery_of
from prm_annotate.records import describe_validation_error
from prm_annotate.evaluation.labels import read_raw, step_labels
from prm_annotate.strategies.verify import Verify


@dataclass
class Example:
    id: str
    problem: str
    steps: list[str]  # the labelled steps only
    labels: list[bool]
    scores: list[float | None] | None  # MC scores of those steps, when the record has them


@dataclass
class ExportSummary:
    read: int = 0
    written: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> records
    step_end: str | None = None  # tokens: the marker used


def _validated(model: Any, obj: dict[str, Any], path: str, where: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise InputError(path, where, describe_validation_error(exc)) from None


def not_mc_labels(obj: dict[str, Any]) -> str | None:
    """Why a record's MC fields are no labels to train on (a verify rollout), else None."""
    mc = obj.get("mc")
    if isinstance(mc, dict) and mc.get("strategy") == Verify.name:
        return (f"a rollout of --strategy {Verify.name} holds MC evidence at the judge's first error and the step "
                "before it, not MC labels: run `prm-annotate consensus` on it with the judged file it was verified "
                "against, and export (or train on) the consensus")
    return None


NO_RECOVERY = "no recovery labels (--labels recovery)"


def _recovery_example(rec: Any, recovery: Any, scores: list[float | None] | None) -> Example | str:
    if recovery is None:
        return NO_RECOVERY
    return Example(rec.id, rec.problem, list(rec.steps), recovery.step_labels(len(rec.steps)), scores)


def example_from(obj: dict[str, Any], path: str, where: str, recovery: bool = False) -> Example | str:
    """The labelled example of a record, or the reason it has none."""
    if obj.get("thought_finished") is False:  # never labelled as if it had answered (thinking/tags.py)
        return "an unfinished thought (no </think> before the cut): no answer to label"
    if "labels" in obj:
        rec = _validated(Consensus, obj, path, where)
        scores = rec.mc.scores[: len(rec.steps)]
        if recovery:
            return _recovery_example(rec, rec.recovery, scores)
        if rec.recovery is not None:  # the recovery rule's record, cut as the paper cuts
            labels = step_labels(rec.first_error, len(rec.steps))
            return Example(rec.id, rec.problem, rec.steps[: len(labels)], labels, scores[: len(labels)])
        return Example(rec.id, rec.problem, rec.steps, rec.labels, scores)
    if isinstance(obj.get("mc"), dict):
        refused = not_mc_labels(obj)
        if refused:
            raise InputError(path, where, refused)
        rec = _validated(Rollout, obj, path, where)
        if recovery:
            return _recovery_example(rec, recovery_of(rec.mc, len(rec.steps)), rec.mc.scores)
        labels = step_labels(rec.mc.first_error, len(rec.steps))
        return Example(rec.id, rec.problem, rec.steps[: len(labels)], labels, rec.mc.scores[: len(labels)])
    if isinstance(obj.get("judge"), dict):
        rec = _validated(Judged, obj, path, where)
        if recovery:
            if "recovery" in (rec.judge.model_extra or {}) and recovery_of(rec.judge, len(rec.steps)) is None:
                return "no parsed judgement"
            return _recovery_example(rec, recovery_of(rec.judge, len(rec.steps)), None)
        if rec.judge.first_error is None:
            return "no parsed judgement"
        labels = step_labels(rec.judge.first_error, len(rec.steps))
        return Example(rec.id, rec.problem, rec.steps[: len(labels)], labels, None)
    if recovery:
        return NO_RECOVERY
    if "label" in obj and isinstance(obj.get("steps"), list):
        label, steps = obj["label"], obj["steps"]
        if isinstance(label, bool) or not isinstance(label, int) or not -1 <= label < len(steps):
            raise InputError(path, where, f"label must be a step index in -1..{len(steps) - 1}, got {label!r}")
        if not isinstance(obj.get("id"), str) or not isinstance(obj.get("problem"), str):
            raise InputError(path, where, "record needs a string `id` and `problem`")
        labels = step_labels(label, len(steps))
        return Example(obj["id"], obj["problem"], steps[: len(labels)], labels, None)
    raise InputError(path, where, "not a consensus, rollout, judged or ProcessBench record "
                                  "(needs `labels`, `mc`, `judge`, or `label` with `steps`)")


def read_examples(path: str, summary: ExportSummary, recovery: bool = False) -> Iterator[tuple[str, Example]]:
    # Per id, where it was only for a stream: a file is read again to name a duplicate's first line (rare).
    stream = is_stream(path)
    seen: dict[str, str | None] = {}
    for where, obj in read_raw(path):
        summary.read += 1
        example = example_from(obj, path, where, recovery)
        if isinstance(example, str):
            summary.skipped[example] += 1
            continue
        if example.id in seen:
            first = seen[example.id] or next(w for w, o in read_raw(path) if o.get("id") == example.id
                                             and not isinstance(example_from(o, path, w, recovery), str))
            raise InputError(path, where, f"duplicate id {example.id!r} (first seen at {first})")
        seen[example.id] = where if stream else None
        yield where, example
