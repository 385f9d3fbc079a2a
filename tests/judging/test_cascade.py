"""The cascade of judges (judging/cascade.py, `judge --escalate-from`) on scripted engines, every
path: the first judge decides, escalates, gave no verdict; the second judge fails; a budget under
shards; a SIGKILLed run rerun gives the same file; the export of a cascaded file's critiques."""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import orjson
import pytest

from prm_annotate.engines.base import GenerationResult
from prm_annotate.engines.sampling import align_tokens
from prm_annotate.errors import UsageError
from prm_annotate.judging.cascade import (CONFIDENCES, NO_VERDICT, PRMMargin, VerdictProbability, VoteAgreement,
                                          parse_budget, threshold_for_budget, verdict_logprob)
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.judge import JudgeStage
from testing.jsonl_files import read_jsonl, sigkill_after_lines, write_jsonl
from testing.scripted_engine import ScriptedEngine

N = 12


def responses() -> list[dict]:
    return [{"id": f"r{i}", "problem": f"What is {i} + 1?", "steps": [f"{i} + 1 = {i + 1}.", f"So {i + 1}.",
                                                                     f"\\boxed{{{i + 1}}}"]} for i in range(N)]


def critic_file(tmp_path, votes_of) -> str:
    """A critic's judge output: record i has the votes `votes_of(i)` (None: unparsed)."""
    out = []
    for r in responses():
        i = int(r["id"][1:])
        votes = votes_of(i)
        parsed = [v for v in votes if v is not None]
        first = max(set(parsed), key=parsed.count) if parsed else None
        out.append({**r, "judge": {"first_error": first, "votes": votes, "parse_failures": votes.count(None),
                                   "model": "critic", "prompt": "processbench", "outputs": [f"critique {v}" for v in votes],
                                   "bill": {"requests": len(votes), "prompt_tokens": 100, "generated_tokens": 20,
                                            "thought_tokens": 0}}})
    return str(write_jsonl(tmp_path / "first.jsonl", out))


def prm_file(tmp_path) -> str:
    out = []
    for r in responses():
        i = int(r["id"][1:])
        scores = [0.9, 0.5 + 0.04 * (i - 6), 0.8]  # the second step's score walks through the threshold
        first = next((k for k, s in enumerate(scores) if s < 0.5), -1)
        out.append({**r, "prm": {"scores": scores, "first_error": first, "threshold": 0.5, "model": "prm",
                                 "bill": {"requests": 1, "prompt_tokens": 30, "generated_tokens": 0, "thought_tokens": 0}}})
    return str(write_jsonl(tmp_path / "first.jsonl", out))


def big_judge(text: str = "\\boxed{1}"):
    return ScriptedEngine(lambda r: text, model="big")


def run(tmp_path, engine, name="out.jsonl", **settings):
    src = write_jsonl(tmp_path / "responses.jsonl", responses())
    stage = JudgeStage(engine, prompt="processbench", **settings)
    summary = run_stage(stage, RunOptions(str(src), str(tmp_path / name), quiet=True))
    return summary, read_jsonl(tmp_path / name), stage


def test_confidences_read_what_the_first_judge_wrote():
    assert VoteAgreement.of({"first_error": 1, "votes": [1, 1, None, 2]}) == 0.5
    p = VerdictProbability.of({"first_error": 1, "votes": [1, 2], "verdict_logprobs": [math.log(0.8), math.log(0.9)]})
    assert p == pytest.approx(0.4)  # the vote for another verdict counts 0
    assert VerdictProbability.of({"first_error": 1, "votes": [1]}) is None  # no logprobs kept: nothing to read
    # the margin over the steps that decide the first error only: step 3 (0.51) is after it
    assert PRMMargin.of({"scores": [0.9, 0.3, 0.51], "threshold": 0.5, "first_error": 1}) == pytest.approx(0.2)
    assert PRMMargin.of({"scores": [0.9, 0.6, 0.55], "threshold": 0.5, "first_error": -1}) == pytest.approx(0.05)
    assert set(CONFIDENCES) == {"verdict-prob", "votes", "prm-margin"}
    with pytest.raises(UsageError, match="unknown"):
        CONFIDENCES.named("vibes")


