"""The four pipeline commands as real processes.

- rollout stopped with SIGTERM (it ends its vLLM engine itself, exit 143), rerun and killed with
  SIGKILL mid-run (whole process group, so vLLM's EngineCore dies too), and rerun gives exactly the
  output of an uninterrupted run of the same command;
- `sample | rollout` through a real shell pipe, then judge and consensus on the results, all
  against one vLLM server (two in-process engines starting at once on 2 cores starve each other).
Each engine start costs ~15 s, so the checks are combined into few processes.
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

import orjson
import pytest

from prm_annotate.engines import on_cpu
from prm_annotate.records import Consensus, Judged, Rollout
from testing.heavy import ENGINE_START_TIMEOUT
from testing.jsonl_files import sigkill_after_lines, sigterm_after_lines, write_jsonl
from testing.jsonl_files import read_jsonl as read
from testing.summary_lines import check_sentence, last_sentence

CLI = [sys.executable, "-m", "prm_annotate"]
TIMEOUT = ENGINE_START_TIMEOUT


def responses(n: int) -> list[dict]:
    return [{"id": f"p{i}/0", "problem_id": f"p{i}", "problem": f"Tom has {i} apples. Then gets 2 more. How many?",
             "answer": str(i + 2), "steps": [f"Tom has {i} apples.", f"Then {i} + 2 = {i + 2}.", f"So \\boxed{{{i + 2}}}."],
             "correct": True} for i in range(n)]


N = 32  # responses: a SIGTERM after 3 records, a SIGKILL 3 records later, then the rest (enough left that
# a burst of records finishing together cannot reach the end between the count and the kill)
ROLLOUT_ARGS = ["-k", "3", "--max-tokens", "40", "--seed", "3", "--batch-size", "1", "--quiet"]


@pytest.mark.engine
def test_rollout_stopped_then_killed_mid_run_and_rerun_equals_an_uninterrupted_run(tiny_model_dir, tmp_path):
    """SIGTERM (`timeout`, SLURM) stops rollout with its in-process vLLM engine cleanly: its finished
    records kept, the run recorded, EngineCore and its workers ended, exit 143. The rerun, SIGKILLed
    mid-run (the whole process group), and a last rerun give exactly an uninterrupted run's records."""
    # The last line, a record without steps, is set aside by --skip-invalid in every run.
    src = write_jsonl(tmp_path / "responses.jsonl", [*responses(N), {"id": "no-steps"}])
    out = tmp_path / "rollouts.jsonl"
    cmd = [*CLI, "rollout", str(src), "-o", str(out), "--model", str(tiny_model_dir), "--max-model-len", "2048",
           "--start-timeout", str(int(TIMEOUT)), "--skip-invalid", *ROLLOUT_ARGS]
    code, err = sigterm_after_lines(cmd, out, 3, TIMEOUT)
    assert code == 143, err[-2000:]
    [first] = orjson.loads(out.with_name("rollouts.manifest.json").read_bytes())["runs"]
    assert first["interrupted"] == "SIGTERM" and first["counts"]["written"] >= 3
    stopped = read(out)
    assert len(stopped) >= 3 and [r["id"] for r in stopped] == [f"p{i}/0" for i in range(len(stopped))]

    partial = sigkill_after_lines(cmd, out, len(stopped) + 3, TIMEOUT)
    assert len(stopped) + 3 <= partial < N

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{partial} already done" in rerun.stderr
    resumed = read(out)
    assert [r["id"] for r in resumed] == [f"p{i}/0" for i in range(N)]
    manifest = orjson.loads(out.with_name("rollouts.manifest.json").read_bytes())
    settings = manifest["runs"][-1]["settings"]
    assert settings["k"] == 3 and settings["strategy"] == "exhaustive" and settings["system_prompt"] == "the responses' own"
    # responses not written by sample carry no prompt: the default one, by name and sha256
    assert list(settings["system_prompts_used"]) == ["qwen25-math-cot"]
    assert len(settings["system_prompts_used"]["qwen25-math-cot"]) == 64
    assert settings["dtype"] == ("float32" if on_cpu() else "auto")  # no --dtype given: the default, recorded
    assert manifest["runs"][-1]["stats"]["completions"] == (N - partial) * 2 * 3
    # The rerun's last line: N + 1 lines read = what it labelled + the invalid one + what the earlier runs did.
    said = check_sentence(last_sentence(rerun.stderr, "rollout"), manifest["runs"][-1])
    assert (said["read"], said["made"], said["set_aside"], said["already_done"]) == (N + 1, N - partial,
                                                                                     {"invalid": 1}, partial)

    # The uninterrupted reference: the same command into another file.
    reference = tmp_path / "reference.jsonl"
    ref_cmd = [str(reference) if part == str(out) else part for part in cmd]
    whole = subprocess.run(ref_cmd, capture_output=True, text=True, timeout=TIMEOUT + 300)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert resumed == read(reference)
    for row in resumed:
        Rollout.model_validate(row)
    # The summary counts the cut completions and the first errors resting on them, as the records do.
    said = re.search(r"rollout: ([\d,]+) completions, ([\d,]+) of them cut at --max-tokens \(counted graded\); "
                     rf"(\d+) of {N} responses have a first error, (\d+) of them at a step with cut completions",
                     whole.stderr)
    assert said, whole.stderr[-2000:]
    rows = [r["mc"] for r in resumed]
    assert int(said[2].replace(",", "")) == sum(mc["truncated"] for mc in rows) == sum(
        c or 0 for mc in rows for c in mc["cut"])
    assert int(said[3]) == sum(mc["first_error"] >= 0 for mc in rows)
    assert int(said[4]) == sum(mc["first_error"] >= 0 and bool(mc["cut"][mc["first_error"]]) for mc in rows)


