"""The bill and the estimate in real vLLM (the shared world engines): a rollout run's manifest bill
is the sum of its records' bills, and `plan rollout|judge`'s estimate, made before the run from the
same file, holds what the run measured — exhaustive's and the judge's requests exactly, every figure
within its guaranteed [low, high], the modelled prefill and decode between the measured figure and
3x it (the judge's on the world's responses, with free and with constrained votes)."""
from __future__ import annotations

import dataclasses
import json

import orjson
import pytest

from prm_annotate.engines.bill import RECORD_KEYS, Bill
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.config import JudgeConfig, RolloutConfig, configured
from prm_annotate.stages.plan import estimate_judge, estimate_rollout
from prm_annotate.stages.judge import JudgeStage
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
            if bound.modelled is not None:
                assert value <= bound.modelled * (1 + 1e-9) <= 3 * value, (strategy, name, value, bound)
        if strategy == "exhaustive":
            for name in ("requests", "completions", "prompt_tokens"):
                assert estimate.figures[name].exact and estimate.figures[name].low == measured[name], name
        ratios[strategy] = {name: estimate.figures[name].high / measured[name]
                            for name in ("requests", "prompt_tokens")}
    for strategy in ("binary", "verify"):
        assert all(r <= 3 for r in ratios[strategy].values()), (strategy, ratios)


def world_responses(n: int) -> list[dict]:
    """World responses without a policy: each problem's right solution, and one with a slip at a
    step that moves with the problem (the judge copies the paragraphs up to it)."""
    from prm_annotate.world import make_problems
    from prm_annotate.world.problems import World, solution_steps

    rows = []
    for i, p in enumerate(make_problems(n, seed=5, split="plan-judge")):
        steps = solution_steps(World.from_json(p["world"]))
        slipped = list(steps)
        at = i % (len(steps) - 1)
        slipped[at] = slipped[at].replace(" = ", " = 1")  # a wrong result: a digit in front
        for j, (s, right) in enumerate(((steps, True), (slipped, False))):
            rows.append({"id": f"{p['id']}/{j}", "problem": p["problem"], "answer": p["answer"], "steps": s,
                         "correct": right})
    return rows


@pytest.mark.parametrize("settings", [dict(max_tokens=256), dict(max_tokens=256, votes=2, constrained=True)],
                         ids=["free", "constrained"])
def test_plan_judge_holds_the_measured_bill_and_models_the_decode_within_3x(world_judge, tmp_path, settings):
    from prm_annotate.world import MODELS_DIR, WORLD_JUDGE_PROMPT
    from testing.rollout_bench import reset_prefix_cache

    source = write(tmp_path / "responses.jsonl", world_responses(4))
    config = configured(JudgeConfig(), dict(prompt=WORLD_JUDGE_PROMPT, seed=0, **settings))
    info = {"model": str(MODELS_DIR / "judge")}
    estimate = estimate_judge(source, config, info)
    assert estimate.counted_by.startswith("tokenizer")
    reset_prefix_cache(world_judge)
    stage = JudgeStage(world_judge, config, engine_info=info)
    try:
        summary = run_stage(stage, RunOptions(source, str(tmp_path / "judged.jsonl"), quiet=True))
    finally:
        stage.close()
    assert summary.failed == 0
    bill = Bill.read(json.loads((tmp_path / "judged.manifest.json").read_text())["runs"][-1]["bill"])
    records = [json.loads(line) for line in open(tmp_path / "judged.jsonl")]
    measured = {"requests": bill.requests, "completions": sum(len(r["judge"]["votes"]) for r in records),
                "prompt_tokens": bill.prompt_tokens, "prefill_tokens": bill.prefill_tokens,
                "decode_tokens": bill.decode_tokens, "compute": bill.compute}
    for name, value in measured.items():
        bound = estimate.figures[name]
        assert bound.low <= value <= bound.high * (1 + 1e-9), (name, value, bound)
        if bound.modelled is not None:
            assert value <= bound.modelled * (1 + 1e-9) <= 3 * value, (name, value, bound)
    for name in ("requests", "completions"):
        assert estimate.figures[name].exact and estimate.figures[name].low == measured[name], name
    # The baseline: the budget alone (the guaranteed high) is more than 3x what the verdicts write,
    # which is why the decode is modelled from the paragraphs.
    assert estimate.figures["decode_tokens"].high > 3 * measured["decode_tokens"]
