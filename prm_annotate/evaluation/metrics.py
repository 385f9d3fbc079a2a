"""The product's metrics, in one place: every command that measures labels or step scores
(`evaluate`, `compare`, `bon`'s reports, `evaluate --benchmark`, `train`'s evaluations, `score`'s
first error) takes its rates, F1, threshold rules and AUC from here; the benchmark modules
(`evaluate.py`: ProcessBench, `prmbench.py`, `hard2verify.py`) count with them.

ProcessBench's F1 (QwenLM/ProcessBench run_eval.py): error acc = share of responses with an error
whose first error is named exactly, correct acc = share of error-free responses said error-free,
F1 = their harmonic mean (in percent).

Two threshold rules, which differ on purpose where a score equals the threshold:

- `first_below` / `right_steps`: a step scored below the threshold is wrong, one scored at it is
  right (SCAN-PRM's `step_reward < threshold`; `score`, ProcessBench, Hard2Verify, `train`);
- `valid_steps`: a step is valid only when scored above the threshold (PRMBench's
  `score > validity_threshold`: a score of exactly 0.5 is invalid).

Two ways of tuning a threshold for the best F1, which differ on purpose in how they break ties:

- `lowest_best_threshold` (`evaluate --tune-threshold-on`, Hard2Verify): the lowest of the best
  cuts, a cut being 0 or a midpoint between two neighbouring distinct scores of the tuning split;
- `central_best_threshold` (`train`'s evaluations, its checkpoint's threshold): the middle of the
  best piece of (0, 1], ties going to the piece nearest 0.5, the untuned default.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:  # numpy is imported where it is used: `consensus` and `evaluate` run without it (core install)
    import numpy as np

from prm_annotate.errors import UsageError


def accuracy(hits: int, total: int) -> float | None:
    # The share first, then percent: ProcessBench's script computes np.mean(matches) * 100, and
    # 100 * hits / total can differ from it in the last bit.
    return hits / total * 100 if total else None


def wilson_interval(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a share (95% at z = 1.96), as shares; (0, 1) of nothing."""
    if not total:
        return 0.0, 1.0
    p = hits / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


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


def first_below(scores: Sequence[float], threshold: float) -> int:
    """The first step scored below `threshold`, -1 if none (SCAN-PRM's main_pb.py rule)."""
    return next((i for i, s in enumerate(scores) if s < threshold), -1)


def right_steps(scores: Sequence[float], threshold: float) -> list[bool]:
    """Each step right when scored at or above `threshold` (the rule of `first_below`)."""
    return [s >= threshold for s in scores]


def valid_steps(scores: Sequence[float], threshold: float) -> list[bool]:
    """Each step valid when scored above `threshold` (PRMBench's rule: at the threshold, invalid)."""
    return [s > threshold for s in scores]


def hit_interval(first_error: int, scores: Sequence[float]) -> tuple[float, float]:
    """The thresholds t at which `first_below(scores, t) == first_error`, as (lo, hi]: lo < t <= hi;
    empty (lo >= hi) when no threshold gives it. -1 needs every score >= t; step k needs
    scores[k] < t and every score before it >= t."""
    if first_error == -1:
        return -math.inf, float(min(scores))
    if first_error >= len(scores):
        return math.inf, math.inf
    before = float(min(scores[:first_error])) if first_error else math.inf
    return float(scores[first_error]), before


def cut_points(scores: Iterable[float]) -> list[float]:
    """One threshold in [0, 1] per distinct outcome of `first_below` over these scores: 0 (nothing
    flagged), the midpoint between each two neighbouring distinct scores, and between the highest and 1."""
    values = sorted(set(scores))
    points = [0.0] + [(a + b) / 2 for a, b in zip(values, values[1:])]
    if values and values[-1] < 1.0:
        points.append((values[-1] + 1.0) / 2)
    return sorted(set(points))


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


def lowest_best_threshold(responses: list[tuple[int, Sequence[float] | None]], split: str) -> Threshold:
    """The threshold with the highest F1 on `responses` (one split's (gold first error, step scores or
    None: unscored)), over every distinct cut of its scores; ties go to the lowest. Each response is
    right on an interval of thresholds (`hit_interval`), so every cut is counted by bisection instead
    of re-predicting the split."""
    n_error = sum(label != -1 for label, _ in responses)
    n_correct = len(responses) - n_error
    if not n_error or not n_correct:
        raise UsageError(f"--tune-threshold-on {split}: F1 needs erroneous and correct responses; the split has "
                         f"{n_error} erroneous and {n_correct} correct")
    lows, highs, correct_mins, all_scores = [], [], [], []
    for label, scores in responses:
        if scores is None:
            continue  # wrong at every threshold
        all_scores += scores
        lo, hi = hit_interval(label, scores)
        if lo >= hi:
            continue
        if label == -1:
            correct_mins.append(hi)
        else:
            lows.append(lo)
            highs.append(hi)
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


