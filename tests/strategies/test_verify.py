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
    cases = 0
    for probed in range(1, 5):
        for labels in itertools.product([0, 1], repeat=probed):
            for correct, first_right in itertools.product((False, True), (0, K - 1)):
                ref_rec = response("r", probed + 1, correct)
                right = {("r", i): ({first_right} if lab else set()) for i, lab in enumerate(labels)}
                ref = mc_of(stage_for(Exhaustive(), right)[0], [ref_rec])["r"]
                hard = [s > 0 for s in ref["scores"]]  # the last step from the response's own answer
                # One response per claim j, with r's labels, verified in one stage.
                claims = [(response(f"j{j}", probed + 1, correct), j) for j in range(-1, probed + 1)]
                rules = {(rec.id, i): good for rec, _ in claims for (_, i), good in right.items()}
                stage, engine = stage_for(Verify(), rules, judged="judged.jsonl", judged_file=judged_file(claims))
                got = mc_of(stage, [rec for rec, _ in claims])
                asked = [r.messages[-1]["content"].split()[2] for r in engine.requests]
                for rec, j in claims:
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
                    cases += 1
    assert cases > 500


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


def test_what_a_confirmation_costs_and_when_step_j_waits():
    rec = response("r", 5, False)
    # j = 2: step 1 right at its first completion, step 2 never: 1 + K completions in three rounds
    # (step j's rounds of 1, 2, the rest), as early-stop spends on one step.
    mc, engine = verify({("r", 1): {0}, ("r", 2): set()}, rec, 2)
    assert mc["verified"] == CONFIRMED and mc["sampled"] == [0, 1, K, 0, 0]
    assert mc["completions"] == 1 + K and engine.calls == 3
    # Step 1 fails its first completion: step 2's second round waits for step 1 to settle.
    mc, engine = verify({("r", 1): {2}, ("r", 2): set()}, rec, 2)
    assert mc["verified"] == CONFIRMED and mc["sampled"] == [0, 3, K, 0, 0] and engine.calls == 4
    # Step 1 is 0 (all K fail): refuted at j-1; step 2 got only its first completion, and scores null.
    mc, engine = verify({("r", 1): set(), ("r", 2): set()}, rec, 2)
    assert mc["verified"] == REFUTED_AT_J_1 and mc["sampled"] == [0, K, 1, 0, 0]
    assert mc["scores"] == [None, 0.0, None, None, 0.0] and mc["first_error"] == 1
    # Step j is right at its first completion: refuted at j at once.
    mc, engine = verify({("r", 1): {0}, ("r", 2): {0}}, rec, 2)
    assert mc["verified"] == REFUTED_AT_J and mc["completions"] == 2 and engine.calls == 1
    assert mc["first_error"] == 4  # the wrong answer: the first 0 among the decided steps, not a label


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
    assert "2 not rolled out by verify (no parsed judge verdict)" in summary.line()
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
