"""The paper's scheme, K completions per step, all in one round; the last step is not rolled out
but decided by the response's own answer (this project's rule, shared by every strategy)."""
from __future__ import annotations

from typing import Sequence

from prm_annotate.strategies.base import (Plan, PlanResult, Probe, ProbeResult, Strategy, first_error_of,
                                          last_step_score)


class ExhaustivePlan(Plan):
    def __init__(self, n_steps: int, k: int, threshold: float, last_correct: bool):
        self.n_steps, self.k, self.threshold, self.last_correct = n_steps, k, threshold, last_correct
        self._sent = False
        self._correct = [0] * n_steps
        self._seen = [0] * n_steps

    def next_round(self) -> list[Probe]:
        if self._sent:
            return []
        self._sent = True
        return [Probe(step, j) for step in range(self.n_steps - 1) for j in range(self.k)]

    def observe(self, results: Sequence[ProbeResult]) -> None:
        for r in results:
            self._seen[r.probe.step] += 1
            self._correct[r.probe.step] += r.correct is True

    def result(self) -> PlanResult:
        scores: list[float | None] = []
        for step in range(self.n_steps - 1):
            if self._seen[step] != self.k:
                raise RuntimeError(f"step {step} has {self._seen[step]} of {self.k} completions")
            scores.append(self._correct[step] / self.k)
        scores.append(last_step_score(self.last_correct))
        return PlanResult(scores=scores, first_error=first_error_of(scores, self.threshold))


class Exhaustive(Strategy):
    name = "exhaustive"
    summary = "the paper's K per step; the only one for --label soft"
    supports_soft = True

    def plan(self, n_steps: int, k: int, threshold: float, last_correct: bool) -> ExhaustivePlan:
        return ExhaustivePlan(n_steps, k, threshold, last_correct)
