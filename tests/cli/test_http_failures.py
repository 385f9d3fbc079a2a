"""Over HTTP every failure names its cause and the fix, and a served thought is billed as thought
(issue 61), against a real `vllm serve` of the world's models on 127.0.0.1.

A wrong `--model`, a wrong port, a server SIGKILLed mid-run and a prompt the judge does not answer
each end with a message naming the cause and the fix (exit 2; exit 0 with the prompt named for the
unparsed one), leave nothing written but what is true, and a rerun with the fix gives the output
of a clean run, byte for byte. One judge server serves the module (started twice: the kill ends
the first), on one port, so the rerun after the kill is the same command.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from prm_annotate.engines.bill import Bill
from prm_annotate.pipeline.runner import RunOptions, run_and_close
from prm_annotate.stages.judge import JudgeStage
from prm_annotate.stages.sample import SampleStage
from prm_annotate.world import JUDGE_DIR, THINKER_DIR, WORLD_SYSTEM_PROMPT, make_problems
from prm_annotate.world.problems import World, solution_steps
from testing.heavy import TINY_MAX_MODEL_LEN, start_server
from testing.jsonl_files import line_count, write_jsonl
from testing.summary_lines import last_sentence
from testing.vllm_server import free_port

pytestmark = pytest.mark.engine

CLI = [sys.executable, "-m", "prm_annotate"]
SERVED = "world-judge"
PORT = free_port()  # the module's judge server, before and after the kill
N = 60  # responses: enough that the kill lands mid-run (after 5 of them)


def responses(n: int) -> list[dict]:
    """World problems with their right solutions (the judge's input; its verdicts are what they are)."""
    return [{"id": f"{p['id']}/0", "problem": p["problem"], "answer": p["answer"], "correct": True,
             "steps": solution_steps(World.from_json(p["world"]))} for p in make_problems(n, seed=11, split="http")]


@pytest.fixture
def judge_server(heavy, tmp_path_factory):
    logs = tmp_path_factory.getbasetemp()
    return heavy.get("server:http-world-judge", lambda: start_server(
        JUDGE_DIR, SERVED, logs, port=PORT, max_model_len=TINY_MAX_MODEL_LEN), lambda s: s.stop())


def judge(src, out, *, url: str = f"http://127.0.0.1:{PORT}/v1", model: str = SERVED, prompt: str = "processbench",
          extra: tuple[str, ...] = ()) -> list[str]:
    return [*CLI, "judge", str(src), "-o", str(out), "--model", model, "--base-url", url, "--prompt", prompt,
            "--max-tokens", "128", "--seed", "0", "--max-attempts", "2", "--quiet", *extra]


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def manifest_runs(out) -> list[dict]:
    return json.loads(out.with_name(out.stem + ".manifest.json").read_text())["runs"]


def nothing_written(out) -> bool:
    return not out.exists() and not out.with_name(out.stem + ".manifest.json").exists()


def test_a_server_killed_mid_run_stops_it_with_exit_2_and_the_same_command_resumes(judge_server, heavy, tmp_path):
    src = write_jsonl(tmp_path / "responses.jsonl", responses(N))
    out = tmp_path / "judged.jsonl"
    cmd = judge(src, out, extra=("--concurrency", "1", "--batch-size", "1"))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while line_count(out) < 5 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, f"finished before the kill: {proc.stderr.read()[-2000:]}"
    os.killpg(judge_server.proc.pid, signal.SIGKILL)  # the server and its EngineCore, at once
    _, err = proc.communicate(timeout=300)
    heavy.release()
    assert proc.returncode == 2, err[-3000:]
    assert f"the server at http://127.0.0.1:{PORT}/v1 stopped answering" in err and "is the server up" in err
    assert "rerun the same command" in err and "--reasoning" not in err
    kept = out.read_text().splitlines()
    [stopped] = manifest_runs(out)
    assert 5 <= len(kept) < N and stopped["counts"]["written"] == len(kept) and stopped["counts"]["failed"] == 0
    [why] = [k for k in stopped["stats"] if k.startswith("stopped: ")]
    assert why.startswith(f"stopped: the server at http://127.0.0.1:{PORT}/v1 stopped answering"), why

    heavy.get("server:http-world-judge", lambda: start_server(JUDGE_DIR, SERVED, tmp_path, port=PORT,
                                                              max_model_len=TINY_MAX_MODEL_LEN), lambda s: s.stop())
    rerun = run(cmd)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    clean = tmp_path / "clean.jsonl"
    assert run(judge(src, clean)).returncode == 0
    assert out.read_text().splitlines()[:len(kept)] == kept  # what the killed run wrote is kept as written
    assert out.read_bytes() == clean.read_bytes()


def test_a_wrong_model_name_or_port_stops_before_anything_is_written_and_the_fix_completes(judge_server, tmp_path):
    src = write_jsonl(tmp_path / "responses.jsonl", responses(N)[:4])
    clean = tmp_path / "clean.jsonl"
    assert run(judge(src, clean)).returncode == 0

    out = tmp_path / "named.jsonl"
    for cmd in (judge(src, out, model="judge"), judge(src, out, model="judge", extra=("--reasoning", "off")),
                [*CLI, "sample", str(src), "-o", str(out), "--model", "thinker", "--base-url", judge_server.base_url]):
        wrong = run(cmd)
        assert wrong.returncode == 2, wrong.stderr[-2000:]
        said = wrong.stderr.strip().splitlines()[-1]
        assert f"serves '{SERVED}', not " in said and f"--model {SERVED}" in said, said
        assert "--served-model-name" in said and "--reasoning" not in wrong.stderr, wrong.stderr
        assert nothing_written(out)
    assert run(judge(src, out)).returncode == 0 and out.read_bytes() == clean.read_bytes()

    out = tmp_path / "port.jsonl"
    url = f"http://127.0.0.1:{free_port()}/v1"
    wrong = run(judge(src, out, url=url))
    assert wrong.returncode == 2, wrong.stderr[-2000:]
    said = wrong.stderr.strip().splitlines()[-1]
    assert f"cannot reach the server at {url} (ConnectError" in said and "is the server up at this address?" in said
    assert "--reasoning" not in wrong.stderr and "context" not in wrong.stderr and nothing_written(out)
    assert run(judge(src, out)).returncode == 0 and out.read_bytes() == clean.read_bytes()


def test_a_prompt_the_judge_does_not_answer_names_the_prompt_and_the_choices(judge_server, tmp_path):
    src = write_jsonl(tmp_path / "responses.jsonl", responses(N)[:4])
    out = tmp_path / "paper.jsonl"
    unread = run(judge(src, out, prompt="paper"))  # the world judge answers ProcessBench's \boxed{index}
    assert unread.returncode == 0, unread.stderr[-2000:]
    err = unread.stderr
    assert "judge: 4 of 4 verdicts could not be parsed" in err
    assert "judge: not parsed: 4 no <conclusion>" in err and "…" not in err  # the reason whole
    advice = next(line for line in err.splitlines() if line.startswith("judge: no verdict was read"))
    assert "the paper prompt's answer" in advice and "--protocol strict" in advice
    assert "processbench (\\boxed{index} from 0)" in advice and "--prompt paper (" in advice
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["judge"]["first_error"] for r in records] == [None] * 4  # recorded unparsed, never guessed
    assert all(r["judge"]["parse_errors"] == ["no <conclusion>"] for r in records)
    [entry] = manifest_runs(out)
    assert entry["settings"]["prompt"] == "paper" and entry["settings"]["reasoning"] is None

    fixed = tmp_path / "fixed.jsonl"  # the fix the advice names: the prompt the judge answers
    rerun = run(judge(src, fixed))
    assert rerun.returncode == 0 and "no verdict was read" not in rerun.stderr and "not parsed" not in rerun.stderr
    assert all(json.loads(line)["judge"]["first_error"] is not None for line in fixed.read_text().splitlines())


