"""Several label sources on the same responses, side by side: which annotation to trust.

Each source is a file of records with a first error (a rollout file: `mc.first_error`; a judged
file: `judge.first_error`; a consensus file: `first_error`; detected, or named with FILE=path).
The report has
- an agreement matrix: for each pair of sources (the gold included), the share of ids both label
  (a non-null first error) on which their first errors are equal;
- each source against the gold: its coverage (gold ids it labels), the ProcessBench metric on the
  ids it labels ("kept") and on all gold ids (unlabelled ones counted wrong), and the precision of
  its kept step labels: the share of its step labels equal to the gold's step labels, compared on
  the steps both label (see `labels.step_labels`; a consensus file's own `labels` are used as they are);
- where sources read slips and corrections (`recovery`, `mc.recovery`, `judge.recovery`:
  recovery/report.py), a `recovery` section: each such source's counts, its agreement with the
  gold's recovery when the gold file has one, and the share of traces each pair reads alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from prm_annotate.errors import UsageError
from prm_annotate.evaluation.evaluate import evaluate
from prm_annotate.evaluation.label_sets import GoldSet, PredictionSet, read_predictions
from prm_annotate.recovery.report import agreement as recovery_agreement
from prm_annotate.recovery.report import counts as recovery_counts
from prm_annotate.recovery.report import read_recoveries


@dataclass
class Source:
    name: str
    path: str
    field: str
    preds: PredictionSet

    @classmethod
    def read(cls, name: str, path: str, field: str | None, gold: GoldSet, *, split_field: str | None = None,
             watch: Callable[[dict[str, Any]], bool] | None = None) -> Source:
        """A file's first errors (at `field`, else detected) read against `gold`."""
        preds = read_predictions([path], field, gold, split_field=split_field, count_labels=True, watch=watch)
        return cls(name, path, preds.field, preds)


def parse_fields(items: list[str], paths: list[str]) -> dict[str, str]:
    """`--field FILE=dotted.path` options, by file; each FILE one of the compared `paths`."""
    out: dict[str, str] = {}
    for item in items:
        path, sep, field = item.rpartition("=")
        if not sep or not path or not field:
            raise UsageError(f"--field takes FILE=dotted.path, got {item!r}")
        out[path] = field
    unknown = set(out) - set(paths)
    if unknown:
        raise UsageError(f"--field names a file that is not compared: {', '.join(sorted(unknown))}")
    return out


def source_names(paths: list[str]) -> list[str]:
    """File stems, or whole paths where two stems collide."""
    stems = [Path(p).name.removesuffix(".jsonl").removesuffix(".json") for p in paths]
    return [p if stems.count(s) > 1 or s == "gold" else s for p, s in zip(paths, stems)]


def load_sources(paths: list[str], fields: dict[str, str], gold: GoldSet, *, split_field: str | None = None,
                 watch: Callable[[dict[str, Any]], bool] | None = None) -> list[Source]:
    """Each file's first errors (at its `fields` entry, else detected) read against `gold`
    (label_sets.py: what is held per id)."""
    return [Source.read(name, path, fields.get(path), gold, split_field=split_field, watch=watch)
            for name, path in zip(source_names(paths), paths)]


def _cell(same: int, shared: int) -> dict[str, Any]:
    return {"agree": 100.0 * same / shared if shared else None, "shared": shared}


def agreement(columns: Mapping[str, Mapping[str, int | None]]) -> dict[str, dict[str, dict[str, Any]]]:
    """For each pair of columns (id -> first error, None: unlabelled), the share of ids both label
    on which their first errors are equal (the HTML report's columns; compare's are `sources_agreement`)."""
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    for a, col_a in columns.items():
        matrix[a] = {}
        for b, col_b in columns.items():
            shared = [i for i, v in col_a.items() if v is not None and col_b.get(i) is not None]
            matrix[a][b] = _cell(sum(col_a[i] == col_b[i] for i in shared), len(shared))
    return matrix


def _labelled(code: int) -> bool:
    return code >= -1  # not NO_PREDICTION, not ABSENT


def _pair(a: PredictionSet | None, b: PredictionSet | None, gold: GoldSet) -> dict[str, Any]:
    """`agreement`'s cell for two columns by gold position (None: the gold's, which labels every id)."""
    ga = gold.label if a is None else a.first_error
    gb = gold.label if b is None else b.first_error
    shared = same = 0
    for x, y in zip(ga, gb):
        if _labelled(x) and _labelled(y):
            shared += 1
            same += x == y
    if a is not None and b is not None:  # ids outside the gold that both sources have
        for j, x in enumerate(a.extra_first_error):
            if not _labelled(x):
                continue
            k = b.extra.find_key(a.extra.keys[j], a.extra.checks[j])
            if k >= 0 and _labelled(b.extra_first_error[k]):
                shared += 1
                same += x == b.extra_first_error[k]
    return _cell(same, shared)


def sources_agreement(sources: list[Source], gold: GoldSet) -> dict[str, dict[str, dict[str, Any]]]:
    """`agreement` of the gold's column and each source's, from their columns by gold position."""
    columns: list[tuple[str, PredictionSet | None]] = [("gold", None), *((s.name, s.preds) for s in sources)]
    pairs: dict[tuple[int, int], dict[str, Any]] = {}
    for i, (_, pa) in enumerate(columns):
        for j, (_, pb) in enumerate(columns[i:], start=i):
            pairs[i, j] = _pair(pa, pb, gold)  # the same both ways
    return {a: {b: dict(pairs[min(i, j), max(i, j)]) for j, (b, _) in enumerate(columns)}
            for i, (a, _) in enumerate(columns)}


def _summary(report_dict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report_dict.items() if k not in ("missing_ids", "extra_ids")}


def compare_sources(sources: list[Source], gold: GoldSet) -> dict[str, Any]:
    """The report of the module docstring: each source against the gold, and their agreement matrix."""
    report: dict[str, Any] = {"gold_records": len(gold), "sources": {}}
    for s in sources:
        labelled = sum(1 for p in s.preds.first_error if _labelled(p))
        kept = evaluate(gold, s.preds, pred_field=s.field, labelled_only=True, name_ids=False)
        everything = evaluate(gold, s.preds, pred_field=s.field, name_ids=False)
        matched, compared = s.preds.label_matched, s.preds.label_compared
        report["sources"][s.name] = {
            "path": s.path,
            "field": s.field,
            "records": s.preds.records,
            "labelled": labelled,
            "coverage": 100.0 * labelled / len(gold),
            "not_in_gold": everything.extra,
            "kept": _summary(kept.to_dict()),
            "all": _summary(everything.to_dict()),
            "step_label_precision": 100.0 * matched / compared if compared else None,
            "step_labels_compared": compared,
        }
    report["agreement"] = sources_agreement(sources, gold)
    return report


def compare_recoveries(sources: list[Source], gold_path: str) -> dict[str, Any] | None:
    """The `recovery` section (see the module docstring); None when no source reads slips."""
    readings = {s.name: read_recoveries(s.path)[1] for s in sources if s.preds.watched}
    readings = {name: r for name, r in readings.items() if r}
    if not readings:
        return None
    _, gold = read_recoveries(gold_path)
    out: dict[str, Any] = {"sources": {}, "agreement": {}}
    for name, r in readings.items():
        out["sources"][name] = {"counts": recovery_counts(r.values()),
                                "against_gold": recovery_agreement(r, gold) if gold else None}
        out["agreement"][name] = {other: recovery_agreement(r, o)["exact"] for other, o in readings.items()}
    return out
