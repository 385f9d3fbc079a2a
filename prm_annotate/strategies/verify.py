"""verify: MC only where it decides agreement with the judge (the cheap road to the consensus set).

Consensus keeps a response when MC's first error equals the judge's. Once the judge has named its
first error j, MC only has to confirm or refute that one claim. Under the monotonic assumption
binary and scan make (a prefix that cannot reach the answer stays unable), MC's first error is j
exactly when step j has no right completion out of K and step j-1 has one. So:

- step j is probed with early stopping, one completion a round: its first right completion
  refutes the claim ("refuted at j"); only K failures confirm it (a confirmed j costs the full K),
  or fewer under a sequential zero rule (`--zero-rule`, zero_rules.py: at step j only; step j-1
  always takes the paper's K). Rounds of one draw exactly what the rule needs (its floor, with the
  exhaustive run's seeds: testing/verify_floor.py); rounds of 1, 2 and the rest drew 1.24x that on
  the thinking world. The rest of the K are named `ahead`, so where they are usually needed
  speculation starts them at once;
- step j-1 is probed, with early stopping, only once step j is 0: its first right completion
  confirms the claim, K failures refute it ("refuted at j-1"). The judge's j often comes before
  MC's first error (the policy recovers from a wrong step), so step j is refuted more often than
  j-1 and goes first: j-1's completions would be wasted on a refuted j. `ahead` names the
  rest of step j's completions and step j-1's first once step j has failed, and nothing before
  (speculation starts them only while most names turn out asked for: pipeline/speculation.py);
- step 0 has no step before it, and the last step is decided by the response's own answer (the
  rule every strategy shares), so j = 0 probes only step 0 and j = last only step j-1;
- the judge saying "no error" (-1) needs no rollout: a right final answer is the witness that
  every step is 1 (confirmed), a wrong one makes the last step 0 (refuted); likewise j = last with
  a right answer is refuted by the answer itself; a one-step response with j = 0 and a wrong answer is
  confirmed by it ("... without rollouts");
- a right-answer response the judge faults at a step j before the last is the paper's prized
  case (a right answer through a wrong step): the witness rule would refute it without looking,
  but K fresh completions from step j sometimes all fail, as exhaustive would find. It is probed at
  j and j-1 like any other (`probe_right_answers=True`, the default; False refutes it unseen);
- a response whose judge verdict is unparsed or missing is not rolled out (it cannot be kept).

A step left undecided when the claim is settled scores null (its completions so far are counted
in `sampled`). `first_error` is the first 0 among the decided steps (the last step from the
response's answer), so it equals the judge's exactly when the claim is confirmed: `consensus`
keeps exactly those. Every other step is unprobed: the record holds MC evidence at one or two
steps, not MC labels, and export/train refuse it as such.

With `--share-prefixes`, a witness (a prefix of a right solution of the same problem: a correct
response, the response itself when it is right, prefix + a right completion; see monotone.py) may
settle step j-1 as 1 without sampling, as it does for binary and scan. Step j takes no witness:
only fresh completions decide it, as exhaustive's would (a witness there could only refute, and
the response's own right answer would refute every prized case unseen). Without sharing, a
probed step's hard label is exhaustive's with the same seeds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from prm_annotate.strategies.base import (Plan, PlanResult, Probe, ProbeResult, Strategy, first_error_of,
                                          last_step_score)
from prm_annotate.strategies.sampling import StepSampler
from prm_annotate.strategies.zero_rules import ALL_K, ZeroRule

# What `mc.verified` says, one of these.
CONFIRMED = "confirmed"
REFUTED_AT_J = "refuted at j"
REFUTED_AT_J_1 = "refuted at j-1"
CONFIRMED_FREE = "confirmed without rollouts"
REFUTED_FREE = "refuted without rollouts"
UNPARSED = "not rolled out: judge unparsed"
MISSING = "not rolled out: no judge verdict"
OUTCOMES = (CONFIRMED, REFUTED_AT_J, REFUTED_AT_J_1, CONFIRMED_FREE, REFUTED_FREE, UNPARSED, MISSING)
KEPT = (CONFIRMED, CONFIRMED_FREE)


@dataclass(frozen=True)
class JudgeClaim:
    """The judge's first error for one response: a step, -1 (no error), or None (unparsed); `missing`:
    the judged file has no record of the response."""

    first_error: int | None
    missing: bool = False


class VerifyPlan(Plan):
    def __init__(self, n_steps: int, k: int, threshold: float, last_correct: bool, claim: JudgeClaim,
                 probe_right_answers: bool, zero_rule: ZeroRule = ALL_K):
        self.n_steps, self.last_correct = n_steps, last_correct
        self.threshold, self.zero_rule = threshold, zero_rule
        self.outcome: str | None = None
        self.at_j: StepSampler | None = None  # step j, when it is rolled out
        self.before: StepSampler | None = None  # step j-1, when it is rolled out
        last, j = n_steps - 1, claim.first_error
        if claim.missing:
            self.outcome = MISSING
        elif j is None:
            self.outcome = UNPARSED
        elif j == -1:
            self.outcome = CONFIRMED_FREE if last_correct else REFUTED_FREE
        elif j == last and last_correct:
            self.outcome = REFUTED_FREE  # the answer is right, so the last step is 1
        elif last_correct and not probe_right_answers:
            self.outcome = REFUTED_FREE  # the witness rule: the response itself reached the answer from step j
        else:
            if j < last:
                self.at_j = StepSampler(j, k, threshold, zero_rule, one_at_a_time=True)
            if j > 0:
                # The zero rule confirms at j only: a 0 at j-1 refutes, and there the rule's early 0s
                # are often 1s of K (measured: docs/rollout-strategies.md), so j-1 takes all K.
                self.before = StepSampler(j - 1, k, threshold, one_at_a_time=True)
            if self.at_j is None and self.before is None:
                self.outcome = CONFIRMED_FREE  # one step, wrong answer, judge says step 0
        self._decide()

    def _decide(self) -> None:
        if self.outcome is not None:
            return
        if self.at_j is not None and self.at_j.label is True:
            self.outcome = REFUTED_AT_J
        elif self.before is not None and self.before.label is False:
            self.outcome = REFUTED_AT_J_1
        elif (self.at_j is None or self.at_j.label is False) and (self.before is None or self.before.label is True):
            self.outcome = CONFIRMED

    def _j_open(self) -> bool:
        return self.at_j is not None and self.at_j.label is None

    def next_round(self) -> list[Probe]:
        if self.outcome is not None:
            return []
        if self._j_open():
            return self.at_j.next_probes()
        return self.before.next_probes()  # step j is 0 (or the last step): step j-1 decides

    def takes_witness(self, step: int) -> bool:
        return self.at_j is None or step != self.at_j.step

    def observe(self, results: Sequence[ProbeResult]) -> None:
        for r in results:
            sampler = self.at_j if self.at_j is not None and r.probe.step == self.at_j.step else self.before
            sampler.observe(r.correct, r.witness)
        self._decide()

    def ahead(self) -> list[Probe]:
        if self.outcome is not None:
            return []
        # Only after a step's first result is in and was a failure (undecided, so no right one yet):
        # before that, its first right completion (no more needed) is as likely.
        if self._j_open():
            if self.at_j.sampled == 0:
                return []
            before = StepSampler(self.before.step, self.before.k, self.threshold, one_at_a_time=True).next_probes() \
                if self.before else []
            return self.at_j.ahead() + before
        return self.before.ahead() if self.before.sampled else []

    def result(self) -> PlanResult:
        if self.outcome is None:
            raise RuntimeError("the plan's claim is not settled yet")
        scores: list[float | None] = [None] * self.n_steps
        sampled = [0] * self.n_steps
        for s in (self.before, self.at_j):
            if s is not None:
                scores[s.step] = s.score if s.label is not None else None
                sampled[s.step] = s.sampled
        scores[-1] = last_step_score(self.last_correct)
        witnessed = [s.step for s in (self.before, self.at_j) if s is not None and s.witnessed]
        return PlanResult(scores=scores, first_error=first_error_of(scores, self.threshold), sampled=sampled,
                          witnessed=witnessed, verified=self.outcome)


class Verify(Strategy):
    name = "verify"
    summary = "needs --judged: MC only at the judge's first error j and j-1, for consensus"
    needs_judged = True
    speculates = True
    uses_witnesses = True  # at step j-1 only (VerifyPlan.takes_witness)
    takes_zero_rule = True

    def __init__(self, probe_right_answers: bool = True):
        self.probe_right_answers = probe_right_answers

    def plan(self, n_steps: int, k: int, threshold: float, last_correct: bool,
             judged: JudgeClaim | None = None, zero_rule: ZeroRule = ALL_K) -> VerifyPlan:
        if judged is None:
            raise ValueError("--strategy verify plans from the judge's verdict (--judged)")
        return VerifyPlan(n_steps, k, threshold, last_correct, judged, self.probe_right_answers, zero_rule)
