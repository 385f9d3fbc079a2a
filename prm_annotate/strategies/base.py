"""The seam between the rollout stage and the rollout strategies.

A strategy decides WHICH (step, completion index) probes to run; the stage runs them. For each
response the stage asks the strategy for a `Plan`; then, in rounds, it collects `next_round()`
from the record's plan (with shared prefixes: the plans of one problem's responses), sends those
probes to the engine as one round of the record's job on the scheduler (other records' rounds
generate beside it, sharing the prefix cache), grades the completions, and hands each plan its
results with `observe()`. A plan with an empty round is finished; `result()` then gives
the scores and the first error. Exhaustive sampling is one round; cheaper strategies (early
stopping, bisection) use several rounds and look at earlier results.

The last step is never probed: the response's own graded answer decides it (`last_correct`).

Label conventions (shared by all strategies, so they stay comparable):
- `scores[i]` is the fraction of step i's completions that reached the gold answer, or None when
  step i was not probed; the last step's score is 1.0 or 0.0 from the response's own answer.
- the hard label of step i is `scores[i] > threshold`;
- `first_error` is the first step whose hard label is 0, -1 if none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Probe:
    step: int  # 0-based; the completion continues the prefix made of steps[: step + 1]
    index: int  # completion index within the step (0..k-1); part of the completion's seed


@dataclass(frozen=True)
class ProbeResult:
    probe: Probe
    correct: bool | None  # None: the grader could not decide (counted as not correct)
    generated_tokens: int = 0
    # True: no completion was sampled; the stage knows the prefix is the beginning of a solution
    # that reached the gold answer (a correct response of the same problem, or a right completion
    # of another probe). Given only to strategies with `uses_witnesses`.
    witness: bool = False


@dataclass
class PlanResult:
    scores: list[float | None]
    first_error: int
    # Completions behind each score, when a strategy samples fewer than k at some steps (early
    # stopping); None when every probed step got all k.
    sampled: list[int] | None = None
    # Steps decided 1 by a witness, without sampling (monotone strategies with prefix sharing).
    witnessed: list[int] | None = None
    # What the verify strategy found of the judge's claim (strategies/verify.py OUTCOMES).
    verified: str | None = None


class Plan:
    """One response's probes, round by round. A plan says what to run now (`next_round`), takes the
    results (`observe`) and in the end gives the scores (`result`). A plan may also name probes a
    later round may ask for, so the scheduler can start them early while the engine has room
    (speculation): by default it names none, and a strategy opts in by overriding `ahead`/`spare`."""

    def next_round(self) -> list[Probe]:
        """The probes to run now; an empty list means the plan is finished."""
        raise NotImplementedError

    def observe(self, results: Sequence[ProbeResult]) -> None:
        """Results of the probes of the last round (all of them, in any order)."""
        raise NotImplementedError

    def result(self) -> PlanResult:
        raise NotImplementedError

    def takes_witness(self, step: int) -> bool:
        """Whether a witness may decide `step` (strategies with `uses_witnesses`; verify takes none
        at the judge's step, which only fresh completions decide)."""
        return True

    def ahead(self) -> list[Probe]:
        """Probes a later round may ask for: the stage may start them early (speculation) while
        the engine has room. Never changes what the plan asks for or decides."""
        return []

    def spare(self) -> list[Probe]:
        """Probes a later round may ask for, but less likely than `ahead`'s: started early only
        while the engine has idle capacity."""
        return []


class Strategy:
    """A rollout strategy: which probes each response's `Plan` runs. Registered by name in
    `strategies.STRATEGIES`; `summary` is what `rollout --strategy` says of it."""

    name: str
    summary: str
    # Soft labels need all K completions at every reported step.
    supports_soft: bool = False
    # True when the strategy takes a witness as a right completion: a prefix that begins a solution
    # known to reach the answer (the response itself when it is correct, a correct response of the
    # same problem, prefix + a right completion). The rest of that solution is a policy sample from
    # the prefix, paid for elsewhere; counting it can only turn a 0 into a 1, so such strategies
    # may differ from exhaustive's K fresh samples. See docs/rollout-strategies.md.
    uses_witnesses: bool = False
    # True when each plan checks the judge's verdict on its response (verify): the stage reads
    # `--judged` and passes `plan` the response's `JudgeClaim` as `judged`.
    needs_judged: bool = False
    # True when its plans sample steps in rounds and take a `zero_rule` (strategies/zero_rules.py):
    # `plan(..., zero_rule=rule)`; the stage passes one only when `--zero-rule` is not the default.
    takes_zero_rule: bool = False
    # True when its plans name probes ahead of the round (`Plan.ahead`/`spare`): `rollout --speculate`
    # lists it.
    speculates: bool = False

    def plan(self, n_steps: int, k: int, threshold: float, last_correct: bool) -> Plan:
        raise NotImplementedError


def hard_label(score: float, threshold: float) -> bool:
    return score > threshold


def first_error_of(scores: Sequence[float | None], threshold: float) -> int:
    """First step whose hard label is 0; unprobed (None) steps are skipped; -1 if none."""
    for i, score in enumerate(scores):
        if score is not None and not hard_label(score, threshold):
            return i
    return -1


def last_step_score(last_correct: bool) -> float:
    return 1.0 if last_correct else 0.0
