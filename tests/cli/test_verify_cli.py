"""`rollout --strategy verify --judged` as a real process on a real engine: killed with SIGKILL
mid-run (the whole process group, EngineCore too) and rerun, it gives exactly the output of an
uninterrupted run (under the sequential zero rule); its manifest names the judged file;
consensus on it keeps the confirmed."""
from __future__ import annotations

import hashlib
import subprocess
import sys

import orjson
import pytest

from prm_annotate.records import Rollout
from prm_annotate.stages.consensus import run_consensus
from prm_annotate.strategies.verify import KEPT
from testing.heavy import ENGINE_START_TIMEOUT
from testing.jsonl_files import sigkill_after_lines, write_jsonl
from testing.jsonl_files import read_jsonl as read

CLI = [sys.executable, "-m", "prm_annotate"]
N = 40


def responses_and_verdicts() -> tuple[list[dict], list[dict]]:
    """Three-step responses, right and wrong, and a judge naming every kind of first error; one
    verdict unparsed in five, and the last response not judged at all."""
    responses, judged = [], []
    for i in range(N):
        right = i % 3 != 0
        answer = i + 2 if right else i + 3
        rec = {"id": f"p{i}/0", "problem_id": f"p{i}", "problem": f"Tom has {i} apples. Then gets 2 more. How many?",
               "answer": str(i + 2), "steps": [f"Tom has {i} apples.", f"Then {i} + 2 = {answer}.",
                                               f"So \\boxed{{{answer}}}."], "correct": right}
        responses.append(rec)
        first_error = [-1, 0, 1, 2, None][i % 5]
        if i < N - 1:
            judged.append({**rec, "judge": {"first_error": first_error, "votes": [first_error],
                                            "parse_failures": int(first_error is None), "model": "judge",
                                            "prompt": "paper"}})
    return responses, judged


@pytest.mark.engine
def test_verify_killed_mid_run_and_rerun_equals_an_uninterrupted_run(tiny_model_dir, tmp_path):
    # Under the sequential zero rule: its early zeros are the part of verify a resume could get wrong
    # (the default rule's path is the same code with the full K; tests/strategies cover both).
    rule = ["--zero-rule", "beta-binomial", "--zero-tolerance", "0.1"]
    responses, judged = responses_and_verdicts()
    src = write_jsonl(tmp_path / "responses.jsonl", responses)
    judged_path = write_jsonl(tmp_path / "judged.jsonl", judged)
    out = tmp_path / "rollouts.jsonl"
    cmd = [*CLI, "rollout", str(src), "-o", str(out), "--model", str(tiny_model_dir), "--max-model-len", "2048",
           "--start-timeout", str(int(ENGINE_START_TIMEOUT)), "--strategy", "verify", "--judged", str(judged_path),
           "-k", "3", "--max-tokens", "100", "--seed", "3", "--batch-size", "1", "--quiet", *rule]
    # 100 tokens a completion: the 40 records take seconds after the engine is up (at 40, ~9 s here,
    # and once, on a loaded machine, the count went from under 5 to all 40 before the kill)
    partial = sigkill_after_lines(cmd, out, 3, ENGINE_START_TIMEOUT)
    assert 3 <= partial < N

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=ENGINE_START_TIMEOUT + 300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{partial} already done" in rerun.stderr
    resumed = read(out)
    manifest = orjson.loads(out.with_name("rollouts.manifest.json").read_bytes())
    settings = manifest["runs"][-1]["settings"]
    assert settings["strategy"] == "verify" and settings["judged"]["path"] == str(judged_path)
    assert settings["judged"]["sha256"] == hashlib.sha256(judged_path.read_bytes()).hexdigest()
    assert settings["zero_rule"]["name"] == "beta-binomial"
    assert all("zero_rule" in r["mc"] for r in resumed)

    reference = tmp_path / "reference.jsonl"
    whole = subprocess.run([str(reference) if part == str(out) else part for part in cmd], capture_output=True,
                           text=True, timeout=ENGINE_START_TIMEOUT + 300)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert out.read_bytes() == reference.read_bytes()
    said = [line for line in whole.stderr.splitlines() if line.startswith("rollout --strategy verify:")]
    assert said and "7 not rolled out: judge unparsed, 1 not rolled out: no judge verdict" in said[0], whole.stderr

    mc = {r["id"]: r["mc"] for r in resumed}
    for r in resumed:
        Rollout.model_validate(r)
    # Every kind of claim came up, and only the probed ones cost completions.
    assert {m["verified"] for m in mc.values()} >= {"confirmed without rollouts", "refuted without rollouts",
                                                    "not rolled out: judge unparsed", "not rolled out: no judge verdict"}
    assert any(m["completions"] for m in mc.values())
    # K=3 at tolerance 0.1: a 0 after 2 failures
    assert any(n == 2 for m in mc.values() for n in m["sampled"])
    assert all(m["completions"] == 0 for m in mc.values() if m["verified"].endswith("without rollouts")
               or m["verified"].startswith("not rolled out"))

    # Changed after the run: a resume against it is refused, the output untouched.
    before = out.read_bytes()
    write_jsonl(judged_path, judged[:-1])
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "must use the judged file it started with" in refused.stderr
    assert out.read_bytes() == before

    write_jsonl(judged_path, judged)
    summary = run_consensus(str(out), str(judged_path), str(tmp_path / "consensus.jsonl"), quiet=True)
    kept = {r["id"] for r in read(tmp_path / "consensus.jsonl")}
    assert kept == {rid for rid, m in mc.items() if m["verified"] in KEPT}
    assert summary.not_rolled_out == 8  # 7 unparsed (i % 5 == 4 below 39), p39 not judged
