"""`score --base-url`: a PRM trained by `train`, behind a real `vllm serve --runner pooling` on
127.0.0.1, gives the scores in-process `score` gives on the same responses (within 1e-3), and a
run killed with SIGKILL resumes on a rerun. A server without the step tag: vLLM's default pooler
(step pooling on token 151651, not this PRM's tag) stops the run with exit 2 and one line naming
the flag, before any record is written; per-token rows (`"pooling_type": "ALL"`) are read at the
tag positions here, and equal transformers' scores. What the client reads off a probe's rows, and
its HTTP machinery (retries, Retry-After, concurrency), are also checked without vLLM."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import orjson
import pytest

from prm_annotate.errors import UsageError
from prm_annotate.io.output import sidecar
from prm_annotate.prm.served import rows_kind
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.prm_fixtures import SCORED_WORLD_THRESHOLD, prm_server, vllm_vs_transformers, world_responses

CLI = [sys.executable, "-m", "prm_annotate"]
PROBE = [0, 609, 0, 609, 0]
ROOT = "http://127.0.0.1:1"


def test_a_probes_rows_say_how_the_server_pools():
    step, token = [[0.2, 0.8], [0.4, 0.6]], [[0.5, 0.5]] * 5
    assert rows_kind(step, PROBE, "<extra_0>", 609, ROOT) == "step"
    assert rows_kind(token, PROBE, "<extra_0>", 609, ROOT) == "token"
    cases = {"no score at the step tag": [],  # vLLM's default step tag is another token
             "returned_token_ids": [[0.8], [0.6]],
             "use_activation": [[-1.3, 2.0], [0.1, 0.9]],
             "3 rows": [[0.5, 0.5]] * 3}  # a server whose step tag is the probe's filler token
    for said, rows in cases.items():
        with pytest.raises(UsageError) as err:
            rows_kind(rows, PROBE, "<extra_0>", 609, ROOT)
        assert said in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UsageError, match=r"""--pooler-config '\{"step_tag_id": 609\}'"""):
        rows_kind([], PROBE, "<extra_0>", 609, ROOT)


def test_the_pooling_client_keeps_the_http_engines_retries_and_concurrency():
    """Any route of the server goes through the HTTP engine's retries (5xx, 429 with Retry-After),
    its bound on requests in flight and its refusal to retry a 4xx."""
    from prm_annotate.prm.served import Call, PoolingClient
    from testing.fault_server import FaultServer

    what = ["flaky:2", "429", "400", "slow", "slow", "slow", "slow", "slow"]
    with FaultServer() as server:
        client = PoolingClient(server.base_url, concurrency=3, max_attempts=3, backoff_initial=0.01)
        try:
            answers = client.generate([Call(str(i), "POST", "/v1/chat/completions",
                                            {"messages": [{"role": "user", "content": w}]})
                                       for i, w in enumerate(what)])
        finally:
            client.close()
    assert answers["0"].error is None and server.attempts["flaky:2"] == 3
    assert "failed after 3 attempt(s): HTTP 429" in answers["1"].error
    assert "failed after 1 attempt(s): HTTP 400" in answers["2"].error
    assert all(answers[str(i)].data["choices"] for i in range(3, 8))
    assert server.max_inflight <= 3


@pytest.fixture(scope="module")
def tag_id(world_prm):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(world_prm).convert_tokens_to_ids("<extra_0>")


def score_cmd(src, out, prm, server, *extra):
    return [*CLI, "score", str(src), "-o", str(out), "--model", str(prm), "--base-url", server.base_url, "--quiet",
            *extra]


def lines(path):
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.engine
@pytest.mark.slot("server:prm-step")
def test_served_scores_equal_in_process_and_a_killed_run_resumes(world_prm, world_prm_scored, tag_id, tmp_path,
                                                                  tmp_path_factory, heavy):
    # In process: conftest's `world_prm_scored` (its first 200 responses are these, at its threshold).
    responses = world_responses(100, seed=7, split="test")
    local = {r["id"]: r for r in world_prm_scored.records[:len(responses)]}
    assert list(local) == [r["id"] for r in responses]
    threshold = ["--threshold", str(SCORED_WORLD_THRESHOLD)]
    server = prm_server(heavy, world_prm, tmp_path_factory.getbasetemp(), "step", {"step_tag_id": tag_id})
    src = write_jsonl(tmp_path / "responses.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in responses])
    out = tmp_path / "served.jsonl"

    # One response at a time, so the kill lands mid-run.
    proc = subprocess.Popen(score_cmd(src, out, world_prm, server, "--batch-size", "1", "--concurrency", "1", *threshold),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while lines(out) < 5 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    done = lines(out)
    assert 5 <= done < len(responses), (done, proc.stderr.read().decode()[-2000:])

    rerun = subprocess.run(score_cmd(src, out, world_prm, server, "--batch-size", "32", "--concurrency", "8", *threshold),
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{len(responses) - done} scored" in rerun.stderr and f"{done} already done" in rerun.stderr

    scored = read_jsonl(out)
    assert [r["id"] for r in scored] == [r["id"] for r in responses]
    worst = 0.0
    for rec in scored:
        ours, theirs = rec["prm"]["scores"], local[rec["id"]]["prm"]["scores"]
        assert len(ours) == len(theirs) == len(rec["steps"])
        worst = max(worst, *(abs(a - b) for a, b in zip(ours, theirs)))
        assert rec["prm"]["first_error"] == local[rec["id"]]["prm"]["first_error"]
        assert rec["prm"]["scorer"] == "qwen-prm-served"
        assert rec["prm"]["server"] == {"base_url": server.base_url, "model": "tiny-prm-step", "rows": "step",
                                        "step_tag_id": tag_id}
    assert worst < 1e-3, worst
    assert len({round(s, 4) for rec in scored for s in rec["prm"]["scores"]}) > 5  # not a constant head

    settings = orjson.loads(sidecar(str(out), "manifest.json").read_bytes())["runs"][-1]["settings"]
    assert settings["scorer"] == "qwen-prm-served" and settings["step_tag_id"] == tag_id
    assert settings["server"]["rows"] == "step" and settings["server"]["root"] == str(world_prm)
    assert settings["server"]["tag_tokens"] == [tag_id] and settings["server"]["vllm_version"]


@pytest.mark.engine
@pytest.mark.parametrize("pooling", ["default", "all"])
def test_a_server_without_the_step_tag(pooling, world_prm, tag_id, tmp_path, tmp_path_factory, heavy):
    config = {"default": None, "all": {"pooling_type": "ALL"}}[pooling]
    server = prm_server(heavy, world_prm, tmp_path_factory.getbasetemp(), pooling, config)
    responses = world_responses(5, seed=7, split="test")
    src = write_jsonl(tmp_path / "responses.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in responses])
    out = tmp_path / "served.jsonl"
    run = subprocess.run(score_cmd(src, out, world_prm, server), capture_output=True, text=True, timeout=300)
    if pooling == "default":
        assert run.returncode == 2, run.stderr[-3000:]
        (line,) = run.stderr.strip().splitlines()
        assert line.startswith("prm-annotate: error:") and "151651" in line
        assert f"""--pooler-config '{{"step_tag_id": {tag_id}}}'""" in line
        assert lines(out) == 0  # no record, right or wrong
        return
    assert run.returncode == 0, run.stderr[-3000:]
    scored = read_jsonl(out)
    assert len(scored) == len(responses) and all(r["prm"]["server"]["rows"] == "token" for r in scored)
    worst, _ = vllm_vs_transformers(world_prm, scored)  # one score per step, each transformers' own
    assert worst < 1e-3, worst
