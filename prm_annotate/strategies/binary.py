"""binary: bisection for the first step whose hard label is 0 (OmegaPRM), early stopping inside
each probe. It needs the monotonic assumption: a prefix that cannot reach the answer stays
unable when extended, so hard labels run 1 ... 1 0 ... 0; a 1 at step m then stands for every
step before m, a 0 for every step after. It finds exhaustive's first error with about log2(n)
probes; a correct response costs nothing (see monotone.py). Steps off the search path are not
probed (null); probed steps after the first error keep their (0) scores.

Where the assumption fails (a 0 step followed by a 1 step) bisection may land on any 1 -> 0
boundary, not necessarily the first: tests/test_strategies.py shows such a case.
"""
from __future__ import annotations

from prm_annotate.strategies.monotone import MonotonePlan, MonotoneStrategy


class BinaryPlan(MonotonePlan):
    def _choose(self, good: int, bad: int) -> int | None:
        if bad >= self.n_steps:
            # No 0 known (a correct response scanned with trust_correct=False): walk from the front.
            nxt = good + 1
            return nxt if nxt < self.n_steps - 1 else None
        if bad - good <= 1:
            return None
        return self._split(good, bad)

    def _split(self, good: int, bad: int) -> int:
        """The step to probe between a known 1 at `good` and a known 0 at `bad` (bad - good > 1)."""
        return (good + bad) // 2


class Binary(MonotoneStrategy):
    name = "binary"
    summary = "first error only, by bisection: assumes a step after a 0 stays 0"
    plan_type = BinaryPlan