def test_a_budget_is_a_threshold_that_never_overspends():
    confidences = [0.1, 0.2, 0.2, 0.3, 0.9, None, 0.5, 0.7, 0.8, 0.6]
    for share in (0.0, 0.1, 0.2, 0.3, 0.5, 1.0):
        t = threshold_for_budget(confidences, share)
        escalated = sum(c is None or c < t for c in confidences)
        assert escalated <= max(1, math.floor(share * len(confidences))), (share, t)
    assert threshold_for_budget(confidences, 0.3) == 0.2  # None, 0.1; the tie at 0.2 stays with the first judge
    assert threshold_for_budget(confidences, 0.5) == 0.5
    assert sum(c is None or c < threshold_for_budget(confidences, 1.0) for c in confidences) == 10
    assert parse_budget("10%") == parse_budget("0.1") == 0.1
    with pytest.raises(UsageError):
        parse_budget("120%")


def test_verdict_logprob_is_the_answer_lead_to_the_end():
    text = "Step 2 is wrong. \\boxed{1}"
    pieces = [("Step", -0.1), (" 2", -0.2), (" is", -0.1), (" wrong.", -0.3), (" \\", -0.5), ("boxed", -0.01),
              ("{", -0.02), ("1", -0.7), ("}", -0.03)]
    assert verdict_logprob(text, "\\boxed", align_tokens(text, pieces)) == pytest.approx(-1.26)
    assert verdict_logprob("no answer", "\\boxed", align_tokens("no answer", [("no", -1), (" answer", -1)])) is None


def test_the_first_judge_decides_what_it_is_sure_of_and_the_big_judge_the_rest(tmp_path):
    # votes agree on 0 for even i (sure), split for odd i, unparsed for i = 3
    first = critic_file(tmp_path, lambda i: [None, None, None] if i == 3 else ([0, 0, 0] if i % 2 == 0 else [0, 2, 2]))
    engine = big_judge()
    summary, out, stage = run(tmp_path, engine, escalate_from=first, confidence="votes", escalate_below=0.9)
    assert summary.failed == 0 and len(out) == N
    assert stage.notes(summary)[0] == ("judge: cascade: 6 decided by the first judge (critic), 6 escalated here: "
                                       "votes below 0.9 or no verdict")
    asked = {r.key.split("\x1f")[-1].split("\x00")[0] for r in engine.requests}
    assert asked == {f"r{i}" for i in range(N) if i % 2}  # only the unsure and the unparsed were asked
    for r in out:
        i, c = int(r["id"][1:]), r["judge"]["cascade"]
        if i % 2 == 0:
            assert c["decided_by"] == "first" and r["judge"]["first_error"] == 0 and r["judge"]["model"] == "critic"
            assert "first" not in c and c["confidence"] == 1.0
        else:
            assert c["decided_by"] == "second" and r["judge"]["first_error"] == 1 and r["judge"]["model"] == "big"
            assert c["first"]["outputs"] and c["first"]["model"] == "critic"  # both judges' outputs kept
            assert c["reason"] == (NO_VERDICT if i == 3 else "votes 0.6667 < 0.9")
    # the manifest says how the run cascaded; its stats carry the first judge's bill beside this one's
    manifest = orjson.loads((tmp_path / "out.manifest.json").read_bytes())["runs"][-1]
    assert manifest["settings"]["cascade"]["escalated"] == N // 2 and manifest["settings"]["cascade"]["threshold"] == 0.9
    assert manifest["stats"]["first: requests"] == 3 * N and manifest["bill"]["requests"] == N // 2
    # `stats --params` bills each judge at its own size: the first judge's row beside the big one's
    from prm_annotate.reports.stats import stage_bills

    rows = {r["stage"]: r for r in stage_bills([str(tmp_path / "out.jsonl")], {"judge": 72 * 10**9,
                                                                              "first-judge": 15 * 10**8})["stages"]}
    assert rows["first-judge"]["prompt_tokens"] == 100 * N and rows["first-judge"]["decode_tokens"] == 20 * N
    assert rows["first-judge"]["compute"] == pytest.approx(120 * N * 1.5)
    assert rows["judge"]["requests"] == N // 2 and rows["judge"]["prompt_tokens"] == 10 * N // 2
    assert rows["judge"]["compute"] == pytest.approx(72 * (rows["judge"]["prefill_tokens"] + rows["judge"]["decode_tokens"]))


