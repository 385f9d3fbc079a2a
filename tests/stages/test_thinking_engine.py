"""Thinking policies and judges on real vLLM, made to write given traces (testing/forcing.py):

- behind a real `vllm serve` with no reasoning parser, an R1-style thought comes back inside the
  content, and `--reasoning auto` finds it from the first answer and splits it (sample, judge);
- in process, a tiny random model with a Qwen3-like thinking template writes real long traces
  (tests/data/long_traces.jsonl), a thinking judge faults a step inside the thought, and
  `rollout --strategy verify` checks the claim with rollouts inside the thought (slow)."""
from __future__ import annotations

import pytest

from prm_annotate.records import Problem, Response
from prm_annotate.stages.judge import JudgeStage
from prm_annotate.stages.sample import SampleStage

THOUGHT = "Let me add 3 and 5.\n\n3 + 5 = 8.\n\nCheck: 8 - 5 = 3."
ANSWER = "The sum is 8.\n\nSo the answer is \\boxed{8}."
TEXTS = {0: f"{THOUGHT}\n</think>\n\n{ANSWER}", 1: "Let me add 3 and 5.\n\nIt might be \\boxed{8}, or " + "not " * 500}
STEPS = ["3 + 5 = 8.", "8 * 2 = 17.", "So the answer is \\boxed{17}."]


@pytest.mark.engine
def test_auto_over_http_splits_a_thought_the_server_returns_in_the_content(openai_engine):
    """The shared tiny `vllm serve` has no reasoning parser (and a template that says nothing of
    thoughts): an R1-style trace forced out of it comes back whole in the content."""
    from testing.forcing import ForcingEngine

    http = openai_engine
    policy = ForcingEngine(http, lambda r: TEXTS[int(r.key.split("\x00")[1])])
    stage = SampleStage(policy, n=2, system_prompt="none", max_tokens=400, engine_info={"model": "tiny-r1"})
    problems = [Problem.model_validate({"id": p, "problem": "What is 3 + 5?", "answer": "8"}) for p in "ab"]
    records = [r.dump() for outs in stage.stream(iter(problems), 4) for o in outs for r in o.records]
    stage.close()
    assert stage.split == "think" and len(records) == 4
    for r in records:
        if r["id"].endswith("/0"):
            assert r["thought_steps"] == 3 and r["thought_finished"] is True and r["correct"] is True
            assert r["steps"][3:] == ANSWER.split("\n\n") and r["step_joins"][2] == "\n</think>\n\n"
        else:  # cut in its thought: the draft \boxed{8} is never graded
            assert r["thought_finished"] is False and r["correct"] is None and r["generator"]["finish_reason"] == "length"

    verdict = "Paragraph 1 doubles wrongly.\n</think>\n\nThe earliest error is paragraph 1: \\boxed{1}."
    judge = JudgeStage(ForcingEngine(http, lambda r: verdict), prompt="processbench", max_tokens=200,
                       engine_info={"model": "tiny-r1"})
    record = Response.model_validate({"id": "r", "problem": "Double 3 + 5.", "answer": "16", "steps": STEPS})
    [[outcome]] = list(judge.stream(iter([record]), 4))
    assert judge.reasoning == "think" and outcome.records[0].dump()["judge"]["first_error"] == 1
    # the baseline: told off, the same verdict is refused for the thought in it
    off = JudgeStage(ForcingEngine(http, lambda r: verdict), prompt="processbench", max_tokens=200,
                     reasoning="off", engine_info={"model": "tiny-r1"})
    [[outcome]] = list(off.stream(iter([record]), 4))
    assert outcome.records[0].dump()["judge"]["first_error"] is None


# ---------------------------------------------------------------- real long traces, in process

LONG_TRACES = "tests/data/long_traces.jsonl"


def long_traces(n: int) -> list[dict]:
    """The n shortest of the real long traces (Sky-T1, tests/data/SOURCES.md): 8,000+ characters,
    80-120 paragraphs, a `<think>` thought and a boxed answer."""
    import json
    from pathlib import Path

    rows = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "long_traces.jsonl").open()]
    return sorted(rows, key=lambda r: len(r["response"]))[:n]


