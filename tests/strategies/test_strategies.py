"""Rollout strategies on hand-made cases (scripted engine, real grader, the real rollout stage):
the same first_error as exhaustive wherever labels are monotone, what happens where they are not,
probe counts, null scores for unprobed steps, soft labels refused, prefix sharing. Then the
strategies on the world's trained policy through real vLLM."""
from __future__ import annotations

import itertools
import subprocess
import sys

import orjson
import pytest

from prm_annotate.errors import UsageError
from prm_annotate.stages.rollout import RolloutInput, RolloutStage
from prm_annotate.strategies import STRATEGIES, first_error_of, get_strategy
from prm_annotate.strategies.adaptive_binary import AdaptiveBinary
from prm_annotate.strategies.binary import Binary
from prm_annotate.strategies.early_stop import EarlyStop
from prm_annotate.strategies.exhaustive import Exhaustive
from prm_annotate.strategies.scan import Scan
from testing.scripted_engine import ScriptedEngine
from testing.scripted_rollouts import K, mc_of, response, rules, stage_for

CHEAP = {"early-stop": EarlyStop, "binary": Binary, "adaptive-binary": AdaptiveBinary, "scan": Scan,
         "scan verify": lambda: Scan(trust_correct=False)}


def monotone_cases():
    """Every monotone labelling of 1-5 probed steps: 1..1 0..0, the final answer right only when
    every step is 1 (a right answer is itself a completion that reached the answer)."""
    for probed in range(1, 6):
        for ones in range(probed + 1):
            labels = [1] * ones + [0] * (probed - ones)
            yield labels, False
            if ones == probed:
                yield labels, True


@pytest.mark.parametrize("name", list(CHEAP))
def test_same_first_error_as_exhaustive_where_labels_are_monotone(name):
    # Every case is a record of its own, all in one stage run (a stage starts a grading worker).
    cases, records, right = {}, [], {}
    for labels, correct in monotone_cases():
        for first_right in (0, 1, K - 1):
            rid = f"c{len(cases)}"
            cases[rid] = (labels, correct, first_right)
            records.append(response(rid, len(labels) + 1, correct))
            right.update(rules(rid, labels, first_right))
    reference = mc_of(stage_for(Exhaustive(), right)[0], records)
    stage, engine = stage_for(CHEAP[name](), right)
    got = mc_of(stage, records)
    asked = [r.messages[-1]["content"].split()[2] for r in engine.requests]
    for rid, (labels, correct, first_right) in cases.items():
        mc = got[rid]
        assert mc["first_error"] == reference[rid]["first_error"], (name, labels, correct, first_right)
        assert mc["completions"] == asked.count(rid) <= len(labels) * K
    assert len(cases) == 75 and sum(asked.count(rid) for rid in cases) == len(engine.requests)


def test_early_stop_keeps_every_hard_label_of_exhaustive_even_when_not_monotone():
    records, right = [], {}
    for labels in itertools.product([0, 1], repeat=4):
        for correct in (False, True):
            records.append(response(f"c{len(records)}", 5, correct))
            right.update({(records[-1].id, i): ({i % K} if lab else set()) for i, lab in enumerate(labels)})
    reference = mc_of(stage_for(Exhaustive(), right)[0], records)
    got = mc_of(stage_for(EarlyStop(), right)[0], records)
    assert len(got) == len(reference) == 32
    for rid, ref in reference.items():
        assert [s > 0 for s in got[rid]["scores"]] == [s > 0 for s in ref["scores"]], rid
        assert got[rid]["first_error"] == ref["first_error"], rid


def test_early_stop_rounds_and_costs():
    # Steps whose first right completion is index 0, 1, 2, 3, and a step never right.
    rec = response("r", 6, False)
    right = {("r", 0): {0, 1, 2, 3}, ("r", 1): {1}, ("r", 2): {2, 3}, ("r", 3): {3}, ("r", 4): set()}
    stage, engine = stage_for(EarlyStop(), right)
    mc = mc_of(stage, [rec])["r"]
    # Rounds of 1, then 2, then the rest: stops after 1, 3, 3, 4, 4 completions.
    assert mc["sampled"] == [1, 3, 3, 4, 4, 0]
    assert mc["scores"] == [1.0, 1 / 3, 1 / 3, 1 / 4, 0.0, 0.0]
    assert mc["first_error"] == 4 and mc["completions"] == 15 == len(engine.requests)
    assert engine.calls == 3  # all steps advance together: three rounds, one engine call each