def test_a_prm_first_judge_and_its_margin(tmp_path):
    first = prm_file(tmp_path)
    engine = big_judge("\\boxed{-1}")
    _, out, _ = run(tmp_path, engine, escalate_from=first, escalate_below=0.1)  # default: prm-margin
    by = {r["id"]: r["judge"] for r in out}
    for i in range(N):
        margin = abs(0.04 * (i - 6))
        judge = by[f"r{i}"]
        assert judge["cascade"]["kind"] == "prm-margin"
        if margin >= 0.1 - 1e-9 and round(margin, 9) >= 0.1:
            assert judge["cascade"]["decided_by"] == "first" and judge["prompt"] == "prm-scores"
            assert judge["first_error"] == (1 if i < 6 else -1) and judge["scores"][1] == pytest.approx(0.5 + 0.04 * (i - 6))
        else:
            assert judge["cascade"]["decided_by"] == "second" and judge["first_error"] == -1
            assert judge["cascade"]["first"]["scores"]


def test_a_kind_that_does_not_read_the_first_file_is_refused(tmp_path):
    first = prm_file(tmp_path)
    with pytest.raises(UsageError, match="reads a judge record"):
        JudgeStage(big_judge(), escalate_from=first, confidence="votes", escalate_below=0.5)
    with pytest.raises(UsageError, match="one of"):
        JudgeStage(big_judge(), escalate_from=first)


def test_the_second_judge_failing_leaves_the_record_for_a_rerun(tmp_path):
    first = critic_file(tmp_path, lambda i: [0] if i % 2 == 0 else [None])
    failing = ScriptedEngine(lambda r: RuntimeError("HTTP 500"), model="big")
    summary, out, _ = run(tmp_path, failing, escalate_from=first, escalate_below=0.5)
    assert summary.failed == N // 2 and {r["id"] for r in out} == {f"r{i}" for i in range(0, N, 2)}
    summary, out, _ = run(tmp_path, big_judge(), escalate_from=first, escalate_below=0.5)  # the rerun
    assert summary.failed == 0 and len(out) == N


def test_a_response_the_first_judge_never_saw_is_refused_alone(tmp_path):
    first = critic_file(tmp_path, lambda i: [0])
    lines = (tmp_path / "first.jsonl").read_bytes().splitlines()
    (tmp_path / "first.jsonl").write_bytes(b"\n".join(lines[1:]) + b"\n")
    summary, out, _ = run(tmp_path, big_judge(), escalate_from=first, escalate_below=0.5)
    assert summary.failed == 1 and len(out) == N - 1


def test_a_budget_under_shards_escalates_what_the_whole_run_escalates(tmp_path):
    first = critic_file(tmp_path, lambda i: [0] * (1 + i % 4) + [None] * (3 - i % 4))  # agreement 1/4 .. 4/4
    src = write_jsonl(tmp_path / "responses.jsonl", responses())
    outs = []
    for shard in ((0, 2), (1, 2), None):
        name = "whole.jsonl" if shard is None else f"shard{shard[0]}.jsonl"
        stage = JudgeStage(big_judge(), prompt="processbench", escalate_from=first, budget="25%")
        run_stage(stage, RunOptions(str(src), str(tmp_path / name), quiet=True, shard=shard))
        outs.append(read_jsonl(tmp_path / name))
    whole = {r["id"]: r for r in outs[2]}
    sharded = {r["id"]: r for r in outs[0] + outs[1]}
    assert sharded == whole
    escalated = [r for r in whole.values() if r["judge"]["cascade"]["decided_by"] == "second"]
    assert sorted(r["id"] for r in escalated) == ["r0", "r4", "r8"]
    # `merge` joins the shards as it joins any judge shards: every id once, the whole run's records
    from typer.testing import CliRunner

    from prm_annotate.cli import app

    merged = CliRunner().invoke(app, ["merge", str(tmp_path / "shard0.jsonl"), str(tmp_path / "shard1.jsonl"),
                                      "-o", str(tmp_path / "merged.jsonl"), "--input", str(src)])
    assert merged.exit_code == 0, merged.output
    assert {r["id"]: r for r in read_jsonl(tmp_path / "merged.jsonl")} == whole


