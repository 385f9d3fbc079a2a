"""The estimate's request bounds from walking a strategy's own plans (stages/plan.py), checked on
outcomes drawn at random — non-monotone ones too, and completions right or wrong one by one — for
every strategy: the completions a plan really asks for fall within [low, high]; exhaustive's are exact."""
from __future__ import annotations

import random

import pytest

from prm_annotate.stages.plan import _bounds, walk_plan
from prm_annotate.strategies import STRATEGIES, JudgeClaim, ProbeResult


def asked(plan, rng: random.Random, p_right: list[float]) -> int:
    n = 0
    while probes := plan.next_round():
        n += len(probes)
        plan.observe([ProbeResult(p, rng.random() < p_right[p.step], 1) for p in probes])
    return n


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_asks_within_its_walked_bounds(name):
    rng = random.Random(7)
    strategy = STRATEGIES[name]()
    k = 4
    tight = 0
    for trial in range(300):
        n = rng.randint(1, 9)
        last = rng.random() < 0.4
        extra = {"judged": JudgeClaim(rng.randint(-1, n - 1))} if name == "verify" else {}
        p_right = [rng.choice([0.0, 0.1, 0.5, 0.9, 1.0]) for _ in range(n)]
        low, high = _bounds(walk_plan(strategy.plan(n, k, 0.0, last, **extra), max(0, n - 1)), k, max(0, n - 1),
                            lambda s: 1)
        got = asked(strategy.plan(n, k, 0.0, last, **extra), rng, p_right)
        assert low <= got <= high, (name, n, last, extra, p_right, got, low, high)
        tight += low == high
        if name == "exhaustive":
            assert low == high == k * max(0, n - 1)
    assert tight < 300 or name == "exhaustive"  # the others are bounds, not exact counts


def test_plan_rollout_on_the_command_line_counts_exhaustive_exactly_without_a_tokenizer(tmp_path):
    import json

    from typer.testing import CliRunner

    from prm_annotate.cli import app

    rows = [{"id": f"r{i}", "problem": "What is 2+2?", "answer": "4", "steps": ["a b c d"] * (2 + i), "correct": i == 0}
            for i in range(3)]
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["plan", "rollout", str(path), "-k", "3", "--model", "no/such-model",
                                      "--max-tokens", "50", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["counted_by"].startswith("estimate: 4 characters per token") and out["params"] is None
    assert out["figures"]["requests"] == {"low": 3 * (1 + 2 + 3), "high": 3 * (1 + 2 + 3)}
    assert out["figures"]["decode_tokens"]["high"] == 50 * 18 and "compute" not in out["figures"]
    binary = json.loads(CliRunner().invoke(app, ["plan", "rollout", str(path), "-k", "3", "--model", "no/such-model",
                                                 "--strategy", "binary", "--json"]).stdout)
    assert binary["figures"]["requests"]["low"] < binary["figures"]["requests"]["high"] <= 18
    bad = CliRunner().invoke(app, ["plan", "rollout", str(tmp_path / "missing.jsonl"), "--model", "m"])
    assert bad.exit_code == 2


def test_plan_counts_a_thinking_record_under_a_template_that_opens_the_thought_once(tmp_path):
    """The thinker's template opens `<think>` in its generation prompt: a rollout prefix continues
    that thought (the in-process engine's state), so each prompt is the generation prompt and the
    prefix, one `<think>` in all. Baseline: the same count from the tokenizer by hand."""
    import json

    from transformers import AutoTokenizer

    from prm_annotate.stages.plan import estimate_rollout
    from prm_annotate.stages.rollout import RolloutConfig
    from prm_annotate.steps import prefix_text
    from prm_annotate.world import THINKER_DIR
    from prm_annotate.world.thinking import CLOSE_JOIN, trace_for

    rows = []
    for i in range(4):
        problem, t = trace_for("plan-test", i, 3)
        joins = ["\n\n"] * (len(t.thought) - 1) + [CLOSE_JOIN] + ["\n\n"] * (len(t.answer) - 1)
        rows.append({"id": f"t{i}", "problem": problem["problem"], "answer": problem["answer"], "steps": t.steps,
                     "step_joins": joins, "thought_steps": len(t.thought), "thought_finished": True, "correct": False})
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    k = 2
    estimate = estimate_rollout(str(path), RolloutConfig(k=k, system_prompt="none"), {"model": str(THINKER_DIR)})

    tok = AutoTokenizer.from_pretrained(str(THINKER_DIR))
    expected = 0
    for r in rows:
        head = tok.apply_chat_template([{"role": "user", "content": r["problem"]}], tokenize=False,
                                       add_generation_prompt=True)
        assert head.count("<think>") == 1
        for step in range(len(r["steps"]) - 1):
            text = head + prefix_text(r["steps"], r["step_joins"], step)
            expected += k * len(tok.encode(text, add_special_tokens=False))
    prompt = estimate.figures["prompt_tokens"]
    assert prompt.low == prompt.high == expected


def test_plan_says_which_records_the_context_check_will_refuse_or_clamp(tmp_path):
    """The world judge's context is 4,096 tokens (its config): a response of ~4,000 words cannot be
    judged, one of ~1,100 leaves less than the budget (clamped), a short one fits. Baseline: the
    prompts counted by hand with the model's tokenizer against engines.context.fit."""
    import json

    from transformers import AutoTokenizer

    from prm_annotate.engines.context import ENGINE, Context, fit
    from prm_annotate.stages.config import JudgeConfig, configured
    from prm_annotate.stages.judge import JudgeStage
    from prm_annotate.stages.plan import estimate_judge, model_context
    from prm_annotate.world import JUDGE_DIR

    words = ("3 + 4 = 7 , so the next sum is larger ; " * 10).split()
    rows = [{"id": f"r{n}", "problem": "What is 3 + 4?", "answer": "7", "steps": [" ".join(words[:50])] * n}
            for n in (1, 22, 80)]
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = configured(JudgeConfig(), {"max_tokens": 1024})
    estimate = estimate_judge(str(path), config, {"model": str(JUDGE_DIR)})

    from prm_annotate.engines.vllm_engine import render_prompt
    from prm_annotate.records import Response

    tok = AutoTokenizer.from_pretrained(str(JUDGE_DIR))
    stage = JudgeStage(None, config, engine_info={"model": str(JUDGE_DIR)})
    context = Context(model_context(str(JUDGE_DIR)), "config", ENGINE)
    fits = [fit(len(tok.encode(render_prompt(tok, stage._request(Response.model_validate(r), 0)),
                               add_special_tokens=False)), 1024, context) for r in rows]
    refused, clamped = sum(f.refused is not None for f in fits), sum(f.clamped for f in fits)
    assert (refused, clamped) == (1, 1), fits  # the rows were sized for one of each
    note = [n for n in estimate.notes if n.startswith("context:")]
    assert note == [note[0]] and note[0].startswith(f"context: {refused} of 3 records' judge prompts") \
        and f"{clamped} clamped below 1024 tokens" in note[0]
