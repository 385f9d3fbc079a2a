"""The bill (engines/bill.py): one result's charge, a run's sums, the parameter count from a config
(against the loaded model's own count), the last line and the manifest of a scripted run."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from prm_annotate.engines.base import GenerationResult
from prm_annotate.engines.bill import RECORD_KEYS, UNIT, Bill, charge, count_parameters, parse_params, record_bill


def test_a_charge_counts_prefill_decode_and_thought_and_the_bill_adds_them_up():
    stats: Counter = Counter()
    charge(stats, GenerationResult("a", ["x"], prompt_tokens=100, cached_prompt_tokens=64, generated_tokens=30,
                                   reasoning_tokens=20))
    charge(stats, GenerationResult("b", ["y"], prompt_tokens=50, generated_tokens=5), thought=None)  # cache untold
    charge(stats, GenerationResult("c", ["z"], prompt_tokens=10, cached_prompt_tokens=0, generated_tokens=7), thought=3)
    bill = Bill.of(stats | Counter({"ahead_unused_tokens": 11}), 2_000_000_000)
    assert (bill.requests, bill.prompt_tokens, bill.cached_prompt_tokens) == (3, 160, 64)
    assert bill.prefill_tokens == 96 and bill.decode_tokens == 30 + 5 + 7 + 11 and bill.thought_tokens == 23
    assert bill.answer_tokens == bill.decode_tokens - 23
    assert bill.compute == pytest.approx((96 + 53) * 2.0)  # billion-parameter-tokens at 2e9
    assert stats["cache_untold"] == 1
    entry = bill.record()
    assert entry["unit"] == UNIT and Bill.read(entry) == bill
    assert Bill.of(stats, None).compute is None and Bill.of(stats, None).params_from == "unknown"
    assert (bill + bill).decode_tokens == 2 * bill.decode_tokens and bill.at(7_000_000_000).compute == pytest.approx(149 * 7)
    assert record_bill(stats) == {key: stats[key] for key in RECORD_KEYS}


@pytest.mark.parametrize("text,value", [("7B", 7_000_000_000), ("72b", 72_000_000_000), ("1.06M", 1_060_000),
                                        ("7e9", 7_000_000_000), ("135000000", 135_000_000), ("0.5B", 500_000_000)])
def test_parameter_counts_as_people_write_them(text, value):
    assert parse_params(text) == value


@pytest.mark.parametrize("bad", ["seven", "7X", "", "-3B", "0"])
def test_a_bad_parameter_count_is_refused(bad):
    with pytest.raises(ValueError):
        parse_params(bad)


def test_the_count_from_the_config_is_the_loaded_models_own():
    """No weight read for the count; the baseline loads the weights and counts them."""
    from transformers import AutoModelForCausalLM

    from prm_annotate.world import MODELS_DIR

    for name in ("policy", "judge"):
        loaded = AutoModelForCausalLM.from_pretrained(MODELS_DIR / name)
        assert count_parameters(str(MODELS_DIR / name)) == sum(p.numel() for p in loaded.parameters())
    assert count_parameters("/nonexistent/model") is None


def test_a_scripted_rollout_and_judge_write_their_bill_the_records_sum_to_it_and_the_last_line_says_it(tmp_path):
    from prm_annotate.pipeline.runner import RunOptions, run_stage
    from prm_annotate.stages.judge import JudgeStage
    from prm_annotate.stages.rollout import RolloutStage
    from testing.scripted_engine import ScriptedEngine
    from testing.summary_lines import parse_sentence

    rows = [{"id": f"r{i}", "problem": "1+1?", "steps": ["a", "b", "c"][: 2 + i % 2], "correct": False, "answer": "2"}
            for i in range(4)]
    source = tmp_path / "responses.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def script(request):
        return "\\boxed{2} and more" if "b" in request.messages[-1]["content"] else "\\boxed{3}"

    for name, make in (("rollout", lambda e: RolloutStage(e, k=3, engine_info={"model": "scripted", "model_params": 7e9})),
                       ("judge", lambda e: JudgeStage(e, prompt="processbench",
                                                      engine_info={"model": "scripted", "model_params": 72e9}))):
        stage = make(ScriptedEngine(lambda r: "\\boxed{1}" if name == "judge" else script(r)))
        out = tmp_path / f"{name}.jsonl"
        summary = run_stage(stage, RunOptions(str(source), str(out), quiet=True))
        run = json.loads((tmp_path / f"{name}.manifest.json").read_text())["runs"][-1]
        bill = Bill.read(run["bill"])
        section = "mc" if name == "rollout" else "judge"
        records = [json.loads(line) for line in out.read_text().splitlines()]
        summed = Counter()
        for r in records:
            summed.update(r[section]["bill"])
        assert bill == Bill.of(summed, 7_000_000_000 if name == "rollout" else 72_000_000_000, "given")
        assert bill.requests == (sum(3 * (len(r["steps"]) - 1) for r in rows) if name == "rollout" else len(rows))
        assert bill.prompt_tokens == 10 * bill.requests  # the scripted engine's 10 per prompt
        cost = parse_sentence(summary.line())["cost"]
        assert cost.startswith(f"cost {bill.prefill_tokens:,} prefill + {bill.decode_tokens:,} decode tokens, ")
        said = cost.split(", ")[-2].removesuffix(f" {UNIT}")
        figure = float(said.rstrip("MB").replace(",", "")) * {"M": 1e6, "B": 1e9}.get(said[-1], 1)
        assert abs(figure - bill.compute) <= 0.06 * bill.compute, (said, bill.compute)
