"""`rollout --zero-rule`: the beta-binomial rule against a direct computation of its posterior (the
product form of B(a, b+f+m)/B(a, b+f) and a numerical integral over the Beta posterior), what it
does to the strategies' probes (scripted engine, the real stage), and its refusals."""
from __future__ import annotations

import itertools
import math
import subprocess
import sys

import orjson
import pytest

from prm_annotate.errors import UsageError
from prm_annotate.stages.config import RolloutConfig
from prm_annotate.strategies import Probe, ProbeResult
from prm_annotate.strategies.binary import Binary
from prm_annotate.strategies.early_stop import EarlyStop
from prm_annotate.strategies.sampling import StepSampler
from prm_annotate.strategies.verify import CONFIRMED, REFUTED_AT_J, REFUTED_AT_J_1, JudgeClaim, Verify
from prm_annotate.strategies.zero_rules import (ALL_K, WORLD_PRIOR, AllK, BetaBinomial, beta_binomial_cdf,
                                                make_zero_rule)
from testing.scripted_rollouts import mc_of, response, stage_for
from tests.strategies.test_verify import judged_file


def no_success_product(a: float, b: float, failures: int, m: int) -> float:
    """P(no success in m more | Beta(a, b) prior, `failures` failures and no success so far)."""
    return math.prod((b + failures + i) / (a + b + failures + i) for i in range(m))


def posterior_integral(below: int, m: int, alpha: float, beta: float, points: int = 20000) -> float:
    """P(X < below), X | p ~ Binomial(m, p), p ~ Beta(alpha, beta): midpoint rule after p = u^(1/alpha)
    (which removes the density's singularity at 0 for alpha < 1)."""
    total = 0.0
    for i in range(points):
        u = (i + 0.5) / points
        p = u ** (1 / alpha)
        # density of p times dp/du, with the Beta function's normaliser applied below
        weight = (1 - p) ** (beta - 1) / alpha
        total += weight * sum(math.comb(m, x) * p ** x * (1 - p) ** (m - x) for x in range(below))
    log_b = math.lgamma(alpha) + math.lgamma(beta) - math.lgamma(alpha + beta)
    return total / points / math.exp(log_b)


@pytest.mark.parametrize("a,b", [(0.3, 0.8), (1.0, 1.0), (2.5, 0.4), WORLD_PRIOR])
def test_no_success_chance_is_the_ratio_of_beta_functions(a, b):
    rule = BetaBinomial(a=a, b=b)
    for failures, m in itertools.product(range(0, 8), range(0, 9)):
        direct = no_success_product(a, b, failures, m)
        assert beta_binomial_cdf(1, m, a, b + failures) == pytest.approx(direct, rel=1e-9)
        if failures:
            assert rule.stays_zero(0, failures, failures + m, 1) == pytest.approx(direct, rel=1e-9)


@pytest.mark.parametrize("alpha,beta", [(0.7, 1.3), (2.0, 3.0), (1.35, 4.05)])
def test_the_general_tail_matches_the_integral_over_the_posterior(alpha, beta):
    for m, below in [(4, 1), (6, 2), (7, 4), (3, 3)]:
        assert beta_binomial_cdf(below, m, alpha, beta) == pytest.approx(
            posterior_integral(below, m, alpha, beta), abs=2e-3), (m, below)


def test_decides_zero_by_the_definition_for_every_count():
    for (a, b), tol, k, threshold in itertools.product([(0.3, 0.8), WORLD_PRIOR, (2.0, 0.5)], (0.01, 0.05, 0.3),
                                                       (4, 8), (0.0, 0.25, 0.5)):
        rule = BetaBinomial(a=a, b=b, tolerance=tol)
        needed = math.floor(threshold * k) + 1
        for sampled in range(k + 1):
            for right in range(min(sampled, needed - 1) + 1):  # below needed: not yet a 1
                m = k - sampled
                reach = right + m < needed
                stays = sum(math.comb(m, x) * math.exp(
                    math.lgamma(a + right + x) + math.lgamma(b + sampled - right + m - x) - math.lgamma(a + b + k)
                    - math.lgamma(a + right) - math.lgamma(b + sampled - right) + math.lgamma(a + b + sampled))
                    for x in range(max(0, needed - right)))
                expected = reach or (sampled > 0 and right <= threshold * sampled and stays >= 1 - tol)
                assert rule.decides_zero(right, sampled, k, needed, threshold) == expected, (a, b, tol, k, right, sampled)
                assert AllK().decides_zero(right, sampled, k, needed, threshold) == reach


