"""early-stop: every step but the last, each sampled in rounds (1, 2, the rest) and stopped as
soon as its hard label is decided (threshold 0: at its first right completion; a step is 0 only
after all k failed).

Same hard label as exhaustive at EVERY step, with the same seeds: a step's completions are the
first ones of exhaustive's k, and a label is only decided when the rest could not change it. No
assumption about the steps. Scores are right / sampled (see `sampled`), so no soft labels.
"""
from __future__ import annotations

from typing import Sequence

from prm_annotate.strategies.base import (Plan, PlanResult, Probe, ProbeResult, Strategy, first_error_of,
                                          last_step_score)
from prm_annotate.strategies.sampling import StepSampler
from prm_annotate.strategies.zero_rules import ALL_K, ZeroRule


class EarlyStopPlan(Plan):
    def __init__(self, n_steps: int, k: int, threshold: float, last_correct: bool, zero_rule: ZeroRule = ALL_K):
        self.threshold, self.last_correct = threshold, last_correct
        self.samplers = [StepSampler(step, k, threshold, zero_rule) for step in range(n_steps - 1)]

    def next_round(self) -> list[Probe]:
        return [p for s in self.samplers for p in s.next_probes()]

    def observe(self, results: Sequence[ProbeResult]) -> None:
        for r in results:
            self.samplers[r.probe.step].observe(r.correct)

    def ahead(self) -> list[Probe]:
        return [p for s in self.samplers for p in s.ahead()]

    def result(self) -> PlanResult:
        scores: list[float | None] = [s.score for s in self.samplers] + [last_step_score(self.last_correct)]
        return PlanResult(scores=scores, first_error=first_error_of(scores, self.threshold),
                          sampled=[s.sampled for s in self.samplers] + [0])


class EarlyStop(Strategy):
    name = "early-stop"
    summary = "same hard labels, fewer completions"
    takes_zero_rule = True
    speculates = True

    def plan(self, n_steps: int, k: int, threshold: float, last_correct: bool,
             zero_rule: ZeroRule = ALL_K) -> EarlyStopPlan:
        return EarlyStopPlan(n_steps, k, threshold, last_correct, zero_rule)
