"""Labels beyond the first error in the reports: where a record keeps its `recovery`, counts of
slips and corrections (`stats`), and the agreement of two sources on them (`compare`, and the
thinking world's measurement against the truth).

A record's recovery is found in `recovery` (a consensus record of the recovery rule, or a gold
file), else `mc.recovery` (rollout --recovery-rule), else `judge.recovery` (a recovery protocol);
null there is an unparsed reading. Agreement of a source with a reference, on the ids both read:

- slips: precision, recall and F1 of the slip steps (a slip is found when the source names a
  slip at the same step);
- corrections: of the reference's corrected slips, the share the source finds corrected at the
  same step (recall), and of the source's corrected slips, the share the reference has (precision);
- ends right: the share of traces where both say alike whether every slip was corrected;
- step labels: the share of steps whose `Recovery.step_labels` agree; exact: whole readings equal.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from prm_annotate.errors import InputError
from prm_annotate.recovery.labels import Recovery
from prm_annotate.evaluation.labels import MISSING, get_path, gold_sources, read_rows
from prm_annotate.evaluation.metrics import harmonic_mean

RECOVERY_FIELDS = ("recovery", "mc.recovery", "judge.recovery")
Reading = tuple[Recovery | None, int]  # (the reading, None when unparsed; the trace's steps)


def recovery_field(obj: dict[str, Any]) -> str | None:
    """The first of RECOVERY_FIELDS the record has (null included), None when it has none."""
    return next((f for f in RECOVERY_FIELDS if get_path(obj, f) is not MISSING), None)


def reading_of(obj: dict[str, Any], field: str, path: str, where: str) -> Reading:
    steps = obj.get("steps")
    if not isinstance(steps, list):
        raise InputError(path, where, f"a record with {field} needs its steps")
    value = get_path(obj, field)
    if value is None:
        return None, len(steps)
    try:
        return Recovery.from_json(value, len(steps)), len(steps)
    except ValueError as exc:
        raise InputError(path, where, f"{field}: {exc}") from None


def read_recoveries(path: str, field: str | None = None) -> tuple[str | None, dict[str, Reading]]:
    """(the field read, id -> reading) of a file; ({}) when its records have none."""
    out: dict[str, Reading] = {}
    for where, obj in read_rows(path):
        found = field or recovery_field(obj)
        if found is None or get_path(obj, found) is MISSING:
            continue
        field = found
        rid = obj.get("id")
        if not isinstance(rid, str):
            raise InputError(path, where, "a record with a recovery needs a string id")
        out[rid] = reading_of(obj, found, path, where)
    return field, out


def count(c: Counter, reading: Reading) -> None:
    """Add one reading to the tally `c` that `counted` shows (a file's readings need not be held)."""
    r = reading[0]
    c["traces"] += 1
    if r is None:
        c["unparsed"] += 1
        return
    c["slips"] += len(r.slips)
    c["corrected"] += len(r.corrected)
    c["uncaught"] += len(r.uncaught)
    c["with a corrected slip"] += bool(r.corrected)
    c["with an uncaught slip"] += bool(r.uncaught)
    c["without a slip"] += not r.slips


def counted(c: Counter) -> dict[str, int]:
    return {k: c[k] for k in ("traces", "slips", "corrected", "uncaught", "with a corrected slip",
                              "with an uncaught slip", "without a slip", "unparsed") if k in c or k == "traces"}


def counts(readings: Iterable[Reading]) -> dict[str, int]:
    c: Counter = Counter()
    for reading in readings:
        count(c, reading)
    return counted(c)


def _share(a: int, b: int) -> float | None:
    return 100.0 * a / b if b else None


def agreement(source: dict[str, Reading], reference: dict[str, Reading]) -> dict[str, Any]:
    """How `source` reads slips and corrections against `reference` (percentages), on the ids both
    read (a null reading of the source counts as read and wrong: it found nothing)."""
    ids = [i for i in source if i in reference and reference[i][0] is not None]
    c: Counter = Counter()
    for i in ids:
        ref, n = reference[i]
        got = source[i][0]
        assert ref is not None
        if got is None:
            c["unparsed"] += 1
            got = Recovery()
        c["exact"] += got == ref
        mine, theirs = {s.step: s.corrected_at for s in got.slips}, {s.step: s.corrected_at for s in ref.slips}
        c["slip tp"] += len(mine.keys() & theirs.keys())
        c["slips named"] += len(mine)
        c["slips true"] += len(theirs)
        pairs_mine = {(s, at) for s, at in mine.items() if at is not None}
        pairs_theirs = {(s, at) for s, at in theirs.items() if at is not None}
        c["correction tp"] += len(pairs_mine & pairs_theirs)
        c["corrections named"] += len(pairs_mine)
        c["corrections true"] += len(pairs_theirs)
        c["ends right alike"] += (not got.uncaught) == (not ref.uncaught)
        ours, true = got.step_labels(n), ref.step_labels(n)
        c["steps"] += n
        c["step labels alike"] += sum(a == b for a, b in zip(ours, true))
    p, r = _share(c["slip tp"], c["slips named"]), _share(c["slip tp"], c["slips true"])
    f1 = harmonic_mean(p, r)
    return {
        "traces": len(ids), "unparsed": c["unparsed"],
        "slip_precision": p, "slip_recall": r,
        "slip_f1": 0.0 if f1 is None and ids else f1,
        "correction_precision": _share(c["correction tp"], c["corrections named"]),
        "correction_recall": _share(c["correction tp"], c["corrections true"]),
        "ends_right_agreement": _share(c["ends right alike"], len(ids)),
        "step_label_agreement": _share(c["step labels alike"], c["steps"]),
        "exact": _share(c["exact"], len(ids)),
    }


def recovery_report(predictions: list[str], gold: list[str]) -> dict[str, Any] | None:
    """`evaluate`'s `recovery` section: the predictions' slips and corrections against the gold
    files' (each side's files read together); None when either side has none (a file of first
    errors only is evaluated as before)."""
    def merged(paths: list[str]) -> dict[str, Reading]:
        out: dict[str, Reading] = {}
        for path in paths:
            out.update(read_recoveries(path)[1])
        return out

    # Predictions first: when they hold first errors only, the gold is not read a second time. The
    # gold's folders (ProcessBench's layouts) are its split files, as `evaluate` reads them.
    preds = merged(predictions)
    if not preds:
        return None
    truth = merged([path for path, _ in gold_sources(gold)])
    if not truth:
        return None
    return {"counts": counts(preds.values()), "gold_counts": counts(truth.values()), **agreement(preds, truth)}
