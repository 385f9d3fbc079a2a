"""--strategy verify on hand-made cases (scripted engine, real grader, the real rollout stage and
consensus): its verdict is exhaustive's hard labels at j-1 and j with the same seeds, for every
labelling (monotone or not), answer and judge claim; what it costs; the responses it does not roll
out; consensus keeps exactly the confirmed ones."""
from __future__ import annotations

import itertools

import orjson
import pytest

from prm_annotate.errors import UsageError
from prm_annotate.records import Judged
from prm_annotate.stages.config import RolloutConfig
from prm_annotate.stages.consensus import run_consensus
from prm_annotate.stages.judged_file import JudgedFile
from prm_annotate.strategies import Probe, ProbeResult
from prm_annotate.strategies.exhaustive import Exhaustive
from prm_annotate.strategies.verify import (CONFIRMED, CONFIRMED_FREE, KEPT, MISSING, REFUTED_AT_J, REFUTED_AT_J_1,
                                            REFUTED_FREE, UNPARSED, Verify)
from testing.scripted_rollouts import K, mc_of, response, stage_for


def judged_record(rec, first_error) -> Judged:
    return Judged.model_validate({"id": rec.id, "problem": rec.problem, "steps": rec.steps, "judge": {
        "first_error": first_error, "votes": [first_error], "parse_failures": int(first_error is None),
        "model": "judge", "prompt": "paper"}})


def judged_file(claims: list) -> JudgedFile:
    """claims: (record, the judge's first error (None: unparsed)); records left out are missing."""
    return JudgedFile("judged.jsonl", "0" * 64, {rec.id: judged_record(rec, j) for rec, j in claims})


def verify(right, rec, j, strategy=None) -> tuple[dict, object]:
    """The mc of one response verified against the judge's first error j, and the engine."""
    stage, engine = stage_for(strategy or Verify(), right, judged="judged.jsonl", judged_file=judged_file([(rec, j)]))
    return mc_of(stage, [rec])[rec.id], engine


def test_verdict_is_exhaustives_labels_at_j_minus_1_and_j_for_every_labelling_and_claim():
    # Every case (labelling, answer, index of the right completion) is a reference record for
    # exhaustive and one record per judge claim j for verify, all in two stage runs.
    cases, refs, claims, ref_rules, claim_rules = {}, [], [], {}, {}
    for probed in range(1, 5):
        for labels in itertools.product([0, 1], repeat=probed):
            for correct, first_right in itertools.product((False, True), (0, K - 1)):
                case = f"c{len(cases)}"
                cases[case] = (probed, labels, correct)
                right = {i: ({first_right} if lab else set()) for i, lab in enumerate(labels)}
                refs.append(response(case, probed + 1, correct))
                ref_rules.update({(case, i): good for i, good in right.items()})
                for j in range(-1, probed + 1):
                    claims.append((response(f"{case}j{j}", probed + 1, correct), j))
                    claim_rules.update({(f"{case}j{j}", i): good for i, good in right.items()})
    reference = mc_of(stage_for(Exhaustive(), ref_rules)[0], refs)
    stage, engine = stage_for(Verify(), claim_rules, judged="judged.jsonl", judged_file=judged_file(claims))
    got = mc_of(stage, [rec for rec, _ in claims])
    asked = [r.messages[-1]["content"].split()[2] for r in engine.requests]
    for rec, j in claims:
        probed, labels, correct = cases[rec.id.split("j")[0]]
        hard = [s > 0 for s in reference[rec.id.split("j")[0]]["scores"]]  # the last step from the answer
        mc = got[rec.id]
        confirmed = correct if j == -1 else (not hard[j] and (j == 0 or hard[j - 1]))
        assert (mc["verified"] in KEPT) == confirmed, (labels, correct, j, mc["verified"])
        assert (mc["first_error"] == j) == confirmed, (labels, correct, j)
        assert mc["judge_first_error"] == j and mc["strategy"] == "verify"
        probed_steps = {p for p, n in enumerate(mc["sampled"]) if n}
        assert probed_steps <= {j - 1, j} - {probed}, (labels, j)  # never the last step
        assert mc["completions"] == asked.count(rec.id) <= 2 * K
        if mc["verified"] == REFUTED_AT_J:
            assert hard[j] and j < probed
        if mc["verified"] == REFUTED_AT_J_1:
            assert not hard[j - 1]
        if mc["verified"] in (CONFIRMED_FREE, REFUTED_FREE):
            assert mc["completions"] == 0
        # A decided step's score agrees with exhaustive's hard label; an undecided one is null.
        for step in probed_steps:
            if mc["scores"][step] is not None:
                assert (mc["scores"][step] > 0) == hard[step]
    assert len(claims) > 500 and sum(asked.count(rec.id) for rec, _ in claims) == len(engine.requests)