def test_at_threshold_zero_the_rule_is_a_number_of_failures():
    for (a, b), tol in itertools.product([(0.3, 0.8), WORLD_PRIOR, (1.0, 1.0)], (0.01, 0.05, 0.2)):
        rule = BetaBinomial(a=a, b=b, tolerance=tol)
        n_star = rule.failures_for_zero(8)
        direct = next(n for n in range(1, 9) if n == 8 or no_success_product(a, b, n, 8 - n) >= 1 - tol)
        assert n_star == direct, (a, b, tol)
        sampler = StepSampler(0, 8, 0.0, rule)
        rounds = []
        while sampler.label is None:
            probes = sampler.next_probes()
            rounds.append(len(probes))
            for _ in probes:
                sampler.observe(False)
        assert sampler.label is False and sampler.sampled == n_star and sum(rounds) == n_star
        assert sampler.ahead() == []
    # A looser tolerance never needs more failures; all-k needs all K.
    assert BetaBinomial(tolerance=0.2).failures_for_zero(8) <= BetaBinomial(tolerance=0.01).failures_for_zero(8) <= 8


def test_rounds_and_speculation_stop_where_the_rule_would_call_the_zero():
    rule = BetaBinomial(tolerance=0.05)
    n_star = rule.failures_for_zero(8)
    assert 2 < n_star < 8  # the shipped prior: more than the first two rounds, fewer than K
    sampler = StepSampler(3, 8, 0.0, rule)
    assert sampler.next_probes() == [Probe(3, 0)]
    sampler.observe(False)
    assert sampler.ahead() == [Probe(3, j) for j in range(1, n_star)]  # not up to K
    plain = StepSampler(3, 8, 0.0, ALL_K)
    plain.next_probes()
    plain.observe(False)
    assert plain.ahead() == [Probe(3, j) for j in range(1, 8)]


def test_verify_confirms_after_the_rules_failures_and_says_which_rule():
    rule = BetaBinomial()
    n_star = rule.failures_for_zero(8)
    rec = response("r", 5, False)
    # Step 2 (the judge's j) never right, step 1 right at once: confirmed after n* + 1 completions.
    stage, engine = stage_for(Verify(), {("r", 1): {0}, ("r", 2): set()}, k=8, judged="judged.jsonl",
                              judged_file=judged_file([(rec, 2)]), zero_rule="beta-binomial")
    mc = mc_of(stage, [rec])["r"]
    assert mc["verified"] == CONFIRMED and mc["sampled"] == [0, 1, n_star, 0, 0] and len(engine.requests) == n_star + 1
    assert mc["zero_rule"] == {"name": "beta-binomial", "a": WORLD_PRIOR[0], "b": WORLD_PRIOR[1], "tolerance": 0.05}
    assert stage.settings()["zero_rule"] == mc["zero_rule"]
    # Step j-1 takes the paper's K under the rule too: an early 0 there would refute.
    stage, _ = stage_for(Verify(), {("r", 1): set(), ("r", 2): set()}, k=8, judged="judged.jsonl",
                         judged_file=judged_file([(rec, 2)]), zero_rule="beta-binomial")
    mc = mc_of(stage, [rec])["r"]
    assert mc["verified"] == REFUTED_AT_J_1 and mc["sampled"] == [0, 8, n_star, 0, 0]
    # The price: step j right only at a completion past n*, which all-k finds (refuted), the rule never sees.
    late = {("r", 1): {0}, ("r", 2): {n_star}}
    for zero_rule, outcome in (("all-k", REFUTED_AT_J), ("beta-binomial", CONFIRMED)):
        stage, _ = stage_for(Verify(), late, k=8, judged="judged.jsonl", judged_file=judged_file([(rec, 2)]),
                             zero_rule=zero_rule)
        mc = mc_of(stage, [rec])["r"]
        assert mc["verified"] == outcome, zero_rule
        assert ("zero_rule" in mc) == (zero_rule != "all-k")  # default records are as before
    assert stage_for(Verify(), late, k=8, judged="judged.jsonl", judged_file=judged_file([(rec, 2)]))[0].settings()[
        "zero_rule"] == {"name": "all-k"}


def test_early_stop_and_binary_take_the_rule_too():
    rec = response("r", 5, False)
    n_star = BetaBinomial().failures_for_zero(8)
    for strategy, zeros in ((EarlyStop(), 4), (Binary(), None)):
        plain = mc_of(stage_for(strategy, {}, k=8)[0], [rec])["r"]
        ruled = mc_of(stage_for(strategy, {}, k=8, zero_rule="beta-binomial")[0], [rec])["r"]
        assert plain["first_error"] == ruled["first_error"] == 0  # every completion wrong: step 0 is 0 either way
        assert all(n in (0, 8) for n in plain["sampled"]) and all(n in (0, n_star) for n in ruled["sampled"])
        assert ruled["completions"] * 8 == plain["completions"] * n_star
        if zeros:
            assert ruled["completions"] == zeros * n_star


