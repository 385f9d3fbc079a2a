"""Early stopping for one step: sample its completions in rounds and stop once its hard label is
decided. Shared by the cheap strategies.

Hard label 1 needs more than `threshold * k` right completions, so a step is decided
- 1 as soon as that many are right (threshold 0: the first right completion), and
- 0 as soon as even all remaining completions could not get it there (threshold 0: all k failed),
  or sooner when a sequential zero rule says so (zero_rules.py; `--zero-rule`, off by default).
Indices are drawn in order 0, 1, 2, ... so a step's completions are always a prefix of the k an
exhaustive run would draw with the same seeds: the decided label is exactly exhaustive's (under
the default zero rule; a sequential one may call a 0 that the rest of the K would have made a 1).

The score reported for the step is right / sampled. It is consistent with the hard label
(right / sampled > threshold iff the label is 1), but it is a fraction of fewer than k
completions, so it is no soft label; the plan reports `sampled` next to it.
"""
from __future__ import annotations

import math

from prm_annotate.strategies.base import Probe
from prm_annotate.strategies.zero_rules import ALL_K, ZeroRule

# Round sizes: 1 completion, then 2 more, then the rest. A step whose prefix usually reaches the
# answer stops after one or two; a sure-wrong step pays k in three rounds.
ROUNDS = (1, 2)


class StepSampler:
    """`one_at_a_time`: a round of one completion each time (never more than could decide the
    label), which draws exactly what the label needs and leaves the rest to speculation; for a
    strategy that samples few steps, where rounds are not what keeps the engine busy (verify)."""

    def __init__(self, step: int, k: int, threshold: float, zero_rule: ZeroRule = ALL_K,
                 one_at_a_time: bool = False):
        self.step, self.k, self.threshold, self.zero_rule = step, k, threshold, zero_rule
        self.one_at_a_time = one_at_a_time
        # Right completions needed for label 1: the smallest r with r / k > threshold.
        self.needed = math.floor(threshold * k) + 1
        self.sampled = 0
        self.asked = 0
        self.right = 0
        self.rounds = 0
        self.witnessed = False

    @property
    def label(self) -> bool | None:
        """1/0 once decided, None while undecided."""
        if self.witnessed or self.right >= self.needed:
            return True
        if self.zero_rule.decides_zero(self.right, self.sampled, self.k, self.needed, self.threshold):
            return False
        return None

    def _zero_within(self) -> int:
        return self.zero_rule.failures_to_zero(self.right, self.sampled, self.k, self.needed, self.threshold)

    def next_probes(self) -> list[Probe]:
        if self.label is not None:
            return []
        size = 1 if self.one_at_a_time else ROUNDS[self.rounds] if self.rounds < len(ROUNDS) else self.k
        # Never fewer than could decide label 1 in this round, nor more than could decide a 0.
        size = max(size, self.needed - self.right)
        size = min(size, self.k - self.sampled, self._zero_within())
        self.rounds += 1
        start = self.sampled
        self.asked = max(self.asked, start + size)
        return [Probe(self.step, j) for j in range(start, start + size)]

    def ahead(self) -> list[Probe]:
        """The completions a later round of this step may ask for (none once it is decided)."""
        if self.label is not None:
            return []
        return [Probe(self.step, j) for j in range(self.asked, min(self.k, self.sampled + self._zero_within()))]

    def observe(self, correct: bool | None, witness: bool = False) -> None:
        if witness:  # known to reach the answer without sampling (monotone strategies only)
            self.witnessed = True
            return
        self.sampled += 1
        self.right += correct is True

    @property
    def score(self) -> float | None:
        # A witnessed step whose own completions did not decide it has no score that matches its
        # label: null, like an unsampled step.
        if not self.sampled or (self.witnessed and self.right < self.needed):
            return None
        return self.right / self.sampled