def test_where_the_claim_is_decided_without_rollouts():
    cases = [  # (steps, answer right, judge's first error, outcome)
        (3, True, -1, CONFIRMED_FREE),  # the right answer witnesses every step
        (3, False, -1, REFUTED_FREE),  # the wrong answer is a 0 at the last step
        (3, True, 2, REFUTED_FREE),  # j = last, but the answer is right: the last step is 1
        (1, False, 0, CONFIRMED_FREE),  # one step, wrong: its own answer is the first error
        (1, True, 0, REFUTED_FREE),
    ]
    for n, correct, j, outcome in cases:
        rec = response("r", n, correct)
        mc, engine = verify({}, rec, j)
        assert mc["verified"] == outcome and not engine.requests and mc["completions"] == 0, (n, correct, j)
        assert mc["first_error"] == (j if outcome in KEPT else mc["first_error"])


def test_what_a_confirmation_costs_and_the_order_of_the_steps():
    rec = response("r", 5, False)
    # j = 2: step 2 never right, step 1 right at its first completion: K + 1 completions, one a
    # round (step j's K, then step j-1's first).
    mc, engine = verify({("r", 1): {0}, ("r", 2): set()}, rec, 2)
    assert mc["verified"] == CONFIRMED and mc["sampled"] == [0, 1, K, 0, 0]
    assert mc["completions"] == 1 + K and engine.calls == K + 1
    # Step j is right at its second completion: refuted at j, step j-1 never probed, and no third
    # completion drawn (rounds of 1, 2 would have drawn it with the second).
    mc, engine = verify({("r", 1): {0}, ("r", 2): {1}}, rec, 2)
    assert mc["verified"] == REFUTED_AT_J and mc["sampled"] == [0, 0, 2, 0, 0] and engine.calls == 2
    assert mc["scores"] == [None, None, 1 / 2, None, 0.0]
    assert mc["first_error"] == 4  # the wrong answer: the first 0 among the decided steps, not a label
    # Step j-1 is 0 too (all K fail): refuted at j-1, after step j's K.
    mc, engine = verify({("r", 1): set(), ("r", 2): set()}, rec, 2)
    assert mc["verified"] == REFUTED_AT_J_1 and mc["sampled"] == [0, K, K, 0, 0]
    assert mc["scores"] == [None, 0.0, 0.0, None, 0.0] and mc["first_error"] == 1
    # j = last, wrong answer: only step j-1 is probed.
    mc, engine = verify({("r", 3): {2}}, rec, 4)
    assert mc["verified"] == CONFIRMED and mc["sampled"] == [0, 0, 0, 3, 0]  # right at its third


def test_speculation_waits_for_a_failure_and_changes_no_verdict():
    from prm_annotate.strategies.verify import JudgeClaim

    plan = Verify().plan(5, K, 0.0, False, judged=JudgeClaim(2))
    assert [p.step for p in plan.next_round()] == [2] and plan.ahead() == []
    plan.observe([ProbeResult(Probe(2, 0), False)])
    assert [(p.step, p.index) for p in plan.next_round()] == [(2, 1)]
    assert [(p.step, p.index) for p in plan.ahead()] == [(2, i) for i in range(2, K)] + [(1, 0)]
    rec = response("r", 5, False)
    for right in ({("r", 1): {0}, ("r", 2): set()}, {("r", 1): set(), ("r", 2): {3}}, {("r", 1): {2}}):
        stage, _ = stage_for(Verify(), right, judged="judged.jsonl", judged_file=judged_file([(rec, 2)]))
        plain = mc_of(stage, [rec])["r"]
        stage, _ = stage_for(Verify(), right, judged="judged.jsonl", judged_file=judged_file([(rec, 2)]))
        stage.speculate = 64
        ahead = mc_of(stage, [rec])["r"]
        assert ahead == plain, right