def test_a_resumed_cascade_must_keep_its_first_file_and_threshold(tmp_path):
    first = critic_file(tmp_path, lambda i: [0, 0] if i % 2 else [0, 1])
    run(tmp_path, big_judge(), escalate_from=first, escalate_below=0.9)
    stage = JudgeStage(big_judge(), escalate_from=first, escalate_below=0.4)
    with pytest.raises(UsageError, match="must keep its first file and threshold"):
        stage.cascade.first.check_resume(str(tmp_path / "out.jsonl"), stage.cascade.threshold)


def test_verdict_logprobs_become_a_first_judge_and_feed_the_cascade(tmp_path):
    def script(request):
        text = "Fine. \\boxed{-1}"
        pieces = [("Fine.", -0.1), (" \\", -0.01), ("boxed", -0.01), ("{-", -0.01), ("1", -0.01 if "What is 1 + 1" in str(
            request.messages) else -2.0), ("}", 0.0)]
        return GenerationResult(key=request.key, texts=[text], finish_reasons=["stop"], prompt_tokens=5,
                                generated_tokens=6, token_logprobs=[align_tokens(text, pieces)])

    engine = ScriptedEngine(script, model="critic")
    _, first, _ = run(tmp_path, engine, name="first.jsonl", verdict_logprobs=True)
    assert all(r.logprobs for r in engine.requests)
    lps = {r["id"]: r["judge"]["verdict_logprobs"][0] for r in first}
    assert lps["r1"] == pytest.approx(-0.04) and lps["r0"] == pytest.approx(-2.03)
    _, out, _ = run(tmp_path, big_judge(), escalate_from=str(tmp_path / "first.jsonl"), escalate_below=0.9)
    decided = {r["id"]: r["judge"]["cascade"] for r in out}
    assert decided["r1"]["decided_by"] == "first" and decided["r1"]["kind"] == "verdict-prob"
    assert decided["r0"]["decided_by"] == "second"


DRIVER = textwrap.dedent("""
    import sys, time
    from prm_annotate.pipeline.runner import RunOptions, run_stage
    from prm_annotate.stages.judge import JudgeStage
    from testing.scripted_engine import ScriptedEngine

    def slow(request):
        time.sleep(0.3)
        return "\\\\boxed{1}"

    src, first, out = sys.argv[1:4]
    stage = JudgeStage(ScriptedEngine(slow, model="big"), prompt="processbench", escalate_from=first, budget="50%")
    run_stage(stage, RunOptions(src, out, batch_size=1, quiet=True))
""")


def test_killed_and_rerun_gives_the_same_file(tmp_path):
    first = critic_file(tmp_path, lambda i: [0] * (1 + i % 4) + [None] * (3 - i % 4))
    src = write_jsonl(tmp_path / "responses.jsonl", responses())
    out, reference = tmp_path / "out.jsonl", tmp_path / "reference.jsonl"
    cmd = [sys.executable, "-c", DRIVER, str(src), first]
    partial = sigkill_after_lines([*cmd, str(out)], out, 3, 60)
    assert 3 <= partial < N
    assert subprocess.run([*cmd, str(out)], timeout=120).returncode == 0
    assert subprocess.run([*cmd, str(reference)], timeout=120).returncode == 0
    assert out.read_bytes() == reference.read_bytes()
    assert sum(r["judge"]["cascade"]["decided_by"] == "second" for r in read_jsonl(out)) == N // 2


