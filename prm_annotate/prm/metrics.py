"""The eval metrics of `train`: the loss per step label, step-label accuracy and AUC, and the
ProcessBench F1 of the first error, at the threshold that maximises it.

ProcessBench's metric (QwenLM/ProcessBench run_eval.py): error acc = share of responses with an
error whose first error is found exactly, correct acc = share of error-free responses predicted
error-free, F1 = their harmonic mean (in percent). A response's predicted first error is the first
step whose P(right) is below the threshold (`score`'s rule, `first_below`), its true one the first
step labelled wrong (-1 if none). The ProcessBench authors tune a scalar PRM's threshold on a held
out split; `best_threshold` does that exactly: a response is predicted right on a half-open
interval of thresholds, so F1 is piecewise constant between the interval ends, and the middle of
the best piece is chosen (ties: the piece nearest 0.5, the untuned default).

Pure numpy; `trainer_metrics` adapts it to `Trainer.compute_metrics`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from prm_annotate.reports.evaluate import harmonic_mean

IGNORE = -100


@dataclass(frozen=True)
class Response:
    """One eval response: P(right) per labelled step, its hard labels and its targets."""
    scores: np.ndarray
    hard: np.ndarray
    targets: np.ndarray

    @property
    def first_error(self) -> int:
        wrong = np.flatnonzero(self.hard == 0)
        return int(wrong[0]) if len(wrong) else -1


def auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of P(right) for the right steps (Mann-Whitney U, ties counted
    half); None with one class only."""
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


def match_interval(r: Response) -> tuple[float, float]:
    """(lo, hi): the thresholds t in (lo, hi] at which the predicted first error is the true one."""
    k = r.first_error
    if k == -1:
        return -np.inf, float(r.scores.min())  # no step below t
    before = float(r.scores[:k].min()) if k else np.inf
    return float(r.scores[k]), before  # step k below t, none before it


def f1_at(responses: list[Response], threshold: float) -> dict[str, float | None]:
    hits = {True: 0, False: 0}
    totals = {True: 0, False: 0}
    for r in responses:
        lo, hi = match_interval(r)
        has_error = r.first_error != -1
        totals[has_error] += 1
        hits[has_error] += lo < threshold <= hi
    error_acc = 100 * hits[True] / totals[True] if totals[True] else None
    correct_acc = 100 * hits[False] / totals[False] if totals[False] else None
    return {"error_acc": error_acc, "correct_acc": correct_acc, "f1": harmonic_mean(error_acc, correct_acc)}


def best_threshold(responses: list[Response]) -> float:
    """The threshold in (0, 1] that maximises F1 (see the module docstring)."""
    intervals = {has_error: [match_interval(r) for r in responses if (r.first_error != -1) == has_error]
                 for has_error in (True, False)}
    ends = np.unique(np.clip([x for iv in intervals.values() for pair in iv for x in pair], 0.0, 1.0))
    ends = np.unique(np.r_[0.0, ends, 1.0])
    right = ends[1:]  # each piece (ends[j], ends[j+1]] scored at its right end

    def accuracy(pairs: list[tuple[float, float]]) -> np.ndarray | None:
        if not pairs:
            return None
        lo = np.sort([a for a, b in pairs if a < b])
        hi = np.sort([b for a, b in pairs if a < b])
        inside = np.searchsorted(lo, right, side="left") - np.searchsorted(hi, right, side="left")
        return 100 * inside / len(pairs)

    err, cor = accuracy(intervals[True]), accuracy(intervals[False])
    if err is None or cor is None:
        return 0.5  # one kind of response only: F1 is undefined at every threshold
    total = err + cor
    f1 = np.divide(2 * err * cor, total, out=np.zeros_like(total), where=total > 0)
    middles = (ends[:-1] + ends[1:]) / 2
    best = np.flatnonzero(f1 == f1.max())
    return float(middles[best[np.argmin(np.abs(middles[best] - 0.5))]])


def evaluate_responses(responses: list[Response]) -> dict[str, float]:
    """The metrics `train` logs at each evaluation; one left out where undefined (one class only),
    except F1, which is 0 then: the best model is chosen by it at every evaluation."""
    scores = np.concatenate([r.scores for r in responses])
    hard = np.concatenate([r.hard for r in responses]).astype(bool)
    targets = np.concatenate([r.targets for r in responses])
    p = np.clip(scores, 1e-12, 1 - 1e-12)
    threshold = best_threshold(responses)
    tuned, untuned = f1_at(responses, threshold), f1_at(responses, 0.5)
    out = {"step_loss": float(-(targets * np.log(p) + (1 - targets) * np.log(1 - p)).mean()),
           "step_accuracy": float(100 * ((scores >= 0.5) == hard).mean()),
           "step_auc": auc(scores, hard), "threshold": threshold, "f1": tuned["f1"],
           "error_acc": tuned["error_acc"], "correct_acc": tuned["correct_acc"], "f1_at_0.5": untuned["f1"],
           "responses": float(len(responses))}
    out["f1"] = out["f1"] or 0.0
    return {k: float(v) for k, v in out.items() if v is not None}


def responses_of(log_odds: np.ndarray, labels: np.ndarray, step_labels: np.ndarray) -> list[Response]:
    """Per-row responses of a padded eval batch (rows are responses, IGNORE off the labelled tokens)."""
    out = []
    for d, y, h in zip(log_odds, labels, step_labels):
        mask = h != IGNORE
        if mask.any():
            out.append(Response(scores=1 / (1 + np.exp(-d[mask].astype(np.float64))), hard=h[mask],
                                targets=y[mask].astype(np.float64)))
    return out


def trainer_metrics(eval_pred: Any) -> dict[str, float]:
    """`compute_metrics` for the Trainer: predictions are the log-odds (logit right - logit wrong)
    at every token (`log_odds`), label_ids the (labels, step_labels) pair."""
    labels, step_labels = eval_pred.label_ids
    return evaluate_responses(responses_of(np.asarray(eval_pred.predictions), np.asarray(labels),
                                           np.asarray(step_labels)))


def log_odds(logits: Any, labels: Any) -> Any:
    """`preprocess_logits_for_metrics`: one number per token instead of two, all the metrics need."""
    return (logits[..., 1] - logits[..., 0]).float()
