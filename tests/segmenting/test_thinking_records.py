"""Thinking records through `segment` under every segmenter, then the stages that read them.

On the 30 real traces of tests/data/long_traces.jsonl (made response records as `sample` makes them)
and on the world thinker's own traces (`make demo-think`'s sample stage, small): every segmenter's
output keeps the thought apart (`thought_steps` ending at the join that holds `</think>`), puts no
tag in a step, and its steps and joins give the completion back byte for byte; `plan judge` and
`plan rollout` accept it, and (engine) `judge` and `rollout` label it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.segmenting import SEGMENTERS, segment_trace
from prm_annotate.segmenting.paragraphs import Paragraphs
from prm_annotate.steps import join_steps
from prm_annotate.thinking.tags import END, MODEL, START, read_trace
from testing.paths import TEST_DATA

SEGMENTS = {"paragraphs": [], "merge": ["--segment-option", "budget=64"], "reflection": [],
            "confidence": ["--segment-option", "cuts=6"]}


def made_tokens(text: str) -> list[list]:
    """Made-up sampled tokens for records with none (confidence needs them): every 7th character."""
    return [[pos, -((pos * 7919) % 997) / 100] for pos in range(0, len(text), 7)]


def real_trace_records() -> tuple[list[dict], list[str]]:
    """The real traces as `sample` writes a thinking policy's responses, and their completion texts."""
    rows = [json.loads(line) for line in (TEST_DATA / "long_traces.jsonl").read_text(encoding="utf-8").splitlines()]
    records = []
    for row in rows:
        made = segment_trace(read_trace(row["response"], MODEL), Paragraphs())
        records.append({"id": row["id"], "problem": row["problem"], "answer": row["answer"], "steps": made.steps,
                        "thought_steps": made.thought_steps, "thought_finished": True,
                        **({"step_joins": made.record_joins} if made.record_joins else {}),
                        "token_logprobs": made_tokens(join_steps(made.steps, made.joins))})
    return records, [row["response"] for row in rows]


def segment_all(src: Path, out_dir: Path) -> dict[str, list[dict]]:
    out = {}
    for name, options in SEGMENTS.items():
        dest = out_dir / f"{name}.jsonl"
        res = CliRunner().invoke(app, ["segment", str(src), "-o", str(dest), "--segment", name, *options])
        assert res.exit_code == 0, res.output
        out[name] = [json.loads(line) for line in dest.read_text().splitlines()]
    return out


def check_thinking_records(records: list[dict], texts: list[str]) -> None:
    """The thought apart, no tag in a step, the text given back byte for byte from the first step."""
    for record, text in zip(records, texts):
        steps, joins, ts = record["steps"], record.get("step_joins"), record["thought_steps"]
        assert not any(START in s or END in s for s in steps), record["id"]
        rejoined = join_steps(steps, joins)
        assert rejoined == text.strip().removeprefix(START).strip(), record["id"]
        if record["thought_finished"]:
            assert 0 < ts < len(steps) and joins is not None
            assert END in joins[ts - 1] and END not in join_steps(steps[:ts], joins[:ts - 1]), record["id"]
        else:
            assert ts == len(steps) and END not in rejoined


def plan_accepts(path: Path, *model: str) -> None:
    for command in ("judge", "rollout"):
        res = CliRunner().invoke(app, ["plan", command, str(path), *model])
        assert res.exit_code == 0, (command, path.name, res.output[-2000:])


def test_every_segmenter_keeps_the_thought_of_real_traces_and_plan_accepts_it(tmp_path):
    records, texts = real_trace_records()
    check_thinking_records(records, texts)
    src = tmp_path / "responses.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert set(SEGMENTS) == set(SEGMENTERS)
    for name, out in segment_all(src, tmp_path).items():
        check_thinking_records(out, texts)
        assert all(r["segmenter"]["name"] == name for r in out)
        plan_accepts(tmp_path / f"{name}.jsonl", "--model", "no-such/model")  # estimated at 4 characters a token
    # paragraphs again gives the records sample wrote, step for step
    assert [r["steps"] for r in segment_all(src, tmp_path)["paragraphs"]] == [r["steps"] for r in records]


