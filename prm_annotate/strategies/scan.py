"""scan: probe steps in order from the first, early stopping inside each, and stop at the first
step whose hard label is 0 - exhaustive's rule read in order, so on a wrong-answer response it
gives exhaustive's first_error with the same seeds, whatever the labels (no monotonic
assumption: the steps after the first 0 do not change the first 0). A correct response costs
nothing: the response itself is a right completion of each of its prefixes (monotone.py), which
is where scan and exhaustive can differ (`trust_correct=False` removes that difference).

Against bisection: a 0 step costs all k completions, a 1 step usually one or two. Scan pays
for exactly one 0 step (none when the wrong final answer is the first error) and for every 1
step before it; bisection pays for every 0 it lands on and for about log2(n) steps in all. Which
is cheaper depends on where first errors sit: the benchmark measures both.
"""
from __future__ import annotations

from prm_annotate.strategies.base import Strategy
from prm_annotate.strategies.monotone import MonotonePlan


class ScanPlan(MonotonePlan):
    def _choose(self, good: int, bad: int) -> int | None:
        nxt = good + 1
        return nxt if nxt < min(bad, self.n_steps - 1) else None


class Scan(Strategy):
    name = "scan"
    summary = "first error only, steps in order: no such assumption"
    uses_witnesses = True

    def __init__(self, trust_correct: bool = True):
        self.trust_correct = trust_correct

    def plan(self, n_steps: int, k: int, threshold: float, last_correct: bool) -> ScanPlan:
        return ScanPlan(n_steps, k, threshold, last_correct, self.trust_correct)
