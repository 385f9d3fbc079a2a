"""The cascade end to end on real vLLM, two engines one after the other: the world judge in process
as a noisy first judge (sampled at T=1, its verdicts' log-probabilities kept), then `judge
--escalate-from --budget 50%` as a real command with its own engine (the world judge, greedy) on the
least sure half; its records, manifest and bill rows."""
from __future__ import annotations

import random
import subprocess
import sys

import orjson
import pytest

from lab.world.corrupt import corrupt_solution
from prm_annotate.judging.cascade import threshold_for_budget, VerdictProbability
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.reports.stats import stage_bills
from prm_annotate.stages.judge import JudgeStage
from prm_annotate.world import JUDGE_DIR, WORLD_JUDGE_PROMPT, make_problems
from prm_annotate.world.problems import World, solution_steps
from testing.heavy import ENGINE_START_TIMEOUT, TINY_MAX_MODEL_LEN
from testing.jsonl_files import read_jsonl, write_jsonl


def world_responses(n: int = 8) -> list[dict]:
    """A reference solution and a corrupted copy (one injected mistake) of each of n world problems."""
    out = []
    for p in make_problems(n, seed=3, split="cascade"):
        world = World.from_json(p["world"])
        for k, steps in enumerate((solution_steps(world), corrupt_solution(world, random.Random(p["id"])))):
            out.append({"id": f"{p['id']}/{k}", "problem": p["problem"], "answer": p["answer"], "steps": steps})
    return out


@pytest.mark.engine
def test_a_cascade_on_two_real_engines(world_judge, heavy, tmp_path):
    src = write_jsonl(tmp_path / "responses.jsonl", world_responses())
    first_path = tmp_path / "first.jsonl"
    first_stage = JudgeStage(world_judge, prompt=WORLD_JUDGE_PROMPT, verdict_logprobs=True, temperature=1.0,
                             max_tokens=256, seed=1)
    assert run_stage(first_stage, RunOptions(str(src), str(first_path), quiet=True)).failed == 0
    first = {r["id"]: r["judge"] for r in read_jsonl(first_path)}
    logprobs = [lp for j in first.values() for lp in j["verdict_logprobs"] if lp is not None]
    assert len(logprobs) >= len(first) // 2 and all(lp <= 0 for lp in logprobs)
    heavy.release()  # one engine at a time: the second judge is a command with its own

    out = tmp_path / "cascaded.jsonl"
    cmd = [sys.executable, "-m", "prm_annotate", "judge", str(src), "-o", str(out), "--model", str(JUDGE_DIR),
           "--prompt", WORLD_JUDGE_PROMPT, "--max-tokens", "256", "--max-model-len", str(TINY_MAX_MODEL_LEN),
           "--start-timeout", str(int(ENGINE_START_TIMEOUT)), "--escalate-from", str(first_path), "--budget", "50%"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=ENGINE_START_TIMEOUT + 300)
    assert done.returncode == 0, done.stderr[-3000:]
    cascaded = {r["id"]: r["judge"] for r in read_jsonl(out)}
    assert cascaded.keys() == first.keys()
    threshold = threshold_for_budget([VerdictProbability.of(j) if j["first_error"] is not None else None
                                      for j in first.values()], 0.5)
    second = [rid for rid, j in cascaded.items() if j["cascade"]["decided_by"] == "second"]
    assert 0 < len(second) <= len(first) // 2
    for rid, j in cascaded.items():
        c = j["cascade"]
        assert c["threshold"] == threshold and c["kind"] == "verdict-prob"
        if c["decided_by"] == "first":  # the first judge's block, as it wrote it
            assert {k: v for k, v in j.items() if k != "cascade"} == first[rid] and c["confidence"] >= threshold
        else:  # the big judge's verdict, greedy, the first judge's block kept beside it
            assert j["temperature"] == 0.0 and c["first"] == first[rid]
            assert c["confidence"] is None or c["confidence"] < threshold
    manifest = orjson.loads(out.with_name("cascaded.manifest.json").read_bytes())["runs"][-1]
    assert manifest["settings"]["cascade"]["escalated"] == len(second) and manifest["settings"]["cascade"]["budget"] == 0.5
    rows = {r["stage"]: r for r in stage_bills([str(out)], {"judge": 72 * 10**9})["stages"]}
    assert rows["judge"]["requests"] == len(second) and rows["judge"]["params"] == 72 * 10**9
    assert rows["first-judge"]["requests"] == len(first) and rows["first-judge"]["decode_tokens"] == sum(
        j["bill"]["generated_tokens"] for j in first.values())