def test_plans_without_a_rule_are_as_before():
    plan = Verify().plan(5, 8, 0.0, False, judged=JudgeClaim(2))
    for _ in range(8):  # one completion a round at j: the eighth failure decides its 0, not the seventh
        assert plan.at_j.label is None
        probes = plan.next_round()
        plan.observe([ProbeResult(p, False) for p in probes])
    assert plan.at_j.sampled == 8 and plan.at_j.label is False


def test_bad_rules_and_tolerances_are_refused():
    with pytest.raises(UsageError, match="--zero-rule nope: unknown"):
        make_zero_rule("nope")
    for tolerance in (0.0, 1.0, -0.1, 2.0):
        with pytest.raises(UsageError, match="--zero-tolerance"):
            make_zero_rule("beta-binomial", tolerance)
    with pytest.raises(UsageError, match="read by --zero-rule beta-binomial, not all-k"):
        RolloutConfig(strategy="binary", zero_tolerance=0.1)
    with pytest.raises(UsageError, match="samples all K at once"):
        RolloutConfig(zero_rule="beta-binomial")
    assert RolloutConfig(strategy="scan", zero_rule="beta-binomial", zero_tolerance=0.1).zero_rule_object == \
        BetaBinomial(tolerance=0.1)
    assert RolloutConfig().zero_rule_object == ALL_K


@pytest.mark.parametrize("args,said", [
    (["--strategy", "binary", "--zero-rule", "beta-binomial", "--zero-tolerance", "1.5"], "--zero-tolerance 1.5"),
    (["--zero-rule", "beta-binomial"], "--strategy exhaustive samples all K at once"),
    (["--strategy", "scan", "--zero-rule", "wald"], "--zero-rule wald: unknown"),
])
def test_cli_refuses_bad_zero_rules_with_status_2(tmp_path, args, said):
    src = tmp_path / "responses.jsonl"
    src.write_bytes(orjson.dumps(response("r", 3, True).dump()) + b"\n")
    out = subprocess.run([sys.executable, "-m", "prm_annotate", "rollout", str(src), "-o", str(tmp_path / "o.jsonl"),
                          "--model", str(tmp_path / "no-model"), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert said in out.stderr
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.engine
def test_the_rule_on_the_world_policy_costs_less_and_the_default_is_unchanged(world_policy):
    """Real vLLM on the world's policy, K=8, per-response seeds (a completion is the same whichever
    strategy asks): with the default a 0 costs all K and every label is exhaustive's; the rule at a
    tolerance it never meets makes the default's records byte for byte (but for naming itself);
    at the default tolerance it costs fewer tokens, and where it differs from exhaustive it is
    only by calling a 0 that a later completion would have made a 1."""
    from prm_annotate.stages.rollout import RolloutInput, RolloutStage
    from prm_annotate.strategies.exhaustive import Exhaustive
    from prm_annotate.world import make_problems
    from testing.rollout_bench import sample_responses

    engine = world_policy
    responses = sample_responses(engine, make_problems(8, seed=5, split="zero-rule"), n=4, max_tokens=96)
    records = [RolloutInput.model_validate(r) for r in responses]
    n_star = BetaBinomial().failures_for_zero(8)

    def run(strategy, **settings):
        stage = RolloutStage(engine, k=8, strategy=strategy, max_tokens=96, seed=1, **settings)
        try:
            return {o.id: o.records[0].dump()["mc"] for o in stage.process(records)}, stage.stats["generated_tokens"]
        finally:
            stage.close()

    ref, _ = run(Exhaustive())
    hard = {rid: [s > 0 for s in mc["scores"]] for rid, mc in ref.items()}
    claims = judged_file([(rec, max(-1, ref[rec.id]["first_error"] - (i % 2))) for i, rec in enumerate(records)])
    for make, settings in ((EarlyStop, {}), (Verify, {"judged": "judged.jsonl", "judged_file": claims})):
        plain, plain_tokens = run(make(), **settings)
        tight, _ = run(make(), zero_rule="beta-binomial", zero_tolerance=1e-9, **settings)
        ruled, ruled_tokens = run(make(), zero_rule="beta-binomial", **settings)
        zeros_before_k = 0
        for rid, mc in plain.items():
            assert "zero_rule" not in mc
            assert orjson.dumps({k: v for k, v in tight[rid].items() if k != "zero_rule"}) == orjson.dumps(mc)
            for step, (score, sampled) in enumerate(zip(mc["scores"][:-1], mc["sampled"][:-1])):
                if score is not None:
                    assert (score > 0) == hard[rid][step] and (score > 0 or sampled == 8), (make.name, rid, step)
            for step, (score, sampled) in enumerate(zip(ruled[rid]["scores"][:-1], ruled[rid]["sampled"][:-1])):
                if score is None:
                    continue
                assert hard[rid][step] or score == 0, (make.name, rid, step)  # an all-K 0 stays a 0
                if score == 0:
                    assert sampled <= n_star
                    zeros_before_k += 1
        assert zeros_before_k > 0, make.name
        assert ruled_tokens < plain_tokens, make.name
