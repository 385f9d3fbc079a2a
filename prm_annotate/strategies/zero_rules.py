"""When a sampled step may be called 0 (`rollout --zero-rule`): the paper's definition, or a
sequential rule that stops sooner. Shared by every strategy that samples a step in rounds
(early-stop, binary, binary-adaptive, scan, verify: sampling.StepSampler); exhaustive samples all K
at once and takes none.

- `all-k` (the default, the paper's): a step is 0 only when even all K completions could not give
  it label 1 (threshold 0: all K failed).
- `beta-binomial`: a Beta(a, b) prior on the step's success rate p; after `right` right and `f`
  failed completions the posterior is Beta(a + right, b + f), and the number X of right ones among
  the m = K - sampled completions not drawn yet is Beta-Binomial(m, a + right, b + f). The step is
  called 0 once P(right + X < needed) >= 1 - tolerance: the chance that the rest of the K would
  have made it a 1 is at most `tolerance`. At threshold 0 (needed = 1, right = 0) that is
  P(no success in m more) = B(a, b + f + m) / B(a, b + f). A step is never called 0 while its score
  so far (right / sampled) is above the threshold, so score and label still agree.

The prior is a fixed value of the rule, not fitted per run, so a run is deterministic and a
resume byte-identical; the rule's settings (prior and tolerance) go into the manifest and every
record (`mc.zero_rule`). At threshold 0 the decision depends only on the failures counted, so the
rule amounts to "0 after `failures_for_zero()` failures" (6 of K=8 for the world prior at the
default tolerance 0.05, 4 at 0.1): the prior and tolerance say where that number comes from. How the prior was measured
(and on what): docs/rollout-strategies.md, "A sequential rule for the confirming K".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry


@dataclass(frozen=True)
class ZeroRule:
    """Decides when a step whose label is not yet 1 may stop as a 0."""

    name: ClassVar[str]
    summary: ClassVar[str]
    reads_tolerance: ClassVar[bool] = False

    def decides_zero(self, right: int, sampled: int, k: int, needed: int, threshold: float) -> bool:
        raise NotImplementedError

    def failures_to_zero(self, right: int, sampled: int, k: int, needed: int, threshold: float) -> int:
        """How many more completions, all failing, the step may still need before it is called 0
        (round sizes and speculation stop there); the rest of the K unless a rule says less."""
        return k - sampled

    def settings(self) -> dict[str, Any]:
        return {"name": self.name}


def _out_of_reach(right: int, sampled: int, k: int, needed: int) -> bool:
    return right + (k - sampled) < needed


@dataclass(frozen=True)
class AllK(ZeroRule):
    name: ClassVar[str] = "all-k"
    summary: ClassVar[str] = "a 0 only when all K could not make it a 1 (the paper's)"

    def decides_zero(self, right: int, sampled: int, k: int, needed: int, threshold: float) -> bool:
        return _out_of_reach(right, sampled, k, needed)


def log_beta(x: float, y: float) -> float:
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)


def beta_binomial_cdf(below: int, m: int, alpha: float, beta: float) -> float:
    """P(X < below) for X ~ Beta-Binomial(m, alpha, beta)."""
    total = 0.0
    for x in range(max(0, min(below, m + 1))):
        log_choose = math.lgamma(m + 1) - math.lgamma(x + 1) - math.lgamma(m - x + 1)
        total += math.exp(log_choose + log_beta(x + alpha, m - x + beta) - log_beta(alpha, beta))
    return min(1.0, total)


# Fitted by maximum likelihood to the right-of-8 counts of the world policy at the judge's first
# error j (536 steps of seed 1 of the world, not the benchmark's seed 0; benchmarks/fit_priors.py):
# the steps verify confirms. U-shaped: most such steps almost never or almost always recover.
WORLD_PRIOR = (0.14, 0.61)
DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class BetaBinomial(ZeroRule):
    """Attributes:
        a, b: the Beta prior on a step's success rate (a fixed value: WORLD_PRIOR by default).
        tolerance: the largest posterior chance, when the step is called 0, that the rest of the K
            completions would have made it a 1.
    """

    name: ClassVar[str] = "beta-binomial"
    summary: ClassVar[str] = "a 0 once a Beta prior says the rest of the K would fail, but for --zero-tolerance"
    reads_tolerance: ClassVar[bool] = True
    a: float = WORLD_PRIOR[0]
    b: float = WORLD_PRIOR[1]
    tolerance: float = DEFAULT_TOLERANCE

    def __post_init__(self) -> None:
        if not 0.0 < self.tolerance < 1.0:
            raise UsageError(f"--zero-tolerance {self.tolerance}: must be above 0 and below 1")
        if not (self.a > 0 and self.b > 0):
            raise UsageError(f"the beta-binomial prior needs a > 0 and b > 0, got a={self.a}, b={self.b}")

    def stays_zero(self, right: int, sampled: int, k: int, needed: int) -> float:
        """The posterior chance that all K would leave the step below `needed` right ones."""
        return beta_binomial_cdf(needed - right, k - sampled, self.a + right, self.b + sampled - right)

    def decides_zero(self, right: int, sampled: int, k: int, needed: int, threshold: float) -> bool:
        if _out_of_reach(right, sampled, k, needed):
            return True
        if sampled == 0 or right > threshold * sampled:
            return False
        return self.stays_zero(right, sampled, k, needed) >= 1.0 - self.tolerance

    def failures_to_zero(self, right: int, sampled: int, k: int, needed: int, threshold: float) -> int:
        for more in range(1, k - sampled + 1):
            if self.decides_zero(right, sampled + more, k, needed, threshold):
                return more
        return k - sampled

    def failures_for_zero(self, k: int, threshold: float = 0.0) -> int:
        """Failures in a row after which a fresh step is called 0."""
        return self.failures_to_zero(0, 0, k, math.floor(threshold * k) + 1, threshold)

    def settings(self) -> dict[str, Any]:
        return {"name": self.name, "a": self.a, "b": self.b, "tolerance": self.tolerance}


ALL_K = AllK()
ZERO_RULES: Registry[type[ZeroRule]] = Registry(
    "--zero-rule", "When a step sampled in rounds is called 0 (not for exhaustive)", "docs/rollout-strategies.md",
    (AllK, BetaBinomial))


def make_zero_rule(name: str, tolerance: float | None = None) -> ZeroRule:
    """The rule `rollout --zero-rule NAME [--zero-tolerance T]` uses; UsageError on bad values."""
    rule = ZERO_RULES.named(name)
    if tolerance is None:
        return rule()
    if not rule.reads_tolerance:
        readers = ZERO_RULES.where(lambda r: r.reads_tolerance)
        raise UsageError(f"--zero-tolerance is read by --zero-rule {readers}, not {name}")
    return rule(tolerance=tolerance)
