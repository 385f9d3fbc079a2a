"""The eval metrics `train` logs, checked against brute force on data they were not written from:
the threshold sweep against `score`'s own rule (`first_below`) on a fine grid with ProcessBench's
F1 formula, the AUC against counting every right/wrong pair."""
from __future__ import annotations

import random

import numpy as np

from prm_annotate.evaluation.metrics import StepResponse as Response  # one eval response
from prm_annotate.evaluation.metrics import auc, central_best_threshold, f1_at, step_metrics
from prm_annotate.evaluation.metrics import harmonic_mean
from prm_annotate.stages.score import first_below


def _responses(seed: int, n: int = 40) -> list[Response]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        steps = rng.randint(1, 6)
        first_error = rng.choice([-1, *range(steps)])
        hard = np.array([1] * steps if first_error == -1 else [1] * first_error + [0])
        # Right steps score higher on average, with overlap, a few scores tied.
        scores = np.array([round(min(1, max(0, rng.gauss(0.7 if h else 0.4, 0.2))), 2) for h in hard])
        out.append(Response(scores=scores, hard=hard, targets=hard.astype(float)))
    return out


def _brute_f1(responses: list[Response], threshold: float) -> float:
    err = [first_below(list(r.scores), threshold) == r.first_error for r in responses if r.first_error != -1]
    cor = [first_below(list(r.scores), threshold) == -1 for r in responses if r.first_error == -1]
    return harmonic_mean(100 * sum(err) / len(err), 100 * sum(cor) / len(cor)) or 0.0


def test_tuned_threshold_maximises_processbench_f1():
    for seed in range(5):
        responses = _responses(seed)
        t = central_best_threshold(responses)
        grid = max(_brute_f1(responses, g) for g in np.linspace(0, 1, 2001))
        assert abs(_brute_f1(responses, t) - grid) < 1e-9, seed
        assert abs(f1_at(responses, t)["f1"] - grid) < 1e-9
    # On a set where 0.5 is poor, tuning finds better.
    shifted = [Response(r.scores * 0.5 + 0.5, r.hard, r.targets) for r in _responses(9)]
    assert f1_at(shifted, central_best_threshold(shifted))["f1"] > f1_at(shifted, 0.5)["f1"] + 10


def test_auc_counts_pairs():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 10, 200) / 10  # many ties
    positive = rng.random(200) < 0.6
    pairs = [(1.0 if p > n else 0.5 if p == n else 0.0) for p in scores[positive] for n in scores[~positive]]
    assert abs(auc(scores, positive) - np.mean(pairs)) < 1e-12
    assert auc(scores, np.ones(200, dtype=bool)) is None


def test_metrics_of_one_class_are_numbers_or_absent():
    right_only = [Response(np.array([0.9, 0.8]), np.array([1, 1]), np.array([1.0, 1.0]))]
    m = step_metrics(right_only)
    assert m["f1"] == 0.0 and "step_auc" not in m  # best_model needs a number; AUC is undefined
