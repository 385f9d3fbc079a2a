"""The paired bootstrap of `world prm`: its point estimates are the plain differences (F1 as
`evaluate` computes it, accuracy as `bon` does), its 95% intervals cover a known difference about
95% of the time on data drawn with that difference, and a rerun gives the same intervals."""
from __future__ import annotations

import numpy as np

from prm_annotate.evaluation.metrics import harmonic_mean
from lab.world.prm.bootstrap import Draws, Interval, accuracy_metric, f1_metric, paired, pooled, single


def picks(values: list[int]) -> np.ndarray:
    return np.stack([np.asarray(values, float), np.ones(len(values))], axis=1)


def test_the_paired_difference_is_the_difference_of_the_metrics():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2, 60), rng.integers(0, 2, 60)
    draws = Draws(60, 1, draws=500)
    d = paired(draws, picks(list(a)), picks(list(b)), accuracy_metric)
    assert abs(d.estimate - (100 * a.mean() - 100 * b.mean())) < 1e-9
    # F1 from per-problem counts equals the harmonic mean of the summed accuracies
    counts = rng.integers(0, 4, (60, 4)).astype(float)
    counts[:, 1] = counts[:, 0] + rng.integers(0, 3, 60)  # hits <= responses
    counts[:, 3] = counts[:, 2] + rng.integers(1, 3, 60)
    total = counts.sum(axis=0)
    expected = harmonic_mean(100 * total[0] / total[1], 100 * total[2] / total[3])
    assert abs(single(draws, counts, f1_metric).estimate - expected) < 1e-9
    assert abs(paired(draws, counts, counts, f1_metric).estimate) < 1e-12
    # the same PRM against itself: every resample's difference is 0
    same = paired(draws, counts, counts, f1_metric)
    assert (same.low, same.high) == (0.0, 0.0) and same.reading == "no difference shown"


def test_the_interval_covers_a_known_difference_about_95_percent_of_the_time():
    """Problems with their own difficulty (shared by both PRMs: what pairing removes); PRM a is
    right 8 points more often than b in expectation. The interval must cover the true difference
    in about 95% of 200 draws of such a held-out set (binomial: 95% of 200 is 190, sd ~3)."""
    rng = np.random.default_rng(7)
    draws = Draws(300, 1, draws=2000)
    covered, width, normal = 0, [], []
    for _ in range(200):
        p = rng.uniform(0.2, 0.8, 300)
        a = rng.random(300) < np.clip(p + 0.08, 0, 1)
        b = rng.random(300) < p
        # the truth for this design: the mean over problems of (p + 0.08 clipped) - p
        true_diff = 100 * float(np.mean(np.clip(p + 0.08, 0, 1) - p))
        d = paired(draws, picks(list(a.astype(int))), picks(list(b.astype(int))), accuracy_metric)
        covered += d.low <= true_diff <= d.high
        width.append(d.high - d.low)
        normal.append(2 * 1.96 * 100 * float(np.std(a.astype(float) - b, ddof=1)) / np.sqrt(300))
    assert 180 <= covered <= 199, covered
    # as wide as the normal approximation of a paired difference of means
    assert abs(np.mean(width) / np.mean(normal) - 1) < 0.1


def test_pooled_averages_the_seeds_and_widens_with_their_spread():
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2, 100)
    a = [picks(list(base)) for _ in range(5)]
    b_same = [picks(list(np.where(rng.random(100) < 0.1, 1 - base, base))) for _ in range(5)]
    draws = Draws(100, 5, draws=1000)
    pooled_d = pooled(draws, a, b_same, accuracy_metric)
    per_seed = [paired(draws, x, y, accuracy_metric).estimate for x, y in zip(a, b_same)]
    assert abs(pooled_d.estimate - float(np.mean(per_seed))) < 1e-9
    # seeds that disagree wildly give a wider pooled interval than seeds that agree
    b_spread = [picks(list(np.where(rng.random(100) < q, 0, base))) for q in (0.0, 0.0, 0.5, 0.5, 0.9)]
    b_agree = [picks(list(np.where(rng.random(100) < 0.38, 0, base))) for _ in range(5)]
    wide, narrow = pooled(draws, a, b_spread, accuracy_metric), pooled(draws, a, b_agree, accuracy_metric)
    assert wide.high - wide.low > 1.5 * (narrow.high - narrow.low)


def test_a_rerun_gives_the_same_intervals_and_readings_follow_zero():
    rng = np.random.default_rng(5)
    a, b = picks(list(rng.integers(0, 2, 80))), picks(list(rng.integers(0, 2, 80)))
    first = paired(Draws(80, 1), a, b, accuracy_metric)
    assert first == paired(Draws(80, 1), a, b, accuracy_metric)
    assert Interval(3.0, 1.0, 5.0).reading == "higher"
    assert Interval(-3.0, -5.0, -1.0).reading == "lower"
    assert Interval(1.0, -1.0, 3.0).reading == "no difference shown"
