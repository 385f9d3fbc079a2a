"""What the first-error strategies (binary, scan) share.

A right final answer is a witness: given any of its prefixes, the rest of the response is a
policy sample from that prefix (same prompt, same temperature) that reached the answer. Counted
as one more completion, it makes every step 1: first_error = -1 without a single rollout
(`trust_correct=True`, the default). What it gives up: a step that K fresh completions would all
fail although the response itself went on to the right answer ("right answer, flawed process",
when the policy also recovers from the flaw). With `trust_correct=False` correct responses are
probed like wrong ones (exhaustive's first_error exactly, where the strategy itself is exact).

A wrong final answer bounds the search: the last step is 0. Each probed step samples with early
stopping (sampling.StepSampler). Unprobed steps score null. With prefix sharing the stage may
answer a probe with a witness (see base.Strategy.uses_witnesses): the step is 1, no completion
sampled, its score stays null and `witnessed` names it.
"""
from __future__ import annotations

from typing import Sequence

from prm_annotate.strategies.base import Plan, PlanResult, Probe, ProbeResult, Strategy, last_step_score
from prm_annotate.strategies.sampling import StepSampler
from prm_annotate.strategies.zero_rules import ALL_K, ZeroRule


class MonotonePlan(Plan):
    """Subclasses choose the next step to probe (`_choose`) from what is known so far."""

    def __init__(self, n_steps: int, k: int, threshold: float, last_correct: bool, trust_correct: bool,
                 zero_rule: ZeroRule = ALL_K):
        self.n_steps, self.k, self.threshold, self.last_correct = n_steps, k, threshold, last_correct
        self.zero_rule = zero_rule
        self.samplers: dict[int, StepSampler] = {}
        self.current: StepSampler | None = None
        # Search state: every step <= good is 1, step bad is 0 (bad = n_steps: no 0 known).
        self.good = -1
        self.bad = n_steps - 1 if not last_correct else n_steps
        if last_correct and trust_correct:
            self.good = n_steps - 1  # decided: first_error = -1

    def _sampler(self, step: int) -> StepSampler:
        return StepSampler(step, self.k, self.threshold, self.zero_rule)

    def _choose(self, good: int, bad: int) -> int | None:
        """The step to probe next when every step <= good is 1 and step bad is 0 (None: done)."""
        raise NotImplementedError

    def next_round(self) -> list[Probe]:
        while True:
            if self.current is None:
                step = self._choose(self.good, self.bad)
                if step is None:
                    return []
                self.current = self.samplers[step] = self._sampler(step)
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

    def _chosen_after(self, label: bool) -> int | None:
        """The step the search probes next if the current step's label is `label` (None: none,
        or one already probed)."""
        m = self.current.step
        step = self._choose(max(self.good, m), self.bad) if label else self._choose(self.good, min(self.bad, m))
        return None if step in self.samplers else step

    def ahead(self) -> list[Probe]:
        """The first probes of the step the search chooses next, for either label of the current
        step, then the rest of the current step's completions. One choice deep: looking further
        starts nearly all of exhaustive's work at once, which costs as much as exhaustive where
        the engine has no idle capacity (measured: docs/rollout-strategies.md)."""
        if self.current is None:
            return []
        steps = sorted({self._chosen_after(True), self._chosen_after(False)} - {None})
        return [p for step in steps for p in self._sampler(step).next_probes()] \
            + self.current.ahead()

    def spare(self) -> list[Probe]:
        """The rest of the completions of the step chosen next if the current one is 0 (binary:
        the left half's; scan stops at a 0: none). That step comes before a 0, so it is more
        often 0 itself and then needs all k (a weak policy: nearly always); without them, a
        response whose first error lies left of the middle waits two full rounds where
        exhaustive waits one."""
        step = self._chosen_after(False) if self.current is not None else None
        if step is None:
            return []
        sampler = self._sampler(step)
        sampler.next_probes()  # its first probes are in `ahead`
        return sampler.ahead()

    def result(self) -> PlanResult:
        scores: list[float | None] = [None] * self.n_steps
        sampled: list[int] = [0] * self.n_steps
        for step, s in self.samplers.items():
            scores[step], sampled[step] = s.score, s.sampled
        scores[-1] = last_step_score(self.last_correct)
        first_error = self.bad if self.bad < self.n_steps else -1
        witnessed = sorted(step for step, s in self.samplers.items() if s.witnessed)
        return PlanResult(scores=scores, first_error=first_error, sampled=sampled, witnessed=witnessed)


class MonotoneStrategy(Strategy):
    """A first-error strategy: its plans search the steps (`plan_type`), trusting a correct final
    answer as a witness unless `trust_correct=False`."""

    speculates = True

    uses_witnesses = True
    takes_zero_rule = True
    plan_type: type[MonotonePlan]

    def __init__(self, trust_correct: bool = True):
        self.trust_correct = trust_correct

    def plan(self, n_steps: int, k: int, threshold: float, last_correct: bool,
             zero_rule: ZeroRule = ALL_K) -> MonotonePlan:
        return self.plan_type(n_steps, k, threshold, last_correct, self.trust_correct, zero_rule)