def test_a_served_thought_is_billed_as_the_in_process_engine_bills_it(world_thinker, heavy, tmp_path):
    """The thinker served without a reasoning parser (its tokenizer has no <think> token) returns the
    thought inside the content; `--reasoning auto` splits it on the client, and the bill counts its
    tokens as thought, equal to the in-process bill of the same seeded requests."""
    problems = [{"id": p["id"], "problem": p["problem"], "answer": p["answer"]}
                for p in make_problems(3, seed=0, split="test")]
    src = write_jsonl(tmp_path / "problems.jsonl", problems)
    settings = dict(n=2, temperature=0.7, max_tokens=384, seed=0, system_prompt=WORLD_SYSTEM_PROMPT)
    local = tmp_path / "local.jsonl"
    stage = SampleStage(world_thinker, **settings, engine_info={"model": "world-thinker"})
    assert run_and_close(stage, RunOptions(str(src), str(local), quiet=True)).failed == 0
    local_bill = Bill.read(manifest_runs(local)[-1]["bill"])
    # The judge splits a thought too (`--reasoning think`): the thinker reads its own traces.
    judge_settings = dict(prompt="processbench", reasoning="think", max_tokens=96, seed=0)
    local_judged = tmp_path / "local-judged.jsonl"
    stage = JudgeStage(world_thinker, **judge_settings, engine_info={"model": "world-thinker"})
    assert run_and_close(stage, RunOptions(str(local), str(local_judged), quiet=True)).failed == 0

    server = heavy.get("server:http-world-thinker", lambda: start_server(
        THINKER_DIR, "world-thinker", tmp_path, max_model_len=TINY_MAX_MODEL_LEN), lambda s: s.stop())
    served = tmp_path / "served.jsonl"
    done = run([*CLI, "sample", str(src), "-o", str(served), "--model", "world-thinker", "--base-url", server.base_url,
                "-n", "2", "--temperature", "0.7", "--max-tokens", "384", "--seed", "0",
                "--system-prompt", WORLD_SYSTEM_PROMPT])
    assert done.returncode == 0, done.stderr[-3000:]

    def bills(path) -> list[tuple]:
        return [(r["id"], r["generator"]["bill"], r["generator"]["thought_tokens"], r["generator"]["answer_tokens"])
                for r in map(json.loads, path.read_text().splitlines())]

    assert bills(served) == bills(local)
    assert all(thought > 0 for _, _, thought, _ in bills(served))
    entry = manifest_runs(served)[-1]
    assert entry["settings"]["reasoning"] == "think" and entry["settings"]["thought_state"] == "open"
    served_bill = Bill.read(entry["bill"])
    assert (served_bill.thought_tokens, served_bill.decode_tokens) == (local_bill.thought_tokens, local_bill.decode_tokens)
    assert served_bill.thought_tokens == sum(thought for _, _, thought, _ in bills(served)) > 0
    assert f"({served_bill.thought_tokens:,} of thought)" in last_sentence(done.stderr, "sample")
    assert Counter(k.split(":")[0] for k in entry["stats"] if k.startswith("reasoning auto")) == {"reasoning auto": 1}

    served_judged = tmp_path / "served-judged.jsonl"
    judged = run([*CLI, "judge", str(local), "-o", str(served_judged), "--model", "world-thinker", "--base-url",
                  server.base_url, "--prompt", "processbench", "--reasoning", "think", "--max-tokens", "96", "--seed", "0"])
    assert judged.returncode == 0, judged.stderr[-3000:]

    def judge_bills(path) -> list[tuple]:
        return [(r["id"], r["judge"]["bill"], r["judge"]["reasoning_tokens"], r["judge"]["answer_tokens"])
                for r in map(json.loads, path.read_text().splitlines())]

    assert judge_bills(served_judged) == judge_bills(local_judged)
    assert all(thought for _, _, thought, _ in judge_bills(served_judged))
    assert (Bill.read(manifest_runs(served_judged)[-1]["bill"]).thought_tokens
            == Bill.read(manifest_runs(local_judged)[-1]["bill"]).thought_tokens > 0)
