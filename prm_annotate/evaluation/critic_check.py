"""`evaluate --min-f1 F`: a first judge (a critic trained on the big judge's agreeing critiques, or
any judge) checked against its gold (the big judge's own verdicts on held-out responses of the
seed slice, or the truth), with intervals, and a plain verdict: use it, or do not.

- First-error agreement: the share of the gold's responses whose predicted first error is the
  gold's (a missing or unparsed prediction disagrees), with its 95% Wilson score interval.
- ProcessBench F1 over all the responses pooled (the harmonic mean of error and correct accuracy,
  reports/metrics.py), with a 95% percentile bootstrap interval: the responses resampled with
  replacement, a fixed-seed generator, so a rerun gives the same interval.
- Verdict: F1 below `--min-f1` says not to use this first judge (exit status 1); at or above, it
  passes, and says so when the interval still reaches below the bar (too few responses to be sure).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from prm_annotate.evaluation.label_sets import GoldSet, PredictionSet
from prm_annotate.evaluation.metrics import accuracy, harmonic_mean, wilson_interval

DRAWS = 2000
SEED = 60  # any fixed number: the interval must not change between reruns


@dataclass
class CriticCheck:
    responses: int
    agreement: float  # percent
    agreement_ci: tuple[float, float]
    f1: float
    f1_ci: tuple[float, float]
    min_f1: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        said = [f"check: {self.responses} responses; first-error agreement {self.agreement:.1f}% "
                f"[{self.agreement_ci[0]:.1f}, {self.agreement_ci[1]:.1f}] (Wilson 95%); F1 {self.f1:.1f} "
                f"[{self.f1_ci[0]:.1f}, {self.f1_ci[1]:.1f}] (bootstrap 95%, {DRAWS} resamples)"]
        if not self.passed:
            said.append(f"check: F1 {self.f1:.1f} is below --min-f1 {self.min_f1:g}: do not use this judge in place "
                        "of the gold's (train it on more or other rows, or escalate more to the big judge)")
        elif self.f1_ci[0] < self.min_f1:
            said.append(f"check: F1 {self.f1:.1f} meets --min-f1 {self.min_f1:g}, but its interval reaches below it: "
                        "check on more responses before relying on it")
        else:
            said.append(f"check: F1 {self.f1:.1f} meets --min-f1 {self.min_f1:g}")
        return said


def _f1(error_hits: Any, errors: Any, correct_hits: Any, corrects: Any) -> Any:
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        err, cor = error_hits / errors, correct_hits / corrects
        return np.nan_to_num(100 * 2 * err * cor / (err + cor))


def check(gold: GoldSet, preds: PredictionSet, min_f1: float) -> CriticCheck:
    import numpy as np

    # Per gold response: whether it has an error, whether the prediction names the gold's first error.
    label = np.frombuffer(gold.label, dtype=np.int32)
    error = (label != -1).astype(float)
    hit = (np.frombuffer(preds.first_error, dtype=np.int32) == label).astype(float)
    n, hits = len(label), int(hit.sum())
    f1 = harmonic_mean(accuracy(int((hit * error).sum()), int(error.sum())),
                       accuracy(int((hit * (1 - error)).sum()), int((1 - error).sum()))) or 0.0
    weights = np.random.default_rng(SEED).multinomial(n, [1 / n] * n, size=DRAWS) if n else np.zeros((0, 0))
    draws = _f1(weights @ (hit * error), weights @ error, weights @ (hit * (1 - error)), weights @ (1 - error))
    low, high = (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))) if n else (math.nan, math.nan)
    lo, hi = wilson_interval(hits, n)
    return CriticCheck(n, accuracy(hits, n) or 0.0, (100 * lo, 100 * hi), f1, (low, high), min_f1, f1 >= min_f1)
