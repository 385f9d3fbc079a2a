"""Long inputs over HTTP, as a user runs them: `judge --base-url` against a real `vllm serve` whose
context (2,048 tokens) the client learns from the server's /v1/models and whose prompts it counts
with the server's /tokenize. A real long trace is refused before any request (sent, the server
answers HTTP 400), a trace cut to fit gets a clamped budget, recorded (the server would cut it to
the same without a word), the others finish, and the command ends with exit status 1 saying the
refusal is permanent.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from testing.paragraph_steps import split_steps

from prm_annotate.engines.base import GenerationRequest
from prm_annotate.engines.context import MIN_ROOM, Context
from prm_annotate.engines.openai_engine import OpenAIEngine
from prm_annotate.engines.sampling import Sampling
from prm_annotate.records import Response
from prm_annotate.stages.common import chat
from prm_annotate.stages.judge import JudgeStage

from testing.heavy import TINY_SERVED_NAME
from testing.jsonl_files import read_jsonl, write_jsonl

CLI = [sys.executable, "-m", "prm_annotate"]
TRACES = Path(__file__).parents[1] / "data" / "long_traces.jsonl"
MAX_TOKENS = 256


def tokens(tokenizer, request: GenerationRequest) -> int:
    ids = tokenizer.apply_chat_template([dict(m) for m in request.messages], tokenize=True,
                                        add_generation_prompt=not request.continue_final,
                                        continue_final_message=request.continue_final)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


def chat_posts(log: Path) -> int:
    """Chat requests the server answered, by its access log."""
    return log.read_text(errors="replace").count("POST /v1/chat/completions")


@pytest.mark.engine
def test_judge_over_http_refuses_a_long_trace_before_any_request_and_clamps_a_tight_one(vllm_server, tiny_tokenizer,
                                                                                       tmp_path):
    # The engine learns the context from the server and counts exactly as the server does: the
    # server's own usage of a real request is the baseline.
    engine = OpenAIEngine(vllm_server.base_url, TINY_SERVED_NAME, timeout=120, max_attempts=1)
    try:
        assert engine.context() == Context(2048, source="server", counter="server")
        trace = [orjson.loads(line) for line in TRACES.read_bytes().splitlines()][2]
        paragraphs = split_steps(trace["response"])
        partial = GenerationRequest(key="p", messages=chat("Reason step by step.", trace["problem"],
                                                           "\n\n".join(paragraphs[:5])),
                                    continue_final=True, sampling=Sampling(max_tokens=1, seed=0))
        assert engine.prompt_tokens(partial) == engine.generate([partial])["p"].prompt_tokens
        given = OpenAIEngine(vllm_server.base_url, TINY_SERVED_NAME, max_model_len=1000)
        assert given.context() == Context(1000, source="option", counter="server")

        stage = JudgeStage(None, prompt="processbench", max_tokens=MAX_TOKENS, engine_info={"model": "tiny"})
        for n in range(len(paragraphs), 1, -1):
            tight = {"id": "tight", "problem": trace["problem"], "steps": paragraphs[:n]}
            request = stage._request(Response.model_validate(tight), 0)
            if tokens(tiny_tokenizer, request) <= 2048 - MIN_ROOM:
                break
        prompt = tokens(tiny_tokenizer, request)
        assert 2048 - MAX_TOKENS < prompt <= 2048 - MIN_ROOM
        # The baselines: the whole trace, sent, is refused by the server (HTTP 400: what a run met
        # after paying for the records before it); the tight prompt with its budget as asked is cut
        # by vLLM's server to the same budget as ours, without a word.
        long = {"id": "long", "problem": trace["problem"], "steps": paragraphs}
        long_request = stage._request(Response.model_validate(long), 0)
        refused = engine.generate([long_request])[long_request.key]
        assert not refused.ok and "HTTP 400" in refused.error and "maximum context length" in refused.error
        unclamped = engine.generate([request])[request.key]
        assert unclamped.ok and unclamped.prompt_tokens == prompt and unclamped.generated_tokens <= 2048 - prompt
    finally:
        engine.close()

    short = [{"id": f"short-{i}", "problem": f"Ann has {i} pens and buys 2 more. How many pens?",
              "steps": [f"Ann has {i} pens.", f"{i} + 2 = {i + 2}.", f"\\boxed{{{i + 2}}}"]} for i in range(2)]
    src = write_jsonl(tmp_path / "responses.jsonl", [short[0], long, tight, short[1]])
    out = tmp_path / "judged.jsonl"
    before = chat_posts(vllm_server.log_path)
    run = subprocess.run([*CLI, "judge", str(src), "-o", str(out), "--model", TINY_SERVED_NAME, "--base-url",
                          vllm_server.base_url, "--prompt", "processbench", "--max-tokens", str(MAX_TOKENS), "--quiet",
                          "--reasoning", "off"],  # no first vote asked alone before the batch: one post a record
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "judge: 4 responses read: 3 judged" in run.stderr
    assert "1 set aside (1 refused for good: too long for the context)" in run.stderr
    assert "refused long: the judge's prompt has" in run.stderr and "context is 2048 (server)" in run.stderr
    assert "1 refused for good" in run.stderr and "retry" not in run.stderr
    assert chat_posts(vllm_server.log_path) - before == 3  # one vote each for the three that fit; none for long

    judged = {r["id"]: r["judge"] for r in read_jsonl(out)}
    assert list(judged) == ["short-0", "tight", "short-1"]
    assert judged["tight"]["prompt_tokens"] == prompt  # the server's count of what it ran
    assert judged["tight"]["max_tokens_clamped"] == 2048 - prompt
    assert judged["tight"]["generated_tokens"] <= 2048 - prompt
    manifest = orjson.loads(out.with_name("judged.manifest.json").read_bytes())["runs"][-1]
    assert manifest["settings"]["context"] == {"max_model_len": 2048, "source": "server", "counter": "server"}
    assert manifest["counts"]["failed_permanent"] == 1 and manifest["permanent_failures"] == ["long"]
