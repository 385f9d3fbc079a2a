"""The ProcessBench metric of first-error predictions against gold labels, and a few diagnostics.

ProcessBench (arXiv 2412.06559) scores each split on two groups: erroneous responses (label >= 0),
where a prediction is right only if it names exactly the gold first error, and correct responses
(label == -1), where it is right only if it says -1. F1 is the harmonic mean of the two accuracies
(in percent) and the headline number is the mean F1 over splits, unweighted (the paper's "Avg. F1":
Table 7 of arXiv 2501.07301 is the plain mean of its four split F1s; run_eval.py itself prints none).
A missing or null prediction is wrong in either group.

A PRM's predictions come from its step scores and a threshold: the first step scored below it, -1
if none (SCAN-PRM's `step_reward < threshold` rule). The threshold is given, or chosen on one split
(the one maximising F1 there, as the ProcessBench authors chose Skywork's on GSM8K: their issue #3)
and applied to the others; that split is then reported apart as tuned, never in the held-out mean.

Beyond the benchmark:
- detection rate: erroneous responses where the prediction flags any error (not -1, not missing);
- early / late / missed / missing counts on erroneous responses, false alarms on correct ones;
- step-level precision and recall of the "wrong" class, with step labels derived from first errors
  as in `labels.step_labels` (steps after a first error carry no label and are not compared).
  Only records with a prediction and a known step count (from the gold record, else the
  prediction record) take part.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

from prm_annotate.errors import UsageError
from prm_annotate.reports.labels import MISSING, PROCESSBENCH_SPLITS, Gold, Prediction, get_path, step_labels


def accuracy(hits: int, total: int) -> float | None:
    # The share first, then percent: ProcessBench's script computes np.mean(matches) * 100, and
    # 100 * hits / total can differ from it in the last bit.
    return hits / total * 100 if total else None


def harmonic_mean(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 2 * a * b / (a + b) if a + b else 0.0


def mean_f1(f1s: Iterable[float | None]) -> float | None:
    """The unweighted mean of split F1s (a split of 400 counts as much as one of 1000); None when
    any is undefined or there is none."""
    values = list(f1s)
    if not values or any(f is None for f in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


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


@dataclass(frozen=True)
class Threshold:
    """The threshold step scores were cut at: given, or tuned on one split."""
    value: float
    tuned_on: str | None = None  # None: given
    tuning_f1: float | None = None  # F1 on the tuning split at `value`
    candidates: int = 0  # distinct cuts tried when tuning

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "chosen": "given" if self.tuned_on is None else f"tuned on {self.tuned_on}",
                "tuned_on": self.tuned_on, "tuning_f1": self.tuning_f1, "candidates": self.candidates}


@dataclass
class Report:
    splits: dict[str, SplitMetrics]  # the splits reported on (held out from tuning, when tuned)
    missing_ids: list[str] = field(default_factory=list)  # gold ids without a prediction record
    extra_ids: list[str] = field(default_factory=list)  # prediction ids not in the gold file
    pred_field: str = "first_error"
    threshold: Threshold | None = None  # set when the predictions are step scores
    tuned: dict[str, SplitMetrics] = field(default_factory=dict)  # the split the threshold was tuned on

    @property
    def average_f1(self) -> float | None:
        return mean_f1(m.f1 for m in self.splits.values())

    @property
    def average_f1_with_tuned(self) -> float | None:
        """The mean over every split, the tuning split included: how the ProcessBench paper averages
        its Skywork rows (threshold from GSM8K), which is not a held-out number."""
        return mean_f1(m.f1 for m in [*self.splits.values(), *self.tuned.values()]) if self.tuned else None

    @property
    def overall(self) -> SplitMetrics:
        total = SplitMetrics()
        for m in self.splits.values():
            for name, value in asdict(m).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    def processbench(self) -> dict[str, Any]:
        """How the ProcessBench splits here compare with the full release: a number is comparable with
        published ones only on complete splits (all four, for the average)."""
        present = {**self.splits, **self.tuned}
        found = [s for s in PROCESSBENCH_SPLITS if s in present]
        if not found:
            return {}
        splits = {s: {"responses": present[s].n, "official": sum(PROCESSBENCH_SPLITS[s]),
                      "complete": (present[s].n_error, present[s].n_correct) == PROCESSBENCH_SPLITS[s]} for s in found}
        absent = [s for s in PROCESSBENCH_SPLITS if s not in present]
        return {"splits": splits, "absent": absent, "complete": not absent and all(v["complete"] for v in splits.values())}

    def to_dict(self) -> dict[str, Any]:
        return {
            "pred_field": self.pred_field,
            "threshold": None if self.threshold is None else self.threshold.to_dict(),
            "splits": {name: m.to_dict() for name, m in self.splits.items()},
            "average_f1": self.average_f1,
            "average_over": list(self.splits),
            "tuned_split": {name: m.to_dict() for name, m in self.tuned.items()},
            "average_f1_with_tuned_split": self.average_f1_with_tuned,
            "processbench": self.processbench(),
            "overall": self.overall.to_dict(),
            "missing_predictions": len(self.missing_ids),
            "extra_predictions": len(self.extra_ids),
            "missing_ids": self.missing_ids,
            "extra_ids": self.extra_ids,
        }


def split_name(gold: Gold, pred: Prediction | None, split_field: str | None) -> str:
    """`split_field` of the record if named, else the split of the gold's file, else its id prefix."""
    if split_field is None:
        return gold.split if gold.split is not None else gold.id.split("-", 1)[0]
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


