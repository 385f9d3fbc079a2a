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
from typing import Any

from prm_annotate.errors import UsageError
from prm_annotate.evaluation.evaluate import evaluate
from prm_annotate.evaluation.labels import Gold, Prediction, load_predictions, step_labels
from prm_annotate.recovery.report import agreement as recovery_agreement
from prm_annotate.recovery.report import counts as recovery_counts
from prm_annotate.recovery.report import read_recoveries


@dataclass
class Source:
    name: str
    path: str
    field: str
    preds: dict[str, Prediction]


def parse_fields(items: list[str]) -> dict[str, str]:
    """`--field FILE=dotted.path` options, by file."""
    out: dict[str, str] = {}
    for item in items:
        path, sep, field = item.rpartition("=")
        if not sep or not path or not field:
            raise UsageError(f"--field takes FILE=dotted.path, got {item!r}")
        out[path] = field
    return out


def source_names(paths: list[str]) -> list[str]:
    """File stems, or whole paths where two stems collide."""
    stems = [Path(p).name.removesuffix(".jsonl").removesuffix(".json") for p in paths]
    return [p if stems.count(s) > 1 or s == "gold" else s for p, s in zip(paths, stems)]


def load_sources(paths: list[str], fields: dict[str, str]) -> list[Source]:
    unknown = set(fields) - set(paths)
    if unknown:
        raise UsageError(f"--field names a file that is not compared: {', '.join(sorted(unknown))}")
    sources = []
    for name, path in zip(source_names(paths), paths):
        field, preds = load_predictions(path, fields.get(path))
        sources.append(Source(name, path, field, preds))
    return sources


def agreement(columns: dict[str, dict[str, int | None]]) -> dict[str, dict[str, dict[str, Any]]]:
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    for a, col_a in columns.items():
        matrix[a] = {}
        for b, col_b in columns.items():
            shared = [i for i, v in col_a.items() if v is not None and col_b.get(i) is not None]
            same = sum(col_a[i] == col_b[i] for i in shared)
            matrix[a][b] = {"agree": 100.0 * same / len(shared) if shared else None, "shared": len(shared)}
    return matrix


def kept_label_precision(preds: dict[str, Prediction], gold: dict[str, Gold]) -> tuple[int, int]:
    """(step labels equal to gold, step labels compared) over the steps both sides label."""
    matched = compared = 0
    for rid, pred in preds.items():
        g = gold.get(rid)
        if g is None:
            continue
        n = g.n_steps if g.n_steps is not None else pred.n_steps
        if n is None:
            continue
        if pred.labels is not None:
            labels = pred.labels
        elif pred.first_error is not None:
            labels = step_labels(pred.first_error, n)
        else:
            continue
        for ours, theirs in zip(labels, step_labels(g.label, n)):
            compared += 1
            matched += ours == theirs
    return matched, compared


def _summary(report_dict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report_dict.items() if k not in ("missing_ids", "extra_ids")}


def compare_sources(sources: list[Source], gold: dict[str, Gold], *, split_field: str | None = None) -> dict[str, Any]:
    """The report of the module docstring: each source against the gold, and their agreement matrix."""
    columns: dict[str, dict[str, int | None]] = {"gold": {rid: g.label for rid, g in gold.items()}}
    report: dict[str, Any] = {"gold_records": len(gold), "sources": {}}
    for s in sources:
        columns[s.name] = {rid: p.first_error for rid, p in s.preds.items()}
        labelled = [rid for rid in gold if rid in s.preds and s.preds[rid].first_error is not None]
        kept = evaluate(gold, s.preds, split_field=split_field, pred_field=s.field, only=labelled)
        everything = evaluate(gold, s.preds, split_field=split_field, pred_field=s.field)
        matched, compared = kept_label_precision(s.preds, gold)
        report["sources"][s.name] = {
            "path": s.path,
            "field": s.field,
            "records": len(s.preds),
            "labelled": len(labelled),
            "coverage": 100.0 * len(labelled) / len(gold),
            "not_in_gold": len(everything.extra_ids),
            "kept": _summary(kept.to_dict()),
            "all": _summary(everything.to_dict()),
            "step_label_precision": 100.0 * matched / compared if compared else None,
            "step_labels_compared": compared,
        }
    report["agreement"] = agreement(columns)
    return report


def compare_recoveries(sources: list[Source], gold_path: str) -> dict[str, Any] | None:
    """The `recovery` section (see the module docstring); None when no source reads slips."""
    readings = {s.name: read_recoveries(s.path)[1] for s in sources}
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