def test_a_right_answer_faulted_before_the_last_step_is_probed_unless_told_not_to():
    rec = response("r", 4, True)
    right = {("r", 0): {0}, ("r", 1): set()}
    mc, engine = verify(right, rec, 1)
    assert mc["verified"] == CONFIRMED and mc["first_error"] == 1 and len(engine.requests) == 1 + K
    mc, engine = verify(right, rec, 1, Verify(probe_right_answers=False))
    assert mc["verified"] == REFUTED_FREE and not engine.requests


def test_unparsed_or_missing_verdicts_are_not_rolled_out():
    parsed, unparsed, missing = (response(r, 3, False) for r in ("a", "b", "c"))
    stage, engine = stage_for(Verify(), {}, judged="judged.jsonl",
                              judged_file=judged_file([(parsed, 0), (unparsed, None)]))
    mc = mc_of(stage, [parsed, unparsed, missing])
    assert mc["b"]["verified"] == UNPARSED and mc["c"]["verified"] == MISSING
    assert mc["b"]["completions"] == mc["c"]["completions"] == 0
    assert {r.messages[-1]["content"].split()[2] for r in engine.requests} == {"a"}
    assert stage.stats[f"verified: {UNPARSED}"] == stage.stats[f"verified: {MISSING}"] == 1


def test_consensus_keeps_exactly_the_confirmed(tmp_path):
    records = [response(f"r{i}", 4, i % 3 == 0) for i in range(12)]
    claims = [(rec, [-1, 0, 1, 2, 3, None][i % 6]) for i, rec in enumerate(records[:-1])]  # the last: missing
    right = {(f"r{i}", s): ({i % K} if (i + s) % 3 else set()) for i in range(12) for s in range(3)}
    judged = judged_file(claims)
    stage, _ = stage_for(Verify(), right, judged="judged.jsonl", judged_file=judged)
    outcomes = list(stage.process(records))
    (tmp_path / "rollouts.jsonl").write_bytes(b"".join(orjson.dumps(o.records[0].dump()) + b"\n" for o in outcomes))
    (tmp_path / "judged.jsonl").write_bytes(b"".join(orjson.dumps(r.dump()) + b"\n" for r in judged.records.values()))
    summary = run_consensus(str(tmp_path / "rollouts.jsonl"), str(tmp_path / "judged.jsonl"),
                            str(tmp_path / "consensus.jsonl"), quiet=True)
    confirmed = {o.id for o in outcomes if o.records[0].mc.model_extra["verified"] in KEPT}
    kept = {orjson.loads(line)["id"] for line in (tmp_path / "consensus.jsonl").read_bytes().splitlines()}
    assert kept == confirmed and 0 < len(kept) < len(records)
    assert summary.not_rolled_out == 2  # one unparsed, one missing
    assert "2 not rolled out by verify" in summary.line()
    # Against another judged file than the one verified against: refused.
    other = [(rec, 0 if j == 1 else j) for rec, j in claims]
    (tmp_path / "other.jsonl").write_bytes(b"".join(orjson.dumps(r.dump()) + b"\n"
                                                    for r in judged_file(other).records.values()))
    with pytest.raises(UsageError, match="verified against the judge's first error 1"):
        run_consensus(str(tmp_path / "rollouts.jsonl"), str(tmp_path / "other.jsonl"),
                      str(tmp_path / "consensus2.jsonl"), quiet=True)


def test_settings_name_the_judged_file_and_the_options_go_together(tmp_path):
    with pytest.raises(UsageError, match="--judged"):
        RolloutConfig(strategy="verify")
    with pytest.raises(UsageError, match="--strategy verify only"):
        RolloutConfig(strategy="binary", judged="judged.jsonl")
    rec = response("r", 3, False)
    stage, _ = stage_for(Verify(), {}, judged="judged.jsonl", judged_file=judged_file([(rec, 0)]))
    assert stage.settings()["judged"] == {"path": "judged.jsonl", "sha256": "0" * 64}
    assert "judged" not in stage_for(Exhaustive(), {})[0].settings()
    # A judged record holding other steps for the id is bad input.
    other = response("r", 3, False, ["Step 1: other.", "Step 2: other.", "\\boxed{16}"])
    with pytest.raises(ValueError, match="holds other steps"):
        stage.input_model.model_validate(other.dump())


