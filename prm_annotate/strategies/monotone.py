"""What the monotone strategies (binary, scan) share.

The monotonic assumption (OmegaPRM): a prefix that cannot reach the gold answer stays unable when
extended. Then the hard labels of a response are 1 ... 1 0 ... 0, and
- a wrong final answer (last step 0) bounds the search: the first error is at or before it;
- a right final answer means the response itself reached the answer from every one of its
  prefixes, so every step is 1 and first_error = -1 without a single completion
  (`trust_correct=True`, the default). With `trust_correct=False` a correct response is scanned
  from step 0 with early stopping, up to its first 0: that finds the "right answer, flawed
  process" responses that MC can catch, at the price of probing every correct response.
Each probe of a step samples with early stopping (sampling.StepSampler). Unprobed steps score null.
With prefix sharing the stage may answer a probe with a witness (the prefix begins a solution
that reached the answer): the step is 1 under the same assumption, with no completion sampled,
so its score stays null and `witnessed` names it.
"""
from __future__ import annotations

from typing import Sequence

from prm_annotate.strategies.base import PlanResult, Probe, ProbeResult, last_step_score
from prm_annotate.strategies.sampling import StepSampler


class MonotonePlan:
    """Subclasses choose the next step to probe (`_choose`) from what is known so far."""

    def __init__(self, n_steps: int, k: int, threshold: float, last_correct: bool, trust_correct: bool):
        self.n_steps, self.k, self.threshold, self.last_correct = n_steps, k, threshold, last_correct
        self.samplers: dict[int, StepSampler] = {}
        self.current: StepSampler | None = None
        # Search state: every step <= good is 1, step bad is 0 (bad = n_steps: no 0 known).
        self.good = -1
        self.bad = n_steps - 1 if not last_correct else n_steps
        if last_correct and trust_correct:
            self.good = n_steps - 1  # decided: first_error = -1

    def _choose(self) -> int | None:
        raise NotImplementedError

    def next_round(self) -> list[Probe]:
        while True:
            if self.current is None:
                step = self._choose()
                if step is None:
                    return []
                self.current = self.samplers[step] = StepSampler(step, self.k, self.threshold)
            probes = self.current.next_probes()
            if probes:
                return probes
            # Decided: move the bounds (monotonic assumption) and choose again.
            if self.current.label:
                self.good = max(self.good, self.current.step)
            else:
                self.bad = min(self.bad, self.current.step)
            self.current = None

    def observe(self, results: Sequence[ProbeResult]) -> None:
        for r in results:
            self.samplers[r.probe.step].observe(r.correct, r.witness)

    def result(self) -> PlanResult:
        scores: list[float | None] = [None] * self.n_steps
        sampled: list[int] = [0] * self.n_steps
        for step, s in self.samplers.items():
            scores[step], sampled[step] = s.score, s.sampled
        scores[-1] = last_step_score(self.last_correct)
        first_error = self.bad if self.bad < self.n_steps else -1
        witnessed = sorted(step for step, s in self.samplers.items() if s.witnessed)
        return PlanResult(scores=scores, first_error=first_error, sampled=sampled, witnessed=witnessed)