@pytest.mark.engine
def test_sample_pipe_rollout_then_judge_and_consensus(vllm_server, tmp_path):
    problems = write_jsonl(tmp_path / "problems.jsonl", [
        {"id": f"q{i}", "problem": f"Ann has {i} pens and buys {i + 1} more. How many pens?", "answer": 2 * i + 1}
        for i in range(3)])
    server = ["--model", "tiny", "--base-url", vllm_server.base_url]
    rollouts, judged, agreed = tmp_path / "rollouts.jsonl", tmp_path / "judged.jsonl", tmp_path / "consensus.jsonl"
    # The random tiny model seldom writes a blank line: a space as step separator gives it many steps.
    # The random model's answers are cut with no <think> in them: over HTTP, --reasoning auto cannot tell
    # whether the server hides a thought in them and stops (tests/stages/test_thinking.py); this model
    # does not think.
    sample = shlex.join([*CLI, "sample", str(problems), "-n", "2", "--max-tokens", "24", "--step-sep", " ",
                         "--reasoning", "off", *server])
    rollout = shlex.join([*CLI, "rollout", "-", "-o", str(rollouts), "-k", "2", "--max-tokens", "16", "--step-sep", " ",
                          *server])
    piped = subprocess.run(["bash", "-c", f"set -o pipefail; {sample} | {rollout}"], capture_output=True, text=True,
                           timeout=600)
    assert piped.returncode == 0, piped.stderr[-3000:]
    rows = [Rollout.model_validate(r) for r in read(rollouts)]
    assert [r.id for r in rows] == [f"q{i}/{j}" for i in range(3) for j in range(2)]
    for r in rows:
        assert r.mc.completions == 2 * (len(r.steps) - 1) and r.mc.scores[-1] == (1.0 if r.correct else 0.0)
        assert r.model_dump()["generator"]["model"] == "tiny"
    assert sum(r.mc.completions for r in rows) > 0
    assert "sample: 3 problems read: 3 sampled into 6 responses" in piped.stderr
    assert "rollout: 6 responses read: 6 labelled" in piped.stderr

    # No --prompt: the paper's protocol (the random model's analyses are noise, so few parse).
    paper = tmp_path / "judged-paper.jsonl"
    judge = subprocess.run([*CLI, "judge", str(rollouts), "-o", str(paper), "--max-tokens", "48", "--reasoning", "off", *server],
                           capture_output=True, text=True, timeout=600)
    assert judge.returncode == 0, judge.stderr[-3000:]
    from prm_annotate.judging import load_judge_prompt

    sha = load_judge_prompt("paper").file.sha256
    assert all(r["judge"]["prompt"] == "paper" and r["judge"]["prompt_sha256"] == sha and r["judge"]["style"] == "paper"
               and r["judge"]["protocol"] == "strict" for r in read(paper))
    assert orjson.loads(paper.with_name("judged-paper.manifest.json").read_bytes())["runs"][-1]["settings"]["prompt"] == "paper"

    judge = subprocess.run([*CLI, "judge", str(rollouts), "-o", str(judged), "--prompt", "processbench", "--constrained",
                            "--max-tokens", "48", "--reasoning", "off", *server], capture_output=True, text=True, timeout=600)
    assert judge.returncode == 0, judge.stderr[-3000:]
    verdicts = [Judged.model_validate(r) for r in read(judged)]
    assert all(v.judge.first_error is not None and v.judge.parse_failures == 0 for v in verdicts)

    cons = subprocess.run([*CLI, "consensus", str(rollouts), str(judged), "-o", str(agreed)], capture_output=True,
                          text=True, timeout=120)
    assert cons.returncode == 0, cons.stderr
    kept = [Consensus.model_validate(r) for r in read(agreed)]
    same = [r.id for r, v in zip(rows, verdicts) if r.mc.first_error == v.judge.first_error]
    said = check_sentence(last_sentence(cons.stderr, "consensus"),
                          orjson.loads(agreed.with_suffix(".manifest.json").read_bytes())["runs"][-1])
    assert [k.id for k in kept] == same and (said["read"], said["made"]) == (6, len(same))
