"""What `evaluate` and `compare` hold per id (issue 59): the gold's first errors and each label
source's predictions in columns by the gold id's position, never a record or an object per id.

- `GoldSet`: per gold id, in the gold's order, its first error, step count and split (a number
  for a name: a million records share a few splits), and its id as a 12-byte key (io/id_keys.py)
  with the keys' sorted index: 36 bytes an id.
- `PredictionSet`: one source's files read once, streaming, against a `GoldSet`: per gold position
  its first error (or that it has none, or no record), its step count, and with --split-field its
  split; records outside the gold only as their id keys and first errors (two sources' agreement
  counts them); what compare's step-label precision needs is counted as the records pass. About
  8 bytes a gold id a source (28 for a record outside the gold; with --tune-threshold-on, the
  step scores: 8 bytes a step).

Every file is checked whole, in order, as before: a bad line is an error naming its file and line;
a repeated id is found from the keys (inline for a gold id, else at the end or before another error
is raised) and named by reading the files again, with the message of `labels.records_by_id`.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, NoReturn, Sequence

from prm_annotate.errors import InputError
from prm_annotate.evaluation.labels import (MISSING, detected_field, first_error_value, get_path, gold_value,
                                            labels_value, read_rows, records_by_id, split_value, step_count,
                                            step_labels, step_scores_value)
from prm_annotate.evaluation.metrics import first_below
from prm_annotate.io.id_keys import IdIndex
from prm_annotate.io.jsonl import is_stream

NO_PREDICTION = -2  # a record whose prediction is missing or null (an unparsed judgement)
ABSENT = -3  # no record at all
UNSET = -1  # a step count or split the record does not give


class Names:
    """Split names as numbers, in the order first met."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._numbers: dict[str, int] = {}

    def number(self, name: str) -> int:
        found = self._numbers.get(name)
        if found is None:
            found = self._numbers[name] = len(self.names)
            self.names.append(name)
        return found


