"""What fits in a model's context (engines/context.py): the budget kept, clamped or refused, and the
estimate used over HTTP without /tokenize, checked to be an upper bound on real long traces."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from prm_annotate.engines.base import GenerationRequest
from prm_annotate.engines.context import ESTIMATE, MIN_ROOM, Context, estimate_tokens, fit
from prm_annotate.engines.vllm_engine import render_prompt
from prm_annotate.stages.common import chat

TRACES = Path(__file__).parents[1] / "data" / "long_traces.jsonl"
CONTEXT = Context(4096, source="engine", counter="engine")


@pytest.mark.parametrize("prompt,asked,budget", [
    (1000, 2048, 2048),  # fits: unchanged
    (4096 - 2048, 2048, 2048),  # exactly fits
    (3000, 2048, 1096),  # clamped to what is left
    (4096 - MIN_ROOM, 2048, MIN_ROOM),  # the least room still taken
    (4080, 16, 16),  # a budget smaller than MIN_ROOM that fits whole
])
def test_a_budget_that_fits_is_kept_and_one_that_does_not_is_clamped(prompt, asked, budget):
    got = fit(prompt, asked, CONTEXT)
    assert got.refused is None and got.max_tokens == budget and got.clamped == (budget < asked)


@pytest.mark.parametrize("prompt,asked", [(4096 - MIN_ROOM + 1, 2048), (4096, 2048), (6931, 2048), (4085, 16)])
def test_a_prompt_that_leaves_no_useful_room_is_refused_as_permanent(prompt, asked):
    got = fit(prompt, asked, CONTEXT, what="the longest prefix (through step 180)")
    assert got.refused and got.max_tokens == 0 and not got.clamped
    assert got.refused.startswith(f"the longest prefix (through step 180) has {prompt} tokens")
    assert "context is 4096" in got.refused and "permanent" in got.refused


def test_the_forced_answer_is_kept_beside_the_analysis():
    assert fit(3000, 2048, CONTEXT, reserve=80).max_tokens == 4096 - 3000 - 80
    assert fit(4096 - 80 - MIN_ROOM + 1, 2048, CONTEXT, reserve=80).refused
    estimated = fit(5000, 100, Context(4096, source="option", counter=ESTIMATE))
    assert "(estimated)" in estimated.refused


def test_the_estimate_is_an_upper_bound_on_real_traces(tiny_tokenizer):
    """Without /tokenize the HTTP engine estimates; the estimate must never let an over-long prompt
    through. On the 30 real traces, with the tiny byte-level tokenizer (about 1.3 bytes a token:
    close to the worst case of one byte a token), as the chat template renders them."""
    rows = [orjson.loads(line) for line in TRACES.read_bytes().splitlines()]
    assert len(rows) >= 20
    margins = []
    for row in rows:
        for continue_final in (False, True):
            messages = chat("Please reason step by step.", row["problem"], row["response"] if continue_final else None)
            request = GenerationRequest(key="", messages=messages, continue_final=continue_final)
            exact = len(tiny_tokenizer.encode(render_prompt(tiny_tokenizer, request), add_special_tokens=False))
            margins.append(estimate_tokens(messages) - exact)
    assert min(margins) >= 0


def test_over_http_without_tokenize_the_estimate_refuses_and_without_a_context_nothing_is_checked():
    """A server that reports no context and has no /tokenize (an OpenAI-shaped test server): with
    --max-model-len the prompts are estimated, and a long one is refused before it is sent; without
    it nothing is checked and the request goes out as before."""
    from prm_annotate.engines.openai_engine import OpenAIEngine
    from prm_annotate.records import Response
    from prm_annotate.stages.judge import JudgeStage
    from testing.fault_server import FaultServer

    long = {"id": "long", "problem": "ok", "steps": [p for p in _trace()["response"].split("\n\n") if p.strip()]}
    short = {"id": "short", "problem": "ok", "steps": ["ok"]}
    with FaultServer() as server:
        unknown = OpenAIEngine(server.base_url, "m", max_attempts=1)
        assert unknown.context() is None
        engine = OpenAIEngine(server.base_url, "m", max_attempts=1, max_model_len=1000)
        assert engine.context() == Context(1000, source="option", counter=ESTIMATE)
        for eng, checked in ((engine, True), (unknown, False)):
            stage = JudgeStage(eng, prompt="processbench", max_tokens=100, engine_info={"model": "m"})
            before = len(server.started)
            outcomes = stage.process([Response.model_validate(r) for r in (long, short)])
            sent = server.started[before:]
            assert any(long["steps"][5] in m for m in sent) != checked  # the long prompt: never sent when checked
            assert any(long["steps"][5] not in m for m in sent)  # the short one went
            if checked:
                assert outcomes[0].kind == "permanent" and "(estimated)" in outcomes[0].error
                assert outcomes[1].error is None
        engine.close()
        unknown.close()


def _trace() -> dict:
    return orjson.loads(TRACES.read_bytes().splitlines()[0])