def test_early_stop_with_a_threshold_keeps_exhaustive_labels():
    rec = response("r", 4, False)
    right = {("r", 0): {0, 1, 2}, ("r", 1): {1, 3}, ("r", 2): {0}}
    for threshold in (0.0, 0.25, 0.5):
        ref = mc_of(stage_for(Exhaustive(), right, threshold=threshold)[0], [rec])["r"]
        mc = mc_of(stage_for(EarlyStop(), right, threshold=threshold)[0], [rec])["r"]
        assert [s > threshold for s in mc["scores"]] == [s > threshold for s in ref["scores"]], threshold
        assert mc["first_error"] == ref["first_error"] == first_error_of(mc["scores"], threshold)


def test_binary_probes_log_steps_and_leaves_the_rest_null():
    # 8 probed steps (the 9th, the answer, is wrong), first 0 at step 5: bisection probes
    # step 3 (1), step 5 (0), step 4 (1).
    labels = [1, 1, 1, 1, 1, 0, 0, 0]
    rec = response("r", 9, False)
    stage, engine = stage_for(Binary(), rules("r", labels, first_right=0))
    mc = mc_of(stage, [rec])["r"]
    assert mc["first_error"] == 5
    assert mc["scores"] == [None, None, None, 1.0, 1.0, 0.0, None, None, 0.0]
    assert mc["completions"] == 1 + 1 + K == len(engine.requests)
    assert mc["sampled"] == [0, 0, 0, 1, 1, K, 0, 0, 0]
    # Exhaustive pays for all 8 steps.
    assert mc_of(stage_for(Exhaustive(), rules("r", labels, 0))[0], [rec])["r"]["completions"] == 8 * K


def test_scan_stops_at_the_first_zero_and_leaves_later_steps_null():
    labels = [1, 1, 0, 1, 0]
    rec = response("r", 6, False)
    stage, engine = stage_for(Scan(), rules("r", labels, first_right=0))
    mc = mc_of(stage, [rec])["r"]
    assert mc["first_error"] == 2
    assert mc["scores"] == [1.0, 1.0, 0.0, None, None, 0.0]
    assert len(engine.requests) == 1 + 1 + K


def test_a_correct_response_costs_nothing_under_the_monotonic_assumption():
    rec = response("r", 5, True)
    for strategy in (Binary(), Scan()):
        stage, engine = stage_for(strategy, rules("r", [1, 1, 1, 1]))
        mc = mc_of(stage, [rec])["r"]
        assert engine.requests == [] and mc["first_error"] == -1 and mc["scores"] == [None] * 4 + [1.0]


def test_non_monotone_labels_where_the_cheap_strategies_differ():
    """A 0 step followed by 1 steps: a prefix that could not reach the answer, extended, could.
    Exhaustive's rule (first step with label 0) says 0. Bisection only sees 1s on its path and
    ends at the response's own wrong answer; the forward scan reads exhaustive's rule in order."""
    wrong = response("w", 5, False)
    right = rules("w", [0, 1, 1, 1], first_right=0)
    got = {name: mc_of(stage_for(make(), right)[0], [wrong])["w"]["first_error"]
           for name, make in {"exhaustive": Exhaustive, **CHEAP}.items()}
    # adaptive-binary probes step 0 first here (first errors sit early as often as late): it lands on 0.
    assert got == {"exhaustive": 0, "early-stop": 0, "binary": 4, "adaptive-binary": 0, "scan": 0, "scan verify": 0}

    # A right final answer after a step no completion could save ("right answer, flawed process"):
    # trusting the answer says -1; probing correct responses too finds exhaustive's 1.
    lucky = response("c", 4, True)
    right = rules("c", [1, 0, 1], first_right=0)
    got = {name: mc_of(stage_for(make(), right)[0], [lucky])["c"]["first_error"]
           for name, make in {"exhaustive": Exhaustive, **CHEAP}.items()}
    assert got == {"exhaustive": 1, "early-stop": 1, "binary": -1, "adaptive-binary": -1, "scan": -1,
                   "scan verify": 1}


def test_soft_labels_refused_for_the_cheap_strategies():
    assert get_strategy("exhaustive", "soft").supports_soft
    for name in STRATEGIES:
        if name != "exhaustive":
            with pytest.raises(UsageError, match="cannot give --label soft"):
                get_strategy(name, "soft")
            assert get_strategy(name, "hard").name == name


