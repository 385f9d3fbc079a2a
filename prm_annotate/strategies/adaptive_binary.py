"""adaptive-binary: bisection for the first 0 (as binary), with each split chosen for the fewest
expected completions (EpicPRM's adaptive binary search, for the MC-only road).

Binary splits the interval in the middle, as if a probe cost the same whatever it found and first
errors were anywhere alike. Neither holds: a step found 1 usually costs one or two completions (its
first right one), a step found 0 costs all K (or the zero rule's failures, zero_rules.py); and
where MC's first errors sit is a property of the policy and the step format (on the world almost
never at the last step: the answer line only repeats a wrong step's number). So every split is
chosen by dynamic programming over the search intervals: under the monotonic assumption a probe at
m finds 1 exactly when the first error F is after m, and with a fixed prior on F and the two costs
the plan minimises the expected completions of the whole search. The prior and the cost of a 1 are
fixed values measured on the world (seed 1, not the benchmark's: docs/rollout-strategies.md), so
runs are deterministic; a 0 costs what the run's zero rule says. Fewer samples where a probe is
near-certain (EpicPRM's other half) is early stopping for a 1, and `--zero-rule beta-binomial` for
a 0.

What it finds is binary's: the 1 -> 0 boundary of monotone labels; only the order of the probes
differs, so where labels are not monotone it may land on another boundary than binary does.
"""
from __future__ import annotations

import math
from functools import lru_cache

from prm_annotate.strategies.binary import BinaryPlan
from prm_annotate.strategies.monotone import MonotoneStrategy

# MC's first error on a wrong-answer response, as measured on the world (seed 1, 462 responses;
# benchmarks/fit_priors.py): the last step (the answer line itself) with this chance (3 of 462),
# else any earlier step alike (measured: 102 / 89 / 226 in the first / middle / last third).
LAST_STEP_SHARE = 0.0065
# Completions a step found 1 costs with early stopping, on average (world, seed 1: 1,569 steps).
COST_OF_A_ONE = 1.89


def first_error_prior(n_steps: int, last_share: float = LAST_STEP_SHARE) -> tuple[float, ...]:
    """P(F = i), i = 0 .. n_steps-1, for a wrong-answer response of n_steps steps."""
    if n_steps == 1:
        return (1.0,)
    rest = (1.0 - last_share) / (n_steps - 1)
    return (rest,) * (n_steps - 1) + (last_share,)


@lru_cache(maxsize=256)
def split_table(n_steps: int, cost_one: float, cost_zero: float, last_share: float) -> dict[tuple[int, int], int]:
    """(good, bad) -> the step to probe when steps <= good are 1 and step bad is 0: the split with
    the fewest expected completions for the rest of the search (ties: the earlier step)."""
    prior = first_error_prior(n_steps, last_share)
    cum = [0.0]
    for p in prior:
        cum.append(cum[-1] + p)

    def mass(lo: int, hi: int) -> float:  # P(lo < F <= hi)
        return cum[hi + 1] - cum[lo + 1]

    cost: dict[tuple[int, int], float] = {}
    best: dict[tuple[int, int], int] = {}
    for width in range(1, n_steps + 1):
        for good in range(-1, n_steps - width):
            bad = good + width
            if width == 1:
                cost[good, bad] = 0.0
                continue
            total = mass(good, bad) or 1e-12
            choice = None
            for m in range(good + 1, bad):
                p_one = mass(m, bad) / total
                value = p_one * (cost_one + cost[m, bad]) + (1 - p_one) * (cost_zero + cost[good, m])
                if choice is None or value < choice[0] - 1e-12:
                    choice = (value, m)
            cost[good, bad], best[good, bad] = choice
    return best


class AdaptiveBinaryPlan(BinaryPlan):
    def _split(self, good: int, bad: int) -> int:
        needed = math.floor(self.threshold * self.k) + 1
        cost_zero = self.zero_rule.failures_to_zero(0, 0, self.k, needed, self.threshold)
        return split_table(self.n_steps, COST_OF_A_ONE, float(cost_zero), LAST_STEP_SHARE)[good, bad]


class AdaptiveBinary(MonotoneStrategy):
    name = "adaptive-binary"
    summary = "binary with each split chosen for the fewest expected completions (EpicPRM)"
    plan_type = AdaptiveBinaryPlan