def verify_files(tmp_path) -> tuple:
    """responses.jsonl, judged.jsonl and a verify rollouts file of three responses (scripted engine)."""
    records = [response(f"r{i}", 3, i == 0) for i in range(3)]
    judged = judged_file([(rec, [-1, 1, 0][i]) for i, rec in enumerate(records)])
    stage, _ = stage_for(Verify(), {("r1", 0): {0}, ("r2", 0): set()}, judged="judged.jsonl", judged_file=judged)

    def write(name: str, rows: list[dict]):
        (tmp_path / name).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        return tmp_path / name

    rollouts = write("rollouts.jsonl", [o.records[0].dump() for o in stage.process(records)])
    return (write("responses.jsonl", [r.dump() for r in records]),
            write("judged.jsonl", [r.dump() for r in judged.records.values()]), rollouts)


def test_export_and_train_refuse_verify_rollouts_as_mc_labels(tmp_path):
    from typer.testing import CliRunner

    from prm_annotate.cli import app
    from prm_annotate.world import POLICY_DIR

    runner = CliRunner()
    _, judged, rollouts = verify_files(tmp_path)
    for args in (["export", str(rollouts), "-o", str(tmp_path / "train.jsonl"), "--format", "trl"],
                 ["export", str(rollouts), "-o", str(tmp_path / "ms.jsonl"), "--format", "math-shepherd"],
                 ["train", str(rollouts), "--base", str(POLICY_DIR), "-o", str(tmp_path / "prm")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.stderr)
        assert f"{rollouts}:1:" in result.stderr and "--strategy verify" in result.stderr, result.stderr
        assert "consensus" in result.stderr
    assert not (tmp_path / "train.jsonl").exists() and not (tmp_path / "prm").exists()
    # Its consensus is labels: export takes it.
    consensus = tmp_path / "consensus.jsonl"
    run_consensus(str(rollouts), str(judged), str(consensus), quiet=True)
    result = runner.invoke(app, ["export", str(consensus), "-o", str(tmp_path / "train.jsonl"), "--format", "trl"])
    assert result.exit_code == 0, result.stderr
    # r0 (-1, right answer), r1 (1: step 0 right, step 1 never) and r2 (0: never right) are confirmed.
    assert [orjson.loads(line)["labels"] for line in (tmp_path / "train.jsonl").read_bytes().splitlines()] == [
        [True, True, True], [True, False], [False]]


def test_a_resume_against_a_changed_judged_file_is_refused_before_any_engine_starts(tmp_path):
    import subprocess
    import sys

    responses, judged, rollouts = verify_files(tmp_path)
    # The scripted records name a judged file of sha256 0...0; a real file has its own.
    cmd = [sys.executable, "-m", "prm_annotate", "rollout", str(responses), "-o", str(rollouts), "--strategy", "verify",
           "--judged", str(judged), "--model", "/nonexistent-model", "--quiet"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"{rollouts} line 1 was verified against judged file sha256 000000000000" in result.stderr
    assert "must use the judged file it started with" in result.stderr
    without = subprocess.run(cmd[:cmd.index("--judged")] + cmd[cmd.index("--model"):], capture_output=True, text=True,
                             timeout=120)
    assert without.returncode == 2 and "--judged" in without.stderr


def test_with_shared_prefixes_a_witness_settles_step_j_minus_1_never_step_j():
    from prm_annotate.stages.rollout import RolloutStage
    from testing.scripted_engine import ScriptedEngine

    a = response("a", 0, True, ["Step 1: x.", "Step 2: y.", "\\boxed{16}"])  # right
    b = response("b", 0, False, ["Step 1: x.", "Step 2: z.", "\\boxed{9}"])  # wrong, a's first step
    for share in (True, False):
        engine = ScriptedEngine(lambda request: "\\boxed{99}")  # every fresh completion wrong
        stage = RolloutStage(engine, k=K, strategy=Verify(), share_prefixes=share, judged="judged.jsonl",
                             judged_file=judged_file([(a, 1), (b, 1)]))
        mc = mc_of(stage, [a, b])
        if share:
            # Step 0 is a prefix of the right response a: 1 without sampling. Step 1 takes K fresh
            # completions, even a's own (the prized case: a right answer through a wrong step).
            for rid in "ab":
                assert mc[rid]["verified"] == CONFIRMED and mc[rid]["witnessed"] == [0], rid
                assert mc[rid]["sampled"] == [0, K, 0] and mc[rid]["first_error"] == 1
            assert len(engine.requests) == 2 * K
        else:
            assert mc["a"]["verified"] == mc["b"]["verified"] == REFUTED_AT_J_1
            assert "witnessed" not in mc["a"] and len(engine.requests) == 4 * K
