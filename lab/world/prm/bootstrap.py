"""Paired bootstrap intervals over held-out problems, for metrics built from per-problem counts.

Every metric of `world prm` is a function of sums over the held-out problems: ProcessBench F1 of
(error hits, erroneous responses, correct hits, correct responses), a Best-of-N accuracy of (right
picks, problems). So a PRM's result on one seed is a matrix `stats[problem, k]`, and resampling
problems with replacement is a weight per problem (how often it was drawn): the metric of a
resample is `metric(weights @ stats)`. Two PRMs scored on the same problems are compared on the
same draws (paired), so what the problems have in common (an easy problem is easy for both)
cancels out of the difference.

- One seed: `paired(a, b)`: the difference metric(a) - metric(b) and the 2.5/97.5 percentiles of
  that difference over the draws.
- Pooled over seeds: the seeds' differences averaged. Each draw resamples the problems (one draw
  shared by every seed: they are the same problems) and the seeds too, with replacement, so the
  interval holds both the held-out sample's noise and the training runs' seed-to-seed spread
  (with 5 seeds the latter is estimated from 5 values: an interval that only reaches 0 narrowly
  should be read as such).

The draws come from a fixed-seed generator, so a rerun gives the same intervals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

DRAWS = 10_000
SEED = 20250101  # any fixed number: the intervals must not change between reruns

Metric = Callable[[np.ndarray], np.ndarray]  # summed stats (..., k) -> metric (...)


def f1_metric(sums: np.ndarray) -> np.ndarray:
    """ProcessBench F1 (percent) of summed (error hits, erroneous, correct hits, correct) counts; the
    harmonic mean of the two accuracies, 0 where both are 0 (evaluation.metrics.harmonic_mean)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        err = 100 * sums[..., 0] / sums[..., 1]
        cor = 100 * sums[..., 2] / sums[..., 3]
        total = err + cor
        return np.where(total > 0, 2 * err * cor / np.where(total > 0, total, 1), 0.0)


def accuracy_metric(sums: np.ndarray) -> np.ndarray:
    """Percent of (hits, count) sums: a Best-of-N accuracy over problems."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 100 * sums[..., 0] / sums[..., 1]


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    @property
    def reading(self) -> str:
        """"higher" / "lower" when the whole 95% interval is on one side of 0, else no difference shown."""
        if self.low > 0:
            return "higher"
        if self.high < 0:
            return "lower"
        return "no difference shown"

    def to_dict(self) -> dict[str, float | str]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "reading": self.reading}


class Draws:
    """The resampling weights, drawn once and shared by every interval (common random numbers: two
    comparisons on the same problems see the same resamples)."""

    def __init__(self, problems: int, seeds: int, draws: int = DRAWS, seed: int = SEED) -> None:
        rng = np.random.default_rng(seed)
        self.problems = rng.multinomial(problems, np.full(problems, 1 / problems), size=draws).astype(float)
        self.seeds = rng.multinomial(seeds, np.full(seeds, 1 / seeds), size=draws).astype(float)

    def per_problem(self, stats: np.ndarray, metric: Metric) -> np.ndarray:
        """The metric on every resample of the problems: shape (draws,)."""
        return metric(self.problems @ stats)


def _interval(estimate: float, samples: np.ndarray) -> Interval:
    low, high = np.nanpercentile(samples, [2.5, 97.5])
    return Interval(float(estimate), float(low), float(high))


def single(draws: Draws, stats: np.ndarray, metric: Metric) -> Interval:
    """The metric of one PRM on one seed, with its interval over resampled problems."""
    return _interval(float(metric(stats.sum(axis=0))), draws.per_problem(stats, metric))


def paired(draws: Draws, a: np.ndarray, b: np.ndarray, metric: Metric) -> Interval:
    """metric(a) - metric(b) on the same problems (one seed), with its paired interval."""
    estimate = float(metric(a.sum(axis=0)) - metric(b.sum(axis=0)))
    return _interval(estimate, draws.per_problem(a, metric) - draws.per_problem(b, metric))


def pooled(draws: Draws, a: Sequence[np.ndarray], b: Sequence[np.ndarray] | None, metric: Metric) -> Interval:
    """The seeds' mean of metric(a_s) - metric(b_s) (of metric(a_s) when `b` is None), with an
    interval from resampling problems and seeds (module docstring)."""
    if draws.seeds.shape[1] != len(a) or (b is not None and len(b) != len(a)):
        raise ValueError(f"{len(a)} seeds given, the draws are for {draws.seeds.shape[1]}")
    per_seed = []
    estimates = []
    for s, stats in enumerate(a):
        value = draws.per_problem(stats, metric)
        estimate = metric(stats.sum(axis=0))
        if b is not None:
            value = value - draws.per_problem(b[s], metric)
            estimate = estimate - metric(b[s].sum(axis=0))
        per_seed.append(value)
        estimates.append(float(estimate))
    samples = (draws.seeds * np.stack(per_seed, axis=1)).sum(axis=1) / len(a)
    return _interval(float(np.mean(estimates)), samples)