@pytest.fixture(scope="module")
def qwen3_long_model_dir(tmp_path_factory):
    """A Qwen3-like thinking model whose context holds a long trace (the random weights do not care)."""
    import json

    from testing.thinking_models import QWEN3_LIKE, build_thinking_model

    path = build_thinking_model(tmp_path_factory.mktemp("tiny-qwen3"), QWEN3_LIKE)
    config = json.loads((path / "config.json").read_text())
    config["max_position_embeddings"] = 16384
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.mark.engine
@pytest.mark.slow  # real long traces in a 16k-context engine: `make test-slow` (docs/test-durations.md)
def test_sample_then_verify_then_judge_on_real_long_traces(qwen3_long_model_dir, heavy, tmp_path):
    """Real long traces written by the policy (forced), judged by a thinking judge (forced verdicts:
    a first error inside the thought), and that claim verified by rollouts inside the thought (K=2):
    every prompt holds one `<think>`, the answer is read after `</think>`, the claims are confirmed
    where the completions say so and refuted where they do not, and consensus keeps the confirmed."""
    import json

    from prm_annotate.records import Judged
    from prm_annotate.stages.consensus import ConsensusStage
    from prm_annotate.stages.judged_file import JudgedFile
    from prm_annotate.stages.rollout import RolloutStage
    from testing.forcing import ForcingEngine
    from testing.heavy import start_vllm_engine

    engine = heavy.get("vllm:tiny-qwen3-long", lambda: start_vllm_engine(
        qwen3_long_model_dir, max_model_len=16384, dtype="float32"), lambda e: e.close())
    traces = long_traces(2)
    by_problem = {t["problem"]: t for t in traces}
    problems = [Problem.model_validate({"id": t["id"], "problem": t["problem"], "answer": t["answer"]}) for t in traces]

    policy = ForcingEngine(engine, lambda r: by_problem[r.messages[-1]["content"]]["response"])
    sample = SampleStage(policy, n=1, system_prompt="none", max_tokens=12000, engine_info={"model": "tiny-qwen3"})
    responses = [r for o in sample.process(problems) for r in o.records]
    sample.close()
    for response, trace in zip(responses, traces):
        r = response.dump()
        assert r["thought_finished"] is True and 40 < r["thought_steps"] < len(r["steps"])
        assert r["correct"] is trace["correct"], (r["id"], r["final_answer"], trace["answer"])
        assert not any("<think>" in s or "</think>" in s for s in r["steps"])
        assert "<think>\n" + "".join(s + j for s, j in zip(r["steps"], r["step_joins"])) + r["steps"][-1] \
            == trace["response"].rstrip()
        assert r["generator"]["thought_tokens"] + r["generator"]["answer_tokens"] == r["generator"]["generated_tokens"]

    claims = {responses[0].id: 20, responses[1].id: 30}  # first errors inside the thought
    verdict = "<think>\nChecking paragraph by paragraph.\n</think>\n\nThe earliest error: \\boxed{{{}}}."
    by_steps = {tuple(r.steps): r.id for r in responses}
    judge = JudgeStage(ForcingEngine(engine, lambda r: verdict.format(claims[next(
        rid for steps, rid in by_steps.items() if steps[0] in r.messages[-1]["content"])])),
        prompt="processbench", max_tokens=200, engine_info={"model": "tiny-qwen3"})
    judged = [r for o in judge.process(responses) for r in o.records]
    assert judge.reasoning == "think" and [j.judge.first_error for j in judged] == list(claims.values())
    judged_path = tmp_path / "judged.jsonl"
    judged_path.write_text("".join(json.dumps(j.dump()) + "\n" for j in judged))

    # Completions: a prefix that ends before the claimed step reaches the gold answer; one at or
    # after it does not for the first response (confirmed), does for the second (refuted at j);
    # one completion of each step is cut inside its thought.
    seen_prompts = []

    def complete(request):
        prompt = engine.render(request)
        seen_prompts.append(prompt)
        rid = next(rid for rid, text in by_problem_id.items() if request.messages[-2]["content"] == text)
        step = request.messages[-1]["content"].count("\n\n")  # grows with the step continued
        index = int(request.key.split("\x00")[-1])
        if index == 1:
            return "Hmm, let me think more about it. " * 10  # cut at max tokens, inside the thought
        gold = answers[rid]
        right = step < steps_at[rid] or rid == responses[1].id
        return f"So that settles it.\n</think>\n\nThe answer is \\boxed{{{gold if right else 'wrong'}}}."

    by_problem_id = {r.id: r.problem for r in responses}
    answers = {r.id: t["answer"] for r, t in zip(responses, traces)}
    steps_at = {}
    for r in responses:  # the paragraph count of the prefix that ends at the claimed step
        from prm_annotate.steps import prefix_text

        steps_at[r.id] = ("<think>\n" + prefix_text(r.steps, r.step_joins, claims[r.id])).count("\n\n")
    rollout = RolloutStage(ForcingEngine(engine, complete), k=2, strategy="verify", judged=str(judged_path),
                           max_tokens=120, system_prompt="none", engine_info={"model": "tiny-qwen3"})
    outs = list(rollout.process([RolloutStage.input_model.model_validate(r.dump()) for r in responses]))
    rollout.close()
    assert all(o.error is None for o in outs), [o.error for o in outs]
    mcs = [o.records[0].dump()["mc"] for o in outs]
    assert mcs[0]["verified"] == "confirmed" and mcs[0]["first_error"] == claims[responses[0].id]
    assert mcs[1]["verified"].startswith("refuted")
    assert mcs[0]["cut_in_thought"] >= 1 and all(m["max_tokens"] == 120 for m in mcs)
    assert seen_prompts and all(p.count("<think>") == 1 for p in seen_prompts)

    consensus = ConsensusStage({j.id: Judged.model_validate(j.dump()) for j in judged}, "r", "j")
    kept = [r for o in consensus.process([o.records[0] for o in outs]) for r in o.records]
    assert [k.id for k in kept] == [responses[0].id]
    k = kept[0].dump()
    assert len(k["step_joins"]) == len(k["steps"]) - 1 == claims[responses[0].id] and k["thought_steps"] == len(k["steps"])
