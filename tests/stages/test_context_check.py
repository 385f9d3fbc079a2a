"""Long inputs measured against the model's context before anything is spent (issue 47).

On real long reasoning traces (tests/data/long_traces.jsonl) and the tiny model in process (its
context 2,048 tokens): a record whose prompt leaves no useful room is refused for good before any
of its requests (the engine is wrapped to count what it was handed), the others finish, one whose
budget does not fit is clamped and says so, and the run ends with exit status 1 saying the refusal
is permanent, never offering it as a retry. Without an engine: the runner's wording for permanent
and transient failures.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import orjson
import pytest

from testing.paragraph_steps import split_steps

from prm_annotate.engines.base import GenerationRequest
from prm_annotate.engines.context import MIN_ROOM
from prm_annotate.pipeline.runner import Outcome, RunOptions, StageBase, failure_advice, run_and_close
from prm_annotate.records import Response
from prm_annotate.stages.judge import JudgeStage
from prm_annotate.stages.rollout import RolloutStage

from testing.jsonl_files import read_jsonl, write_jsonl

TRACES = Path(__file__).parents[1] / "data" / "long_traces.jsonl"


def traces() -> list[dict]:
    return [orjson.loads(line) for line in TRACES.read_bytes().splitlines()]


def short(i: int) -> dict:
    return {"id": f"short-{i}", "problem": f"Tom has {i} apples. Then gets 2 more. How many?", "answer": str(i + 2),
            "steps": [f"Tom has {i} apples.", f"Then {i} + 2 = {i + 2}.", f"So \\boxed{{{i + 2}}}."], "correct": True}


class Counting:
    """A real engine whose submitted requests are counted by key (the scheduler's job prefix taken off)."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.model, self.keys = engine, engine.model, []

    def submit(self, requests: Sequence[GenerationRequest]) -> None:
        self.keys += [r.key.split("\x1f", 1)[-1] for r in requests]
        self.engine.submit(requests)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def asked_for(self, record_id: str) -> int:
        return sum(key.startswith(record_id + "\x00") for key in self.keys)


def tokens(engine: Any, request: GenerationRequest) -> int:
    """The prompt's tokens by transformers' own chat-template tokenization (not the engine's path)."""
    ids = engine.tokenizer.apply_chat_template([dict(m) for m in request.messages], tokenize=True,
                                               add_generation_prompt=not request.continue_final,
                                               continue_final_message=request.continue_final)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


def manifest(out: Path) -> dict:
    return orjson.loads(out.with_name(out.stem + ".manifest.json").read_bytes())["runs"][-1]


def test_permanent_failures_are_never_offered_as_a_retry(tmp_path, capsys):
    """The runner's summary and manifest on a stage that refuses one record for good and fails
    another on the way: the refusal counted apart, the retry offered for the other only."""

    class Refusing(StageBase):
        name, input_model, output_model = "refusing", Response, Response
        stats: Counter = Counter()

        def process(self, batch):
            return [Outcome.refused(r.id, "too long; permanent") if r.id == "short-0" else
                    Outcome(r.id, error="HTTP 503") if r.id == "short-1" else Outcome.one(r) for r in batch]

        def settings(self):
            return {}

    src, out = write_jsonl(tmp_path / "in.jsonl", [short(i) for i in range(3)]), tmp_path / "out.jsonl"
    summary = run_and_close(Refusing(), RunOptions(str(src), str(out), quiet=True))
    err = capsys.readouterr().err
    assert summary.exit_code == 1 and summary.permanent == ["short-0"]
    assert "2 set aside (1 failed, 1 refused for good: too long for the context)" in err
    assert "refused short-0: too long; permanent" in err
    assert "1 refused for good" in err and "rerun the same command to retry the other 1" in err
    run = manifest(out)
    assert run["counts"]["failed"] == 2 and run["counts"]["failed_permanent"] == 1
    assert run["permanent_failures"] == ["short-0"]
    # Only transient failures: today's advice; only permanent ones: no retry offered at all.
    assert failure_advice(3, 0) == ["rerun the same command to retry them; finished records are kept"]
    assert all("retry" not in line for line in failure_advice(2, 2))


def judge_cases(engine: Any, max_tokens: int) -> tuple[list[dict], dict]:
    """Two short responses, a whole real trace (its judge prompt far over the context) and a real
    trace cut to the paragraphs whose prompt leaves between MIN_ROOM and `max_tokens` tokens."""
    stage = JudgeStage(engine, prompt="processbench", max_tokens=max_tokens, engine_info={"model": "tiny"})
    trace = traces()[0]
    paragraphs = split_steps(trace["response"])
    long = {"id": "long", "problem": trace["problem"], "steps": paragraphs}
    room = engine.max_model_len - max_tokens
    for n in range(len(paragraphs), 1, -1):
        tight = {"id": "tight", "problem": trace["problem"], "steps": paragraphs[:n]}
        prompt = tokens(engine, stage._request(Response.model_validate(tight), 0))
        if prompt <= engine.max_model_len - MIN_ROOM:
            break
    assert room < prompt <= engine.max_model_len - MIN_ROOM  # a budget that does not fit, and room enough
    return [short(0), long, tight, short(1)], {"tight": prompt}


@pytest.mark.engine
def test_judge_refuses_a_prompt_over_the_context_before_any_vote_and_clamps_a_tight_one(vllm_engine, tmp_path, capsys):
    engine, max_tokens = Counting(vllm_engine), 256
    records, prompt = judge_cases(vllm_engine, max_tokens)
    # The baseline: handed to the engine, the long prompt fails (the failure today's run met mid-run).
    stage = JudgeStage(engine, prompt="processbench", max_tokens=max_tokens, engine_info={"model": "tiny"})
    long_request = stage._request(Response.model_validate(records[1]), 0)
    alone = vllm_engine.generate([long_request])[long_request.key]
    assert not alone.ok and "max_model_len is 2048" in alone.error
    assert tokens(vllm_engine, long_request) > vllm_engine.max_model_len

    src, out = write_jsonl(tmp_path / "responses.jsonl", records), tmp_path / "judged.jsonl"
    summary = run_and_close(stage, RunOptions(str(src), str(out), quiet=True))
    err = capsys.readouterr().err
    assert summary.exit_code == 1 and summary.failed == 1 and summary.permanent == ["long"]
    assert engine.asked_for("long") == 0  # refused before any request
    assert all(engine.asked_for(i) == 1 for i in ("short-0", "tight", "short-1"))
    reason = summary.failures["long"]
    assert f"has {tokens(vllm_engine, long_request)} tokens" in reason and "context is 2048" in reason
    assert "1 set aside (1 refused for good: too long for the context)" in err and "retry" not in err
    assert "1 refused for good: their input does not fit" in err

    judged = {r["id"]: r["judge"] for r in read_jsonl(out)}
    assert list(judged) == ["short-0", "tight", "short-1"]
    tight = judged["tight"]
    # vLLM's own count of the prompt it ran, and the budget: exactly the rest of the context.
    assert tight["prompt_tokens"] == prompt["tight"]
    assert tight["max_tokens"] == max_tokens and tight["max_tokens_clamped"] == 2048 - prompt["tight"] < max_tokens
    assert tight["generated_tokens"] <= tight["max_tokens_clamped"]
    assert "max_tokens_clamped" not in judged["short-0"] and "max_tokens_clamped" not in judged["short-1"]
    run = manifest(out)
    assert run["settings"]["context"] == {"max_model_len": 2048, "source": "engine", "counter": "engine"}
    assert run["counts"]["failed_permanent"] == 1 and run["permanent_failures"] == ["long"]
    assert run["stats"]["refused_over_context"] == 1 and run["stats"]["max_tokens_clamped"] == 1


@pytest.mark.engine
def test_rollout_refuses_a_trace_whose_longest_prefix_is_over_the_context_before_any_completion(vllm_engine, tmp_path,
                                                                                                  capsys):
    """The issue's run: a long trace whose early prefixes fit and whose late ones do not. Today the
    early steps' completions were paid for and the record failed at a later step; now it is refused
    before its first completion, and the others (a real trace cut to fit, with its budget clamped)
    finish."""
    engine, max_tokens = Counting(vllm_engine), 200
    stage = RolloutStage(engine, k=1, max_tokens=max_tokens, seed=1, engine_info={"model": "tiny"})
    trace = traces()[1]
    paragraphs = split_steps(trace["response"])
    long = {"id": "long", "problem": trace["problem"], "answer": trace["answer"], "steps": paragraphs, "correct": False}

    def prefix_tokens(record: dict, step: int) -> int:
        from prm_annotate.strategies import Probe

        return tokens(vllm_engine, stage._request(stage.input_model.model_validate(record), Probe(step, 0)))

    # The baseline: the first prefix fits, the longest does not (what failed mid-run before).
    assert prefix_tokens(long, 0) < 2048 - max_tokens and prefix_tokens(long, len(paragraphs) - 2) > 2048
    # A trace cut to three steps: a long first one (many paragraphs), then two; the longest prefix
    # (steps 0 and 1) leaves more than MIN_ROOM but less than max_tokens.
    for n in range(len(paragraphs) - 2, 1, -1):
        tight = {"id": "tight", "problem": trace["problem"], "answer": trace["answer"], "correct": False,
                 "steps": ["\n\n".join(paragraphs[:n]), paragraphs[n], paragraphs[n + 1]]}
        longest = prefix_tokens(tight, 1)
        if longest <= 2048 - MIN_ROOM:
            break
    assert 2048 - max_tokens < longest <= 2048 - MIN_ROOM

    src, out = write_jsonl(tmp_path / "responses.jsonl", [short(0), long, tight]), tmp_path / "rollouts.jsonl"
    summary = run_and_close(stage, RunOptions(str(src), str(out), quiet=True))
    err = capsys.readouterr().err
    assert summary.exit_code == 1 and summary.permanent == ["long"]
    assert engine.asked_for("long") == 0
    assert engine.asked_for("short-0") == 2 and engine.asked_for("tight") == 2
    assert "through step" in summary.failures["long"] and "permanent" in summary.failures["long"]
    assert "1 set aside (1 refused for good: too long for the context)" in err and "retry" not in err
    mc = {r["id"]: r["mc"] for r in read_jsonl(out)}
    assert list(mc) == ["short-0", "tight"] and mc["tight"]["completions"] == 2
    assert mc["tight"]["max_tokens"] == max_tokens and mc["tight"]["max_tokens_clamped"] == 2048 - longest
    assert mc["tight"]["generated_tokens"] <= 2 * mc["tight"]["max_tokens_clamped"]
    assert "max_tokens_clamped" not in mc["short-0"]
    assert manifest(out)["stats"]["refused_over_context"] == 1