def test_a_cascaded_file_feeds_consensus_verify_and_only_the_second_judges_critiques_train(tmp_path):
    from typer.testing import CliRunner

    from prm_annotate.cli import app
    from prm_annotate.stages.consensus import run_consensus
    from prm_annotate.stages.judged_file import JudgedFile
    from testing.labelled_fixtures import mc_of

    def critic_votes(request) -> str:  # two votes: both 1 for an even i, 1 then 2 for an odd one
        i = int(str(request.messages).split("What is ")[1].split(" ")[0])
        return "\\boxed{2}" if i % 2 and request.key.endswith("\x001") else "\\boxed{1}"

    critic = ScriptedEngine(critic_votes, model="critic")
    _, first, _ = run(tmp_path, critic, name="first.jsonl", votes=2)
    _, cascaded, _ = run(tmp_path, big_judge(), name="cascaded.jsonl", escalate_from=str(tmp_path / "first.jsonl"),
                         escalate_below=0.9)
    second = {r["id"] for r in cascaded if r["judge"]["cascade"]["decided_by"] == "second"}
    assert second == {f"r{i}" for i in range(1, N, 2)}
    # verify reads a cascaded file as any judged file: the decided verdict is judge.first_error
    judged = JudgedFile.load(str(tmp_path / "cascaded.jsonl"))
    assert all(judged.claim(f"r{i}").first_error == 1 for i in range(N))
    write_jsonl(tmp_path / "rollouts.jsonl", [{**r, "answer": "1", "mc": mc_of(1, 3)} for r in responses()])
    run_consensus(str(tmp_path / "rollouts.jsonl"), str(tmp_path / "cascaded.jsonl"), str(tmp_path / "consensus.jsonl"),
                  quiet=True)
    assert len(read_jsonl(tmp_path / "consensus.jsonl")) == N
    result = CliRunner().invoke(app, ["export", str(tmp_path / "consensus.jsonl"), "--format", "critic", "--judged",
                                      str(tmp_path / "cascaded.jsonl"), "-o", str(tmp_path / "critic.jsonl")])
    assert result.exit_code == 0, result.output
    rows = read_jsonl(tmp_path / "critic.jsonl")
    assert {r["id"] for r in rows} == second and {r["judge_model"] for r in rows} == {"big"}
    assert f"{N // 2} responses a cascade's first judge decided" in result.output


def test_plan_bills_only_the_escalated_records_and_says_what_the_first_judge_spent(tmp_path):
    from prm_annotate.stages.config import JudgeConfig
    from prm_annotate.stages.plan import estimate_judge

    first = critic_file(tmp_path, lambda i: [0, 0] if i % 2 == 0 else [0, 1])
    src = write_jsonl(tmp_path / "responses.jsonl", responses())
    whole = estimate_judge(str(src), JudgeConfig(prompt="processbench"), {"model": "big", "model_params": 72 * 10**9})
    config = JudgeConfig(prompt="processbench", escalate_from=first, escalate_below=0.9)
    cascaded = estimate_judge(str(src), config, {"model": "big", "model_params": 72 * 10**9})
    assert cascaded.records == N // 2 and whole.records == N
    assert cascaded.figures["requests"].high == whole.figures["requests"].high // 2
    (note,) = [n for n in cascaded.notes if n.startswith("cascade:")]
    assert "6 of 12 responses go to this judge" in note and "1,200 prefill + 240 decode tokens" in note


def test_the_benchmarks_intervals_sizes_and_target():
    from prm_annotate.engines.bill import Bill
    from testing.cascade_bench import Part, Road, Training, check_t1, critic_paper_b, wilson

    lo, hi = wilson(95, 100)
    assert lo == pytest.approx(88.8, abs=0.1) and hi == pytest.approx(97.8, abs=0.1)  # the textbook interval
    assert wilson(0, 10)[0] == pytest.approx(0.0, abs=1e-9) and wilson(10, 10)[1] == pytest.approx(100.0)
    assert critic_paper_b(10**9, 72 * 10**9) == 1.5 and critic_paper_b(36 * 10**9, 72 * 10**9) == 36.0

    def road(label, tokens, b, kept_share, truth, training=None, escalated=None):
        r = Road(label, [Part("all", Bill(prompt_tokens=tokens), 1, b)], 100, "", "", training, escalated)
        r.quality.update({"share": kept_share, "truth": truth, "kept": round(kept_share)})
        return r

    seed = Training([Part("seed", Bill(prompt_tokens=1000), 1, 72)], 100, 1, 7)  # 72,000 + 2,100 once
    paper = road("(a)", 1000, 72, 60.0, 99.0)
    cheap = road("(d)", 100, 72, 60.0, 98.7, seed, escalated=5)  # 10x less, but for its training
    (ok, met), = check_t1([paper, cheap], over=10**5)
    # (a): 72,000 / 60 kept; (d): (7,200 + its training's 74,100 x 100 / 1e5) / 60: 1,200 / 121.2 = 9.90
    assert met and "x9.90" in ok and "aim 10x: not met" in ok
    worse = road("(d)", 100, 72, 60.0, 98.4, seed, escalated=5)  # 0.6 points below: not as true
    alone = road("(c)", 10, 72, 60.0, 99.0, seed, escalated=0)  # the first judge alone is no cascade
    ((text, met),) = check_t1([paper, worse, alone], over=10**5)
    assert not met and "no cascade setting" in text