def run(stage, src: Path, dest: Path) -> list[dict]:
    """A stage over a file as its command runs it; every record taken, none failed."""
    from prm_annotate.pipeline.runner import RunOptions, run_and_close

    summary = run_and_close(stage, RunOptions(input=str(src), output=str(dest), quiet=True))
    assert not summary.failures, summary.failures
    return [json.loads(line) for line in dest.read_text().splitlines()]


@pytest.mark.engine
def test_every_segmenter_on_the_thinkers_own_traces_then_plan_judge_and_rollout(world_thinker, request, tmp_path):
    """`make demo-think`'s sample stage on 4 problems (its settings: reasoning think, the tokens'
    log-probabilities kept), each segmenter's output planned, rolled out and judged (2 records each)."""
    from prm_annotate.stages.judge import JudgeStage
    from prm_annotate.stages.rollout import RolloutStage
    from prm_annotate.stages.sample import SampleStage
    from prm_annotate.world import THINKER_DIR, WORLD_JUDGE_PROMPT, WORLD_SYSTEM_PROMPT
    from prm_annotate.world.problems import make_problems

    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(p) + "\n" for p in make_problems(4, seed=0, split="test")))
    responses = run(SampleStage(world_thinker, n=2, temperature=0.7, max_tokens=384, seed=0,
                                system_prompt=WORLD_SYSTEM_PROMPT, reasoning="think", keep_logprobs=True),
                    problems, tmp_path / "responses.jsonl")
    assert len(responses) == 8 and sum(r["thought_finished"] for r in responses) >= 6
    texts = [join_steps(r["steps"], r.get("step_joins")) for r in responses]
    check_thinking_records(responses, texts)
    segmented = segment_all(tmp_path / "responses.jsonl", tmp_path)
    for name, out in segmented.items():
        check_thinking_records(out, texts)
        plan_accepts(tmp_path / f"{name}.jsonl", "--model", str(THINKER_DIR))
        labelled = [r for r in out if r["thought_finished"]][:2]  # an unfinished thought is set aside
        (tmp_path / f"{name}-two.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labelled))
    for name in segmented:
        rolled = run(RolloutStage(world_thinker, k=2, max_tokens=64, seed=0), tmp_path / f"{name}-two.jsonl",
                     tmp_path / f"{name}-rollouts.jsonl")
        assert len(rolled) == 2 and all(len(r["mc"]["scores"]) == len(r["steps"]) for r in rolled), name
    world_judge = request.getfixturevalue("world_judge")  # the heavy slot's next engine: the thinker closes
    for name in segmented:
        judged = run(JudgeStage(world_judge, prompt=WORLD_JUDGE_PROMPT, max_tokens=256, seed=0),
                     tmp_path / f"{name}-two.jsonl", tmp_path / f"{name}-judged.jsonl")
        assert len(judged) == 2 and all(r["judge"]["first_error"] is None or -1 <= r["judge"]["first_error"]
                                        < len(r["steps"]) for r in judged), name


def test_the_reward_server_cuts_a_thinking_policys_text_as_sample_does():
    """An RL client's bare text with a thought: the same steps as `sample` records, no tag in one."""
    from prm_annotate.reward.protocols import TextRules

    text = "<think>\nLet me add.\n\n3 + 5 = 8.\n</think>\n\nSo \\boxed{8}.<|im_end|>"
    assert TextRules().steps(text) == ["Let me add.", "3 + 5 = 8.", "So \\boxed{8}."]
    made = segment_trace(read_trace(text.removesuffix("<|im_end|>"), MODEL), Paragraphs())
    assert made.steps == TextRules().steps(text) and made.thought_steps == 2