def first_below(scores: list[float], threshold: float) -> int:
    """The first step scored below `threshold`, -1 if none (SCAN-PRM's main_pb.py rule)."""
    return next((i for i, s in enumerate(scores) if s < threshold), -1)


def at_threshold(preds: dict[str, Prediction], threshold: float) -> dict[str, Prediction]:
    """Predictions with first errors cut from their step scores (None where a record has none)."""
    return {rid: replace(p, first_error=None if p.scores is None else first_below(p.scores, threshold))
            for rid, p in preds.items()}


def hit_interval(gold: Gold, scores: list[float]) -> tuple[float, float] | None:
    """The thresholds t at which `first_below(scores, t)` equals the gold label, as (a, b] (a < t <= b),
    or None when no threshold does: -1 needs every score >= t; step k needs scores[k] < t and every
    score before it >= t."""
    if gold.label == -1:
        return (-math.inf, min(scores))
    if gold.label >= len(scores):
        return None
    before = min(scores[:gold.label], default=math.inf)
    return (scores[gold.label], before) if scores[gold.label] < before else None


def cut_points(scores: Iterable[float]) -> list[float]:
    """One threshold in [0, 1] per distinct outcome of `first_below` over these scores: 0 (nothing
    flagged), the midpoint between each two neighbouring distinct scores, and between the highest and 1."""
    values = sorted(set(scores))
    points = [0.0] + [(a + b) / 2 for a, b in zip(values, values[1:])]
    if values and values[-1] < 1.0:
        points.append((values[-1] + 1.0) / 2)
    return sorted(set(points))


def tune_threshold(golds: list[Gold], preds: dict[str, Prediction], split: str) -> Threshold:
    """The threshold with the highest F1 on `golds` (one split), over every distinct cut of its
    scores; ties go to the lowest. Each response is right on an interval of thresholds
    (`hit_interval`), so every cut is counted by bisection instead of re-predicting the split."""
    n_error = sum(g.label != -1 for g in golds)
    n_correct = len(golds) - n_error
    if not n_error or not n_correct:
        raise UsageError(f"--tune-threshold-on {split}: F1 needs erroneous and correct responses; the split has "
                         f"{n_error} erroneous and {n_correct} correct")
    lows, highs, correct_mins, all_scores = [], [], [], []
    for g in golds:
        p = preds.get(g.id)
        if p is None or p.scores is None:
            continue  # wrong at every threshold
        all_scores += p.scores
        interval = hit_interval(g, p.scores)
        if interval is None:
            continue
        if g.label == -1:
            correct_mins.append(interval[1])
        else:
            lows.append(interval[0])
            highs.append(interval[1])
    for values in (lows, highs, correct_mins):
        values.sort()
    best_f1, best_t = -1.0, 0.0
    points = cut_points(all_scores)
    for t in points:
        error_hits = bisect_left(lows, t) - bisect_left(highs, t)  # a < t, less those with b < t too
        correct_hits = len(correct_mins) - bisect_left(correct_mins, t)
        f1 = harmonic_mean(100.0 * error_hits / n_error, 100.0 * correct_hits / n_correct) or 0.0
        if f1 > best_f1:
            best_f1, best_t = f1, t
    return Threshold(best_t, tuned_on=split, tuning_f1=best_f1, candidates=len(points))


def evaluate_scores(gold: dict[str, Gold], preds: dict[str, Prediction], *, threshold: float | None = None,
                    tune_on: str | None = None, split_field: str | None = None,
                    pred_field: str = "prm.scores") -> Report:
    """The metric of step-score predictions cut at `threshold`, or at the threshold tuned on split
    `tune_on` (that split then reported in `Report.tuned`, the others in `Report.splits`)."""
    if (threshold is None) == (tune_on is None):
        raise UsageError("give a threshold or a split to tune it on, not both")
    for rid, g in gold.items():
        p = preds.get(rid)
        if p is not None and p.scores is not None and g.n_steps is not None and len(p.scores) != g.n_steps:
            raise UsageError(f"{rid}: {len(p.scores)} step scores for the gold's {g.n_steps} steps "
                             "(the scored response is not the gold one)")
    if tune_on is None:
        chosen = Threshold(threshold)  # type: ignore[arg-type]
    else:
        split_of = {rid: split_name(g, preds.get(rid), split_field) for rid, g in gold.items()}
        if tune_on not in split_of.values():
            raise UsageError(f"--tune-threshold-on {tune_on}: no such split in the gold "
                             f"(splits: {', '.join(sorted(set(split_of.values())))})")
        chosen = tune_threshold([g for rid, g in gold.items() if split_of[rid] == tune_on], preds, tune_on)
    report = evaluate(gold, at_threshold(preds, chosen.value), split_field=split_field, pred_field=pred_field)
    report.threshold = chosen
    if tune_on is not None:
        report.tuned = {tune_on: report.splits.pop(tune_on)}
    return report
