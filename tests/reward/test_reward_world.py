"""The reward round trip end to end on a real PRM: a world PRM that `train` wrote, in vLLM's pooling
runner behind `prm-annotate reward-server` (a child process on 127.0.0.1). OpenRLHF's request for
256 world responses (through OpenRLHF's own client when installed, else its documented payload)
returns 256 rewards equal to `score`'s aggregate of the same responses (min, product, last), and
verl's `compute_score` on one response equals it too. Engines run one at a time: `score` first,
then the server. Behind `--base-url` (the PRM in a real `vllm serve --runner pooling` on
127.0.0.1), the reward server's rewards and verl's `compute_score(base_url=...)` equal `score
--base-url` on the same server."""
from __future__ import annotations

import math
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

import prm_annotate.reward.verl as verl_module
from testing import rl_clients
from testing.jsonl_files import group_alive, read_jsonl, write_jsonl
from testing.prm_fixtures import prm_server, world_responses

CLI = [sys.executable, "-m", "prm_annotate"]
AGGREGATES = {"min": min, "product": math.prod, "last": lambda s: s[-1]}


def start_server(prm: Path, log: list[str], *engine: str) -> tuple[subprocess.Popen, str]:
    """`prm-annotate reward-server` on a free port; `engine`: its engine options (default: in process)."""
    engine = engine or ("--dtype", "float32", "--start-timeout", "300")
    proc = subprocess.Popen([*CLI, "reward-server", "--model", str(prm), *engine, "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            start_new_session=True, env={**os.environ, "PRM_REWARD_KEY": ""})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            assert proc.poll() is None, "".join(log)[-3000:]
            continue
        log.append(line)
        found = re.search(r" on (http://127\.0\.0\.1:\d+)", line)
        if found:
            return proc, found.group(1)
    proc.kill()
    raise AssertionError("the reward server did not come up: " + "".join(log)[-3000:])


@pytest.mark.engine
def test_reward_round_trip_equals_score(world_prm, world_prm_scored, tmp_path, heavy):
    heavy.release()  # one engine at a time: the reward server runs in a child process
    # `score` in process over the same 256 responses in one batch of 256: conftest's `world_prm_scored`.
    items = world_prm_scored.responses
    assert len(items) == 256
    scored = {r["id"]: r["prm"]["scores"] for r in world_prm_scored.records}
    step_scores = [scored[r["id"]] for r in items]
    assert len({round(min(s), 4) for s in step_scores}) > 5  # not a constant head

    log: list[str] = []
    proc, url = start_server(world_prm, log)
    try:
        prompts = [r["problem"] for r in items]
        queries = [r["problem"] + "\n\n".join(r["steps"]) + "<|im_end|>" for r in items]
        labels = [r["answer"] for r in items]
        started = time.monotonic()
        if rl_clients.openrlhf_client() is not None:
            (answer,) = rl_clients.openrlhf_rewards(url + "/get_reward", queries, prompts, labels)
            client = f"OpenRLHF {rl_clients.openrlhf_client()[1]}'s client"
        else:  # OpenRLHF's documented request (0.11.2, agent.py), sent as it sends it
            answer = httpx.post(url + "/get_reward", json={"query": queries, "prompts": prompts, "labels": labels},
                                timeout=180).json()
            client = "OpenRLHF's documented request"
        seconds = time.monotonic() - started
        assert len(answer["rewards"]) == 256 and answer["errors"] == [None] * 256, client
        assert answer["step_rewards"] == step_scores, client
        assert answer["rewards"] == [min(s) for s in step_scores], client
        for name in ("product", "last"):
            got = httpx.post(url + "/get_reward", json={"query": queries, "prompts": prompts, "labels": labels,
                                                        "aggregate": name}, timeout=180).json()
            assert got["rewards"] == [AGGREGATES[name](s) for s in step_scores], name
        print(f"256 rewards in one round trip ({client}): {seconds:.2f} s")

        found = rl_clients.verl_loader()
        fn = verl_module.compute_score if found is None else found[0](
            module_path=verl_module.__file__, object_name="compute_score")
        r = items[3]
        result = fn(data_source="world", solution_str="\n\n".join(r["steps"]), ground_truth=r["answer"],
                    extra_info={"question": r["problem"]}, url=url)
        assert result["score"] == min(step_scores[3]) and result["step_rewards"] == step_scores[3]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    assert code == 0, "".join(log)[-3000:]
    assert group_alive(proc.pid) == []


@pytest.mark.engine
@pytest.mark.slot("server:prm-step")
def test_rewards_from_a_served_prm_equal_served_score(world_prm, tmp_path, tmp_path_factory, heavy):
    from transformers import AutoTokenizer

    tag_id = AutoTokenizer.from_pretrained(world_prm).convert_tokens_to_ids("<extra_0>")
    server = prm_server(heavy, world_prm, tmp_path_factory.getbasetemp(), "step", {"step_tag_id": tag_id})
    items = world_responses(16, seed=11, split="test")
    src = write_jsonl(tmp_path / "responses.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in items])
    out = tmp_path / "scored.jsonl"
    run = subprocess.run([*CLI, "score", str(src), "-o", str(out), "--model", str(world_prm),
                          "--base-url", server.base_url, "--quiet"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    scored = {r["id"]: r["prm"]["scores"] for r in read_jsonl(out)}
    step_scores = [scored[r["id"]] for r in items]
    assert len({round(min(s), 4) for s in step_scores}) > 3  # not a constant head

    log: list[str] = []
    proc, url = start_server(world_prm, log, "--base-url", server.base_url)
    try:
        prompts = [r["problem"] for r in items]
        queries = [r["problem"] + "\n\n".join(r["steps"]) + "<|im_end|>" for r in items]
        answer = httpx.post(url + "/get_reward", json={"query": queries, "prompts": prompts,
                                                       "labels": [r["answer"] for r in items]}, timeout=300).json()
        assert answer["errors"] == [None] * len(items), answer["errors"]
        assert answer["step_rewards"] == step_scores
        assert answer["rewards"] == [min(s) for s in step_scores]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    assert code == 0, "".join(log)[-3000:]
    assert group_alive(proc.pid) == []

    r = items[3]  # verl's reward function, scoring in this process through the same server
    result = verl_module.compute_score(data_source="world", solution_str="\n\n".join(r["steps"]),
                                       ground_truth=r["answer"], extra_info={"question": r["problem"]},
                                       model=str(world_prm), base_url=server.base_url)
    assert result["score"] == min(step_scores[3]) and result["step_rewards"] == step_scores[3]
