"""The ProcessBench metric of first-error predictions against gold labels, and a few diagnostics
(the rates, F1, threshold rules and tuning are metrics.py's).

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

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from prm_annotate.errors import UsageError
from prm_annotate.evaluation.label_sets import ABSENT, UNSET, GoldSet, PredictionSet, cut_at
from prm_annotate.evaluation.labels import PROCESSBENCH_SPLITS, step_labels
from prm_annotate.evaluation.metrics import Threshold, accuracy, harmonic_mean, lowest_best_threshold, mean_f1


@dataclass
class SplitMetrics:
    n_error: int = 0  # responses the gold gives a first error
    n_correct: int = 0  # responses the gold calls correct (-1)
    error_hits: int = 0  # erroneous responses whose first error is predicted exactly
    correct_hits: int = 0  # correct responses predicted correct
    # erroneous responses, by how the prediction relates to the gold first error
    early: int = 0  # an error predicted before the gold's
    late: int = 0  # an error predicted after the gold's
    missed: int = 0  # predicted -1
    missing: int = 0  # no prediction at all (any group)
    false_alarms: int = 0  # correct response, an error predicted
    # step level, "wrong" is the positive class
    step_tp: int = 0
    step_fp: int = 0
    step_fn: int = 0
    steps_compared: int = 0

    @property
    def n(self) -> int:
        """The responses scored: every one is erroneous or correct by the gold."""
        return self.n_error + self.n_correct

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

    def add(self, label: int, p: int | None, n_steps: int | None) -> None:
        """One gold response of first error `label`, predicted `p` (None: no prediction)."""
        if p is None:
            self.missing += 1
        if label == -1:
            self.n_correct += 1
            if p == -1:
                self.correct_hits += 1
            elif p is not None:
                self.false_alarms += 1
        else:
            self.n_error += 1
            if p == label:
                self.error_hits += 1
            elif p == -1:
                self.missed += 1
            elif p is not None and p < label:
                self.early += 1
            elif p is not None:
                self.late += 1
        if p is not None and n_steps is not None:
            self._add_steps(step_labels(label, n_steps), step_labels(p, n_steps))

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
        out = {"n": self.n, **asdict(self)}
        for name in ("error_acc", "correct_acc", "f1", "detection_rate", "step_precision", "step_recall"):
            out[name] = getattr(self, name)
        return out


@dataclass
class Report:
    splits: dict[str, SplitMetrics]  # the splits reported on (held out from tuning, when tuned)
    missing_ids: list[str] = field(default_factory=list)  # gold ids without a prediction record (when named)
    extra_ids: list[str] = field(default_factory=list)  # prediction ids not in the gold file (when named)
    pred_field: str = "first_error"
    threshold: Threshold | None = None  # set when the predictions are step scores
    tuned: dict[str, SplitMetrics] = field(default_factory=dict)  # the split the threshold was tuned on
    missing: int = 0  # gold ids without a prediction record
    extra: int = 0  # prediction records outside the gold

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
            "missing_predictions": self.missing,
            "extra_predictions": self.extra,
            "missing_ids": self.missing_ids,
            "extra_ids": self.extra_ids,
        }


def split_numbers(gold: GoldSet, preds: PredictionSet) -> list[int]:
    """Each gold id's split (a number of `gold.names`): the --split-field of the gold record, else of
    the prediction record, else "unknown"; without --split-field the gold file's split, else the id's
    prefix (set when the gold was read)."""
    if preds.split is None:
        return list(gold.split)
    unknown = None
    out = list(gold.split)
    for i, s in enumerate(out):
        if s == UNSET:
            s = preds.split[i]
            if s == UNSET:
                unknown = gold.names.number("unknown") if unknown is None else unknown
                s = unknown
            out[i] = s
    return out


def evaluate(gold: GoldSet, preds: PredictionSet, *, pred_field: str = "first_error", labelled_only: bool = False,
             name_ids: bool = True) -> Report:
    """Score `preds` against `gold`, per split; with `labelled_only`, only the gold ids it predicts.
    `name_ids`: list the missing and extra ids (the missing ones read again from the gold files)."""
    splits: dict[int, SplitMetrics] = defaultdict(SplitMetrics)
    missing: list[int] = []
    for i, s in enumerate(split_numbers(gold, preds)):
        p = preds.first_error[i]
        if labelled_only and p < -1:
            continue
        if p == ABSENT:
            missing.append(i)
        n_steps = gold.n_steps[i] if gold.n_steps[i] != UNSET else preds.n_steps[i]
        splits[s].add(gold.label[i], None if p < -1 else p, None if n_steps == UNSET else n_steps)
    named = {gold.names.names[s]: m for s, m in splits.items()}
    return Report(dict(sorted(named.items())), gold.ids_at(missing) if name_ids and missing else [],
                  list(preds.extra_ids or []) if name_ids else [], pred_field, missing=len(missing),
                  extra=len(preds.extra))


def evaluate_scores(gold: GoldSet, preds: PredictionSet, *, threshold: float | None = None,
                    tune_on: str | None = None, pred_field: str = "prm.scores") -> Report:
    """The metric of step-score predictions, cut at `threshold` when they were read (`read_predictions`
    with scores=threshold), or at the threshold tuned on split `tune_on` (read with scores="keep";
    that split then reported in `Report.tuned`, the others in `Report.splits`)."""
    if (threshold is None) == (tune_on is None):
        raise UsageError("give a threshold or a split to tune it on, not both")
    if preds.score_mismatch is not None:
        i, n = preds.score_mismatch
        raise UsageError(f"{gold.ids_at([i])[0]}: {n} step scores for the gold's {gold.n_steps[i]} steps "
                         "(the scored response is not the gold one)")
    if tune_on is None:
        chosen = Threshold(threshold)  # type: ignore[arg-type]
    else:
        split_of = split_numbers(gold, preds)
        names = gold.names.names
        if tune_on not in {names[s] for s in split_of}:
            raise UsageError(f"--tune-threshold-on {tune_on}: no such split in the gold "
                             f"(splits: {', '.join(sorted({names[s] for s in split_of}))})")
        tuning = [(gold.label[i], preds.scores_at(i)) for i, s in enumerate(split_of) if names[s] == tune_on]
        chosen = lowest_best_threshold(tuning, tune_on)
        preds = cut_at(preds, gold, chosen.value)
    report = evaluate(gold, preds, pred_field=pred_field)
    report.threshold = chosen
    if tune_on is not None:
        report.tuned = {tune_on: report.splits.pop(tune_on)}
    return report
