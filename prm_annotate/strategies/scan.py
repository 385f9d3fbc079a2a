"""scan: probe steps in order from the first, early stopping inside each, and stop at the first
step whose hard label is 0. A correct response costs nothing (monotonic assumption, see
monotone.py).

Why not bisection: a step with label 0 costs all k completions, a step with label 1 usually one
or two. A forward scan pays for exactly one 0 step (none when the wrong final answer is the first
error); bisection pays for every 0 it lands on, about half of its log2(n) probes. Scan pays
instead for every 1 step before the first error, which is cheap. Same first error as exhaustive
wherever labels are monotone; where they are not, scan still finds exhaustive's first 0 among the
steps it reaches (it is exhaustive's rule, read in order), so it only differs when a correct
response hides a 0 step (trust_correct) - tests/test_strategies.py shows both.
"""
from __future__ import annotations

from prm_annotate.strategies.monotone import MonotonePlan


class ScanPlan(MonotonePlan):
    def _choose(self) -> int | None:
        nxt = self.good + 1
        return nxt if nxt < min(self.bad, self.n_steps - 1) else None


class Scan:
    name = "scan"
    supports_soft = False
    assumes_monotone = True

    def __init__(self, trust_correct: bool = True):
        self.trust_correct = trust_correct

    def plan(self, n_steps: int, k: int, threshold: float, last_correct: bool) -> ScanPlan:
        return ScanPlan(n_steps, k, threshold, last_correct, self.trust_correct)
