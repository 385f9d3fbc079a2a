"""The ProcessBench metric of first-error predictions against gold labels, and a few diagnostics.

ProcessBench (arXiv 2412.06559) scores each split on two groups: erroneous responses (label >= 0),
where a prediction is right only if it names exactly the gold first error, and correct responses
(label == -1), where it is right only if it says -1. F1 is the harmonic mean of the two accuracies
(in percent) and the headline number is the mean F1 over splits. A missing or null prediction is
wrong in either group.

Beyond the benchmark:
- detection rate: erroneous responses where the prediction flags any error (not -1, not missing);
- early / late / missed / missing counts on erroneous responses, false alarms on correct ones;
- step-level precision and recall of the "wrong" class, with step labels derived from first errors
  as in `labels.step_labels` (steps after a first error carry no label and are not compared).
  Only records with a prediction and a known step count (from the gold record, else the
  prediction record) take part.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from prm_annotate.reports.labels import MISSING, Gold, Prediction, get_path, step_labels


def accuracy(hits: int, total: int) -> float | None:
    # The share first, then percent: ProcessBench's script computes np.mean(matches) * 100, and
    # 100 * hits / total can differ from it in the last bit.
    return hits / total * 100 if total else None


def harmonic_mean(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 2 * a * b / (a + b) if a + b else 0.0


@dataclass
class SplitMetrics:
    n: int = 0
    n_error: int = 0
    n_correct: int = 0
    error_hits: int = 0
    correct_hits: int = 0
    # erroneous responses, by how the prediction relates to the gold first error
    early: int = 0
    late: int = 0
    missed: int = 0  # predicted -1
    missing: int = 0  # no prediction at all (any group)
    false_alarms: int = 0  # correct response, an error predicted
    # step level, "wrong" is the positive class
    step_tp: int = 0
    step_fp: int = 0
    step_fn: int = 0
    steps_compared: int = 0

    @property
    def error_acc(self) -> float | None:
        return accuracy(self.error_hits, self.n_error)

    @property
    def correct_acc(self) -> float | None:
        return accuracy(self.correct_hits, self.n_correct)

    @property
    def f1(self) -> float | None:
        return harmonic_mean(self.error_acc, self.correct_acc)

    @property
    def detection_rate(self) -> float | None:
        return accuracy(self.error_hits + self.early + self.late, self.n_error)

    @property
    def step_precision(self) -> float | None:
        return accuracy(self.step_tp, self.step_tp + self.step_fp)

    @property
    def step_recall(self) -> float | None:
        return accuracy(self.step_tp, self.step_tp + self.step_fn)

    def add(self, gold: Gold, pred: Prediction | None, n_steps: int | None) -> None:
        p = pred.first_error if pred is not None else None
        self.n += 1
        if p is None:
            self.missing += 1
        if gold.label == -1:
            self.n_correct += 1
            if p == -1:
                self.correct_hits += 1
            elif p is not None:
                self.false_alarms += 1
        else:
            self.n_error += 1
            if p == gold.label:
                self.error_hits += 1
            elif p == -1:
                self.missed += 1
            elif p is not None and p < gold.label:
                self.early += 1
            elif p is not None:
                self.late += 1
        if p is not None and n_steps is not None:
            self._add_steps(step_labels(gold.label, n_steps), step_labels(p, n_steps))

    def _add_steps(self, gold: list[bool], pred: list[bool]) -> None:
        for g, q in zip(gold, pred):  # only steps both sides label
            self.steps_compared += 1
            if not g and not q:
                self.step_tp += 1
            elif g and not q:
                self.step_fp += 1
            elif not g and q:
                self.step_fn += 1

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("error_acc", "correct_acc", "f1", "detection_rate", "step_precision", "step_recall"):
            out[name] = getattr(self, name)
        return out


@dataclass
class Report:
    splits: dict[str, SplitMetrics]
    missing_ids: list[str] = field(default_factory=list)  # gold ids without a prediction record
    extra_ids: list[str] = field(default_factory=list)  # prediction ids not in the gold file
    pred_field: str = "first_error"

    @property
    def average_f1(self) -> float | None:
        f1s = [m.f1 for m in self.splits.values()]
        if not f1s or any(f is None for f in f1s):
            return None
        return sum(f1s) / len(f1s)  # type: ignore[arg-type]

    @property
    def overall(self) -> SplitMetrics:
        total = SplitMetrics()
        for m in self.splits.values():
            for name, value in asdict(m).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "pred_field": self.pred_field,
            "splits": {name: m.to_dict() for name, m in self.splits.items()},
            "average_f1": self.average_f1,
            "overall": self.overall.to_dict(),
            "missing_predictions": len(self.missing_ids),
            "extra_predictions": len(self.extra_ids),
            "missing_ids": self.missing_ids,
            "extra_ids": self.extra_ids,
        }


def split_name(gold: Gold, pred: Prediction | None, split_field: str | None) -> str:
    if split_field is None:
        return gold.id.split("-", 1)[0]
    value = get_path(gold.record, split_field)
    if (value is MISSING or value is None) and pred is not None:
        value = get_path(pred.record, split_field)
    return "unknown" if value is MISSING or value is None else str(value)


def evaluate(gold: dict[str, Gold], preds: dict[str, Prediction], *, split_field: str | None = None,
             pred_field: str = "first_error", only: Iterable[str] | None = None) -> Report:
    """Score `preds` against `gold`, per split. `only` restricts the gold ids scored."""
    if only is None:
        ids = list(gold)
    else:
        wanted = set(only)
        ids = [i for i in gold if i in wanted]
    splits: dict[str, SplitMetrics] = defaultdict(SplitMetrics)
    missing: list[str] = []
    for rid in ids:
        g, p = gold[rid], preds.get(rid)
        if p is None:
            missing.append(rid)
        n_steps = g.n_steps if g.n_steps is not None else (p.n_steps if p is not None else None)
        splits[split_name(g, p, split_field)].add(g, p, n_steps)
    extra = [rid for rid in preds if rid not in gold]
    return Report(dict(sorted(splits.items())), missing, extra, pred_field)