def test_cli_refuses_soft_with_a_cheap_strategy(tmp_path):
    src = tmp_path / "responses.jsonl"
    src.write_bytes(orjson.dumps(response("r", 3, True).dump()) + b"\n")
    out = subprocess.run([sys.executable, "-m", "prm_annotate", "rollout", str(src), "-o", str(tmp_path / "o.jsonl"),
                          "--model", str(tmp_path / "no-model"), "--strategy", "binary", "--label", "soft"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "binary" in out.stderr and "--label soft" in out.stderr
    assert not (tmp_path / "o.jsonl").exists() or (tmp_path / "o.jsonl").read_text() == ""


def test_shared_prefixes_are_rolled_out_once():
    # Two responses of one problem share their first two steps, then differ.
    a = response("a", 0, False, ["Step 1: x 0.", "Step 2: x 1.", "Step 3: a 2.", "\\boxed{9}"])
    b = response("b", 0, False, ["Step 1: x 0.", "Step 2: x 1.", "Step 3: b 2.", "\\boxed{8}"])
    right = {("x", 0): {0, 2}, ("x", 1): {1}, ("a", 2): {3}, ("b", 2): set()}
    for strategy in (Exhaustive, EarlyStop, Scan, Binary):
        stage, engine = stage_for(strategy(), right, share=True)
        mc = mc_of(stage, [a, b])
        assert mc["a"]["first_error"] == 3 and mc["b"]["first_error"] == 2, strategy
        shared = mc["a"]["shared_completions"] + mc["b"]["shared_completions"]
        assert shared > 0
        assert len(engine.requests) == mc["a"]["completions"] + mc["b"]["completions"] - shared
        assert stage.stats["engine_completions"] == len(engine.requests)
        keys = [(r.messages[-1]["content"], r.sampling.seed) for r in engine.requests]
        assert len(keys) == len(set(keys))
    # Exhaustive: the 2 shared steps x K once, plus each response's own third step.
    stage, engine = stage_for(Exhaustive(), right, share=True)
    mc = mc_of(stage, [a, b])
    assert len(engine.requests) == 2 * K + 2 * K
    assert mc["a"]["scores"][:2] == mc["b"]["scores"][:2] == [0.5, 0.25]


def test_a_shared_prefix_is_answered_in_a_later_round_without_a_request():
    # Bisection: a probes its step 0 ("x 0") at once, b only after its step 1 failed all K
    # (three rounds): b's fourth round is served from a's completions, with no engine call.
    a = response("a", 0, False, ["Step 1: x 0.", "Step 2: x 1.", "\\boxed{9}"])
    b = response("b", 0, False, ["Step 1: x 0.", "Step 2: y 1.", "Step 3: y 2.", "\\boxed{9}"])
    stage, engine = stage_for(Binary(), {("x", 0): set(), ("y", 1): set()}, share=True)
    mc = mc_of(stage, [a, b])
    assert mc["a"]["first_error"] == 0 and mc["b"]["first_error"] == 0
    assert sum(r.messages[-1]["content"] == "Step 1: x 0.\n\n" for r in engine.requests) == K
    assert mc["b"]["shared_completions"] == K and mc["a"]["shared_completions"] == 0
    assert engine.calls == 3 and len(engine.requests) == 2 * K


def test_witnesses_decide_steps_without_sampling_for_monotone_strategies():
    """With sharing, a prefix of a solution that reached the answer (a correct sibling, or a
    prefix + a right completion) is a 1 for binary and scan without a completion; exhaustive and
    early-stop never use witnesses (they promise exhaustive's labels, not the assumption's)."""
    good = response("c", 0, True, ["Step 1: x 0.", "Step 2: x 1.", "\\boxed{16}"])
    bad = response("d", 0, False, ["Step 1: x 0.", "Step 2: x 1.", "Step 3: z 2.", "\\boxed{9}"])
    right = {("x", 0): set(), ("x", 1): set(), ("z", 2): {0}}  # sampling alone would say step 0 is 0
    stage, engine = stage_for(Binary(), right, share=True)
    mc = mc_of(stage, [good, bad])
    assert mc["d"]["first_error"] == 3 and mc["d"]["witnessed"] == [1]
    assert mc["d"]["scores"] == [None, None, 1.0, 0.0]
    assert [r.messages[-1]["content"].count("\n\n") for r in engine.requests] == [3]  # only step 2 sampled
    ref = mc_of(stage_for(Exhaustive(), right, share=True)[0], [good, bad])
    assert ref["d"]["first_error"] == 0 and "witnessed" not in ref["d"]  # MC alone: non-monotone
    assert mc_of(stage_for(Binary(), right, share=False)[0], [good, bad])["d"]["first_error"] == 0

    # A right completion is a witness for the prefixes of the solution it makes: from step 0 the
    # completer wrote e's own step 1 and then the right answer, so e's step 1 is a 1 unsampled.
    e = response("e", 0, False, ["Step 1: x 0.", "Step 2: w 1.", "\\boxed{9}"])

    def script(request):
        if request.messages[-1]["content"] == "Step 1: x 0.\n\n":
            return "Step 2: w 1.\n\nSo \\boxed{16}."
        return "\\boxed{99}"

    for share, expected, requests in ((True, 2, 1), (False, 1, 1 + K)):
        engine = ScriptedEngine(script)
        stage = RolloutStage(engine, k=K, strategy=Scan(), share_prefixes=share)
        mc = mc_of(stage, [e])["e"]
        assert mc["first_error"] == expected and len(engine.requests) == requests, share
        assert mc.get("witnessed", []) == ([1] if share else [])


@pytest.mark.engine
def test_strategies_on_the_world_policy(world_policy):
    """Real vLLM on the world's trained policy (real right and wrong completions): early-stop keeps
    exhaustive's hard labels; scan and binary keep exhaustive's first error on every wrong-answer
    response whose labels came out monotone; all of them cost less."""
    from prm_annotate.world import make_problems
    from testing.rollout_bench import sample_responses

    engine = world_policy
    responses = sample_responses(engine, make_problems(6, seed=3, split="strategies"), n=4, max_tokens=96)
    records = [RolloutInput.model_validate(r) for r in responses]

    def run(strategy):
        stage = RolloutStage(engine, k=4, strategy=strategy, max_tokens=96, seed=1)
        try:
            return {o.id: o.records[0].dump()["mc"] for o in stage.process(records)}, stage.stats
        finally:
            stage.close()

    ref, ref_stats = run(Exhaustive())
    assert {s for mc in ref.values() for s in mc["scores"]} > {0.0, 1.0}  # real, mixed outcomes
    early, early_stats = run(EarlyStop())
    for rid, mc in early.items():
        assert [s > 0 for s in mc["scores"]] == [s > 0 for s in ref[rid]["scores"]], rid
    for strategy in (Scan(), Binary()):
        got, stats = run(strategy)
        for rec in records:
            mc, base = got[rec.id], ref[rec.id]
            labels = [s > 0 for s in base["scores"]]
            monotone = labels == sorted(labels, reverse=True)
            if not rec.correct and (monotone or strategy.name == "scan"):
                assert mc["first_error"] == base["first_error"], (strategy.name, rec.id)
            if rec.correct:
                assert mc["completions"] == 0 and mc["first_error"] == -1
            assert all(s is None for s, n in zip(mc["scores"][:-1], mc["sampled"][:-1]) if n == 0)
        assert stats["generated_tokens"] < early_stats["generated_tokens"] < ref_stats["generated_tokens"]


@pytest.mark.parametrize("name", list(CHEAP))
@pytest.mark.parametrize("share", [False, True])
def test_speculation_changes_no_label_and_is_counted_apart(name, share):
    """With `speculate`, a step's remaining completions start ahead of the round that asks for
    them; the records are the same as without (the plan only sees what it asked for), the engine
    did more, and the stage's stats say how much was started ahead and used."""
    cases = list(monotone_cases())[:12] + [([1, 0, 1, 0], False), ([0, 1, 1], True)]
    records, right = [], {}
    for n, (labels, correct) in enumerate(cases):
        rid = f"r{n}"
        records.append(response(rid, len(labels) + 1, correct))
        right.update(rules(rid, labels, first_right=n % K))
    plain_stage, plain_engine = stage_for(CHEAP[name](), right, share=share)
    plain = mc_of(plain_stage, records)
    stage, engine = stage_for(CHEAP[name](), right, share=share)
    stage.speculate = 1000
    ahead = mc_of(stage, records)
    assert ahead == plain
    assert len(engine.requests) >= len(plain_engine.requests)
    assert stage.stats["ahead_started"] > 0
    assert stage.stats["ahead_used"] <= stage.stats["ahead_started"]
    # The job receives only what it asked for; the engine ran that plus what started ahead unasked
    # and was not cancelled (a batch-only engine runs a request at the next poll or never).
    assert stage.stats["engine_completions"] == len(plain_engine.requests)
    assert len(engine.requests) == len(plain_engine.requests) + stage.stats["ahead_started"] \
        - stage.stats["ahead_used"] - stage.stats["ahead_cancelled"]


def test_monotone_plans_look_one_choice_ahead():
    """`ahead` names the first probe of the step probed next for either label of the current one
    (binary: both halves; scan: the next step, as a 0 ends the scan), then the rest of the
    current step's completions; `spare` the rest of the step probed next if the current one is 0
    (binary: the left half's; scan has none); what the plan then asks for is among them."""
    from prm_annotate.strategies.base import Probe, ProbeResult

    plan = Binary().plan(9, 8, 0.0, last_correct=False)
    assert plan.next_round() == [Probe(3, 0)]
    assert plan.ahead() == [Probe(1, 0), Probe(5, 0)] + [Probe(3, j) for j in range(1, 8)]
    assert plan.spare() == [Probe(1, j) for j in range(1, 8)]
    plan.observe([ProbeResult(Probe(3, 0), True)])  # step 3 is 1: the search goes right
    assert plan.next_round() == [Probe(5, 0)]
    assert plan.ahead() == [Probe(4, 0), Probe(6, 0)] + [Probe(5, j) for j in range(1, 8)]
    assert plan.spare() == [Probe(4, j) for j in range(1, 8)]
    guesses = plan.ahead() + plan.spare()
    plan.observe([ProbeResult(Probe(5, 0), False)])  # undecided: the next round asks among the guesses
    asked = plan.next_round()
    assert asked == [Probe(5, 1), Probe(5, 2)] and set(asked) <= set(guesses)

    plan = Scan().plan(5, 4, 0.0, last_correct=False)
    assert plan.next_round() == [Probe(0, 0)]
    assert plan.ahead() == [Probe(1, 0)] + [Probe(0, j) for j in range(1, 4)] and plan.spare() == []
    plan = Scan().plan(5, 4, 0.0, last_correct=True)  # trusted: nothing to probe, nothing ahead
    assert plan.next_round() == [] and plan.ahead() == []


def test_benchmark_targets_judge_default_rows_and_show_the_rest():
    from testing.rollout_bench import Row, check_targets

    def row(label, wall, tokens=100):
        return Row(label, "+share" in label, tokens, 10, wall, {}, busy=1.0)

    rows = [row("exhaustive", 10.0), row("early-stop", 10.4), row("binary", 11.0, 50),
            row("binary --speculate 0", 20.0, 40), row("exhaustive (lock-step)", 10.2)]
    strict = dict(check_targets(rows))
    assert strict["exhaustive no slower than lock-step (5% for noise): 10.0 s vs 10.2 s"] is True
    assert strict["early-stop faster than exhaustive: x0.96"] is False
    assert strict["binary --speculate 0 vs exhaustive: x0.50"] is None  # shown, not a target
    parity = dict(check_targets(rows, adaptive_faster=False))
    assert parity["early-stop no slower than exhaustive (5% for noise): x0.96"] is True
    assert parity["binary no slower than exhaustive (5% for noise): x0.91"] is False
    rows.append(row("binary +share", 2.0, 10))
    assert dict(check_targets(rows))["binary +share wall ratio >= 0.8 x its token ratio: x5.00 vs 0.8 x 10.00 = 8.00"] is False


def test_the_consensus_benchmark_holds_verify_to_its_floor():
    from testing.consensus_bench import Cost, RoadRow, check_floor, format_targets

    def row(label, tokens):
        return RoadRow(label, Cost(tokens, 1.0), {}, 4)

    floor = row("floor", 100)
    assert check_floor([row("judge + verify", 120)], floor) == [
        ("judge + verify: rollout tokens within 1.2x of its floor: 1.20x", True)]
    assert check_floor([row("judge + verify", 121)], floor)[0][1] is False
    assert check_floor([row("judge + verify", 121)], None) == []  # no floor run: no target
    assert check_floor([row("judge + verify +share", 500)], floor) == []  # the shared road has no floor
    assert format_targets([row("exhaustive + judge", 900), row("judge + verify", 130)], floor=floor) == (
        "- [NOT met] judge + verify: rollout tokens within 1.2x of its floor: 1.30x")