@dataclass(frozen=True)
class StepResponse:
    """One response of `train`'s evaluation: P(right) per labelled step, its hard labels and its
    targets (hard, or MC scores for soft labels)."""
    scores: np.ndarray
    hard: np.ndarray
    targets: np.ndarray

    @property
    def first_error(self) -> int:
        import numpy as np
        wrong = np.flatnonzero(self.hard == 0)
        return int(wrong[0]) if len(wrong) else -1


def auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of P(right) for the right steps (Mann-Whitney U, ties counted
    half); None with one class only."""
    import numpy as np
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # Average rank within each run of equal scores.
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores)) + 1]
    ends = np.r_[starts[1:], len(scores)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def f1_at(responses: list[StepResponse], threshold: float) -> dict[str, float | None]:
    """ProcessBench's accuracies and F1 of `first_below` at `threshold`."""
    hits = {True: 0, False: 0}
    totals = {True: 0, False: 0}
    for r in responses:
        lo, hi = hit_interval(r.first_error, r.scores)
        has_error = r.first_error != -1
        totals[has_error] += 1
        hits[has_error] += lo < threshold <= hi
    error_acc = 100 * hits[True] / totals[True] if totals[True] else None
    correct_acc = 100 * hits[False] / totals[False] if totals[False] else None
    return {"error_acc": error_acc, "correct_acc": correct_acc, "f1": harmonic_mean(error_acc, correct_acc)}


def central_best_threshold(responses: list[StepResponse]) -> float:
    """The threshold in (0, 1] that maximises F1: a response is predicted right on a half-open
    interval of thresholds (`hit_interval`), so F1 is piecewise constant between the interval ends,
    and the middle of the best piece is chosen (ties: the piece nearest 0.5, the untuned default)."""
    import numpy as np
    intervals = {has_error: [hit_interval(r.first_error, r.scores) for r in responses
                             if (r.first_error != -1) == has_error]
                 for has_error in (True, False)}
    ends = np.unique(np.clip([x for iv in intervals.values() for pair in iv for x in pair], 0.0, 1.0))
    ends = np.unique(np.r_[0.0, ends, 1.0])
    right = ends[1:]  # each piece (ends[j], ends[j+1]] scored at its right end

    def hit_share(pairs: list[tuple[float, float]]) -> np.ndarray | None:
        if not pairs:
            return None
        lo = np.sort([a for a, b in pairs if a < b])
        hi = np.sort([b for a, b in pairs if a < b])
        inside = np.searchsorted(lo, right, side="left") - np.searchsorted(hi, right, side="left")
        return 100 * inside / len(pairs)

    err, cor = hit_share(intervals[True]), hit_share(intervals[False])
    if err is None or cor is None:
        return 0.5  # one kind of response only: F1 is undefined at every threshold
    total = err + cor
    f1 = np.divide(2 * err * cor, total, out=np.zeros_like(total), where=total > 0)
    middles = (ends[:-1] + ends[1:]) / 2
    best = np.flatnonzero(f1 == f1.max())
    return float(middles[best[np.argmin(np.abs(middles[best] - 0.5))]])


def step_metrics(responses: list[StepResponse]) -> dict[str, float]:
    """The metrics `train` logs at each evaluation; one left out where undefined (one class only),
    except F1, which is 0 then: the best model is chosen by it at every evaluation."""
    import numpy as np
    scores = np.concatenate([r.scores for r in responses])
    hard = np.concatenate([r.hard for r in responses]).astype(bool)
    targets = np.concatenate([r.targets for r in responses])
    p = np.clip(scores, 1e-12, 1 - 1e-12)
    threshold = central_best_threshold(responses)
    tuned, untuned = f1_at(responses, threshold), f1_at(responses, 0.5)
    out = {"step_loss": float(-(targets * np.log(p) + (1 - targets) * np.log(1 - p)).mean()),
           "step_accuracy": float(100 * (np.asarray(right_steps(scores, 0.5)) == hard).mean()),
           "step_auc": auc(scores, hard), "threshold": threshold, "f1": tuned["f1"],
           "error_acc": tuned["error_acc"], "correct_acc": tuned["correct_acc"], "f1_at_0.5": untuned["f1"],
           "responses": float(len(responses))}
    out["f1"] = out["f1"] or 0.0
    return {k: float(v) for k, v in out.items() if v is not None}
