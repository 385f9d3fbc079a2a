"""adaptive-binary: its splits minimise the expected completions of the search under its prior and
costs (against an independent recursion over every probe order), never cost more than binary's
middle splits in expectation, and find the same first error on monotone labels
(test_strategies.py runs it with the other cheap strategies)."""
from __future__ import annotations

from functools import lru_cache

import pytest

from prm_annotate.strategies import Probe, ProbeResult
from prm_annotate.strategies.adaptive_binary import (COST_OF_A_ONE, LAST_STEP_SHARE, AdaptiveBinary,
                                                     first_error_prior, split_table)
from prm_annotate.strategies.binary import Binary
from prm_annotate.strategies.zero_rules import BetaBinomial

K = 8


def search(strategy, n_steps: int, first_error: int, zero_rule=None) -> tuple[int, int, int]:
    """Run a plan on monotone labels with MC's first error at `first_error` (a wrong answer): a 1
    step is right at its first completion, a 0 step never. (ones probed, zeros probed, found)."""
    extra = {"zero_rule": zero_rule} if zero_rule is not None else {}
    plan = strategy.plan(n_steps, K, 0.0, False, **extra)
    while probes := plan.next_round():
        plan.observe([ProbeResult(p, p.step < first_error) for p in probes])
    labels = [s.label for s in plan.samplers.values()]
    return labels.count(True), labels.count(False), plan.result().first_error


def expected_cost(strategy, n_steps: int, cost_zero: float = K) -> float:
    prior = first_error_prior(n_steps)
    total = 0.0
    for f, p in enumerate(prior):
        ones, zeros, found = search(strategy, n_steps, f)
        assert found == f, (strategy.name, n_steps, f)
        total += p * (ones * COST_OF_A_ONE + zeros * cost_zero)
    return total


def best_possible(n_steps: int, cost_zero: float) -> float:
    """The least expected cost over every probe order, by plain recursion (no table)."""
    prior = first_error_prior(n_steps)

    @lru_cache(maxsize=None)
    def cost(good: int, bad: int) -> float:
        if bad - good <= 1:
            return 0.0
        total = sum(prior[good + 1: bad + 1])
        return min(sum(prior[m + 1: bad + 1]) / total * (COST_OF_A_ONE + cost(m, bad))
                   + sum(prior[good + 1: m + 1]) / total * (cost_zero + cost(good, m)) for m in range(good + 1, bad))

    return cost(-1, n_steps - 1)


@pytest.mark.parametrize("n_steps", range(1, 13))
def test_the_splits_are_the_cheapest_in_expectation_and_never_dearer_than_the_middle(n_steps):
    adaptive, binary = expected_cost(AdaptiveBinary(), n_steps), expected_cost(Binary(), n_steps)
    assert adaptive == pytest.approx(best_possible(n_steps, K), rel=1e-9)
    assert adaptive <= binary + 1e-9
    if n_steps >= 5:
        assert adaptive < binary - 0.05  # the middle is not the cheapest split of a longer search


def test_a_cheaper_zero_moves_the_splits_and_keeps_the_first_error():
    rule = BetaBinomial()
    n_star = rule.failures_for_zero(K)
    assert split_table(9, COST_OF_A_ONE, float(n_star), LAST_STEP_SHARE) != split_table(9, COST_OF_A_ONE, float(K),
                                                                                      LAST_STEP_SHARE)
    for f in range(9):
        ones, zeros, found = search(AdaptiveBinary(), 9, f, zero_rule=rule)
        assert found == f


def test_a_right_answer_costs_nothing_and_without_trust_is_walked_from_the_front():
    plan = AdaptiveBinary().plan(5, K, 0.0, True)
    assert plan.next_round() == [] and plan.result().first_error == -1
    plan = AdaptiveBinary(trust_correct=False).plan(5, K, 0.0, True)
    assert plan.next_round() == [Probe(0, 0)]