class _Reading:
    """The records of a set of files read once, in order, each with its id. A stream (`-`, a pipe)
    cannot be read again to name a repeated id: with one among the files, the ids are held (as
    before) and a repeat is said where it is met."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.count = 0
        self.held: dict[str, tuple[str, str]] | None = {} if any(is_stream(p) for p in paths) else None

    def records(self, at_end: Callable[[int, int], None]) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
        """(file number, where, id, record); `at_end(file number, its records)` after each file."""
        for k, path in enumerate(self.paths):
            start = self.count
            for where, rid, obj in self._rows(path) if self.held is None else records_by_id(path, self.held):
                self.count += 1
                yield k, where, rid, obj
            at_end(k, self.count - start)

    @staticmethod
    def _rows(path: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for where, obj in read_rows(path):
            rid = obj.get("id")
            if not isinstance(rid, str) or not rid:
                raise InputError(path, where, "record has no string `id`")
            yield where, rid, obj

    def check(self, ids: IdIndex) -> None:
        if ids.duplicated():
            self.repeated()

    def repeated(self) -> NoReturn:
        """Name the first id met twice among the records read so far, as `records_by_id` does."""
        seen: dict[str, tuple[str, str]] = {}
        left = self.count
        for path in self.paths:
            for _ in records_by_id(path, seen):
                left -= 1
                if not left:
                    break
            if not left:
                break
        raise InputError(self.paths[-1], "line 0", "two different ids share one 96-bit digest (io/id_keys.py)")


@dataclass
class GoldSet:
    paths: list[str]
    ids: IdIndex = field(default_factory=IdIndex)
    label: array = field(default_factory=lambda: array("i"))
    n_steps: array = field(default_factory=lambda: array("i"))  # UNSET: the record has no steps
    split: array = field(default_factory=lambda: array("i"))  # UNSET: no --split-field value (the prediction's then)
    names: Names = field(default_factory=Names)
    held_ids: list[str] | None = None  # a stream's ids: it cannot be read again to name them

    def __len__(self) -> int:
        return len(self.label)

    def ids_at(self, positions: Sequence[int]) -> list[str]:
        """The ids at these positions (in the order given), read again from the files."""
        if self.held_ids is not None:
            return [self.held_ids[i] for i in positions]
        wanted = set(positions)
        found: dict[int, str] = {}
        at = 0
        for path in self.paths:
            for _, obj in read_rows(path):
                if at in wanted:
                    found[at] = obj["id"]
                at += 1
        return [found[i] for i in positions]


def read_gold(sources: list[tuple[str, str | None]], label_field: str = "label",
              split_field: str | None = None) -> GoldSet:
    """The gold of (file, split) pairs (`labels.gold_sources`): an id twice, a file without records
    or a bad label is bad input, as `labels.load_gold` says it."""
    paths = [path for path, _ in sources]
    gold = GoldSet(paths, held_ids=[] if any(is_stream(p) for p in paths) else None)
    reading = _Reading(paths)

    def at_end(k: int, records: int) -> None:
        if not records:
            raise InputError(paths[k], "line 0", "the gold file has no records")

    try:
        for k, where, rid, obj in reading.records(at_end):
            gold.ids.add(rid)  # before the record's checks: a repeated id is said first, as records_by_id does
            path, split = sources[k]
            label, n_steps = gold_value(path, where, rid, obj, label_field, split)
            gold.label.append(label)
            gold.n_steps.append(UNSET if n_steps is None else n_steps)
            if split_field is None:
                gold.split.append(gold.names.number(split if split is not None else rid.split("-", 1)[0]))
            else:
                gold.split.append(_split_number(gold.names, obj, split_field))
            if gold.held_ids is not None:
                gold.held_ids.append(rid)
    except InputError:
        reading.check(gold.ids)
        raise
    reading.check(gold.ids)
    return gold


def _split_number(names: Names, obj: dict[str, Any], split_field: str) -> int:
    value = split_value(obj, split_field)
    return UNSET if value is MISSING or value is None else names.number(str(value))


@dataclass
class PredictionSet:
    gold: GoldSet  # the gold it was read against: its positions are this set's
    field: str
    first_error: array  # per gold position: the prediction, NO_PREDICTION or ABSENT
    n_steps: array  # per gold position: the record's step count, UNSET
    split: array | None  # with --split-field: per gold position, the record's split number, UNSET
    records: int = 0
    first_id: str | None = None
    nulls: int = 0  # records (in the gold or not) without a prediction
    extra: IdIndex = field(default_factory=IdIndex)  # records outside the gold
    extra_first_error: array = field(default_factory=lambda: array("i"))
    extra_ids: list[str] | None = None  # their ids, when a report lists them
    label_matched: int = 0  # step labels equal to the gold's, over the steps both label
    label_compared: int = 0
    scores: array = field(default_factory=lambda: array("d"))  # kept step scores (tuning a threshold)
    score_start: array | None = None  # per gold position: where its scores start in `scores`, UNSET
    score_len: array | None = None  # per gold position: how many
    score_mismatch: tuple[int, int] | None = None  # (gold position, scores) of the first wrong count, in gold order
    watched: bool = False  # some record met `watch`

    def matched(self) -> int:
        return sum(1 for p in self.first_error if p != ABSENT)

    def scores_at(self, i: int) -> Sequence[float] | None:
        assert self.score_start is not None and self.score_len is not None
        start = self.score_start[i]
        if start == UNSET:
            return None
        return self.scores[start:start + self.score_len[i]]

    def first_error_of(self, rid: str) -> int | None:
        """The prediction of id `rid` (None: none, or no record)."""
        i, j = self.gold.ids.find(rid), self.extra.find(rid)
        p = self.first_error[i] if i >= 0 else self.extra_first_error[j] if j >= 0 else ABSENT
        return None if p < -1 else p


def read_predictions(paths: list[str], pred_field: str | None, gold: GoldSet, *, scores: str | float | None = None,
                     split_field: str | None = None, name_extra: bool = False, count_labels: bool = False,
                     watch: Callable[[dict[str, Any]], bool] | None = None) -> PredictionSet:
    """One source's predictions (its files read as one set) against `gold`. The field is `pred_field`,
    else detected from the first record. `scores`: the field holds step scores (`prm.scores` unless
    named), cut at that threshold, or "keep" to keep them (a threshold tuned later; `cut_at`).
    A field that no record of a file has is bad input (a misspelt --pred-field would score as "no
    prediction"), as are a repeated id and a bad value, each named by file and line. `count_labels`:
    count the step labels that agree with the gold's (compare's precision); `watch`: note whether
    some record meets it (`PredictionSet.watched`)."""
    n = len(gold)
    preds = PredictionSet(gold, pred_field or ("prm.scores" if scores is not None else ""), array("i", [ABSENT]) * n,
                          array("i", [UNSET]) * n, array("i", [UNSET]) * n if split_field is not None else None,
                          extra_ids=[] if name_extra else None,
                          score_start=array("q", [UNSET]) * n if scores == "keep" else None,
                          score_len=array("i", [0]) * n if scores == "keep" else None)
    reading = _Reading(paths)
    present = [False] * len(paths)

    def at_end(k: int, records: int) -> None:
        if records and not present[k]:
            raise InputError(paths[k], "line 1", f"no record has the field {preds.field!r}")

    try:
        for k, where, rid, obj in reading.records(at_end):
            i = gold.ids.find(rid)
            if i < 0:
                preds.extra.add(rid)  # before the record's checks, as records_by_id says a repeat first
            elif preds.first_error[i] != ABSENT:
                reading.repeated()
            path = paths[k]
            if not preds.field:
                preds.field = detected_field(obj, path, where)
            labels = labels_value(obj, path, where)
            value = get_path(obj, preds.field)
            present[k] = present[k] or value is not MISSING
            n_steps = step_count(obj)
            kept: list[float] | None = None
            if scores is None:
                first = first_error_value(value, path, where, preds.field)
            else:
                kept = step_scores_value(value, path, where, preds.field, n_steps)
                first = None if kept is None or scores == "keep" else first_below(kept, scores)  # type: ignore[arg-type]
            preds.records += 1
            preds.first_id = preds.first_id or rid
            preds.nulls += first is None and kept is None
            preds.watched = preds.watched or (watch is not None and watch(obj))
            code = NO_PREDICTION if first is None else first
            if i < 0:
                preds.extra_first_error.append(code)
                if preds.extra_ids is not None:
                    preds.extra_ids.append(rid)
                continue
            preds.first_error[i] = code
            preds.n_steps[i] = UNSET if n_steps is None else n_steps
            if preds.split is not None:
                preds.split[i] = _split_number(gold.names, obj, split_field)  # type: ignore[arg-type]
            if kept is not None:
                _keep_scores(preds, gold, i, kept)
            if count_labels:
                _count_step_labels(preds, gold, i, labels, first, n_steps)
    except InputError:
        reading.check(preds.extra)
        raise
    reading.check(preds.extra)
    preds.field = preds.field or "first_error"
    return preds


def _keep_scores(preds: PredictionSet, gold: GoldSet, i: int, kept: list[float]) -> None:
    """Note the first gold position (in the gold's order) whose scores do not count its steps; keep
    the scores when a threshold is tuned on them later."""
    g_steps = gold.n_steps[i]
    if g_steps != UNSET and len(kept) != g_steps and (preds.score_mismatch is None or i < preds.score_mismatch[0]):
        preds.score_mismatch = (i, len(kept))
    if preds.score_start is not None and preds.score_len is not None:
        preds.score_start[i] = len(preds.scores)
        preds.score_len[i] = len(kept)
        preds.scores.extend(kept)


def _count_step_labels(preds: PredictionSet, gold: GoldSet, i: int, labels: list[bool] | None,
                       first: int | None, n_steps: int | None) -> None:
    """The precision of a source's kept step labels against the gold's, over the steps both label
    (a consensus record's own `labels` as they are, else labels from its first error)."""
    n = gold.n_steps[i] if gold.n_steps[i] != UNSET else n_steps
    if n is None:
        return
    if labels is None:
        if first is None:
            return
        labels = step_labels(first, n)
    for ours, theirs in zip(labels, step_labels(gold.label[i], n)):
        preds.label_compared += 1
        preds.label_matched += ours == theirs


def cut_at(preds: PredictionSet, gold: GoldSet, threshold: float) -> PredictionSet:
    """Kept step scores cut at `threshold`: each gold position's first error (records outside the gold
    are listed, never scored)."""
    first_error = array("i", preds.first_error)
    for i in range(len(first_error)):
        kept = preds.scores_at(i)
        if kept is not None:
            first_error[i] = first_below(kept, threshold)
    return replace(preds, first_error=first_error)
