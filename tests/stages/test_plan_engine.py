"""The bill and the estimate on the world's policy in real vLLM (one engine, the shared fixture): a
rollout run's manifest bill is the sum of its records' bills, and `plan rollout`'s estimate, made
before the run from the same file, holds what the run measured — exhaustive's requests exactly, every
figure within [low, high], the likely prefill and decode between the measured figure and 3x it."""
from __future__ import annotations

import dataclasses
import json

import orjson
import pytest

from prm_annotate.engines.bill import RECORD_KEYS, Bill
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.config import RolloutConfig, configured
from prm_annotate.stages.plan import estimate_rollout
from prm_annotate.stages.rollout import RolloutStage

pytestmark = pytest.mark.engine

K, MAX_TOKENS = 4, 96


def write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return str(path)


def test_the_estimate_holds_the_measured_bill_and_the_records_sum_to_it(world_policy, tmp_path):
    from prm_annotate.world import MODELS_DIR, make_problems
    from testing.rollout_bench import SYSTEM_PROMPT, reset_prefix_cache, sample_responses

    responses = sample_responses(world_policy, make_problems(4, seed=11, split="plan"), n=3, max_tokens=MAX_TOKENS)
    assert {r["correct"] for r in responses} == {True, False}
    source = write(tmp_path / "responses.jsonl", responses)
    # verify's claims: the middle step of a wrong response, none of a right one (any claim will do:
    # the bounds hold whatever the judge said)
    judged = write(tmp_path / "judged.jsonl", [
        {**r, "judge": {"first_error": -1 if r["correct"] else len(r["steps"]) // 2, "votes": [None],
                        "parse_failures": 0, "model": "claims", "prompt": "none"}} for r in responses])
    info = {"model": str(MODELS_DIR / "policy")}
    ratios = {}
    for strategy, extra in (("exhaustive", {}), ("binary", {}), ("verify", {"judged": judged})):
        config = configured(RolloutConfig(), dict(k=K, strategy=strategy, max_tokens=MAX_TOKENS, seed=2,
                                                  system_prompt=SYSTEM_PROMPT, **extra))
        estimate = estimate_rollout(source, config, info)
        assert estimate.counted_by.startswith("tokenizer")
        output = str(tmp_path / f"{strategy}.jsonl")
        reset_prefix_cache(world_policy)  # a cold cache, as a run's engine starts
        stage = RolloutStage(world_policy, config, engine_info=info)
        try:
            summary = run_stage(stage, RunOptions(source, output, quiet=True))
        finally:
            stage.close()
        assert summary.failed == 0
        run = json.loads((tmp_path / f"{strategy}.manifest.json").read_text())["runs"][-1]
        bill = Bill.read(run["bill"])
        records = [json.loads(line) for line in open(output)]
        summed = {key: sum(r["mc"]["bill"][key] for r in records) for key in RECORD_KEYS}
        assert Bill.of(summed, bill.params, bill.params_from) == dataclasses.replace(bill, cached_prompt_tokens=0), strategy  # no sharing, no speculation
        assert bill.params == 1_063_168 and bill.compute > 0
        measured = {"requests": bill.requests, "completions": sum(r["mc"]["completions"] for r in records),
                    "prompt_tokens": bill.prompt_tokens, "prefill_tokens": bill.prefill_tokens,
                    "decode_tokens": bill.decode_tokens, "compute": bill.compute}
        assert measured["requests"] > 0
        for name, value in measured.items():
            bound = estimate.figures[name]
            assert bound.low <= value <= bound.high * (1 + 1e-9), (strategy, name, value, bound)
            if bound.likely is not None:
                assert value <= bound.likely * (1 + 1e-9) <= 3 * value, (strategy, name, value, bound)
        if strategy == "exhaustive":
            for name in ("requests", "completions", "prompt_tokens"):
                assert estimate.figures[name].exact and estimate.figures[name].low == measured[name], name
        ratios[strategy] = {name: estimate.figures[name].high / measured[name]
                            for name in ("requests", "prompt_tokens")}
    for strategy in ("binary", "verify"):
        assert all(r <= 3 for r in ratios[strategy].values()), (strategy, ratios)
