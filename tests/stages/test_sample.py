"""sample: ids, seeds, steps, grading, blank texts and failures (scripted engine, real grader);
then the stage on the tiny model through real vLLM."""
from __future__ import annotations

import pytest

from prm_annotate.records import Problem, Response
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.stages.sample import SampleStage
from testing.scripted_engine import ScriptedEngine

PROBLEMS = [Problem.model_validate({"id": "gsm-1", "problem": "Tom has 3 apples and gets 5 more. How many?",
                                    "answer": 8, "source": "hand"}),
            Problem.model_validate({"id": "gsm-2", "problem": "What is 2 + 2?", "answer": "4"})]


def answer_by_seed(request):
    return f"First, think.\n\n\nThen add.\n\nSo \\boxed{{{8 if request.sampling.seed % 2 else 5}}}"


def test_n_responses_per_problem_with_their_own_seeds_steps_and_grades():
    engine = ScriptedEngine(answer_by_seed)
    stage = SampleStage(engine, n=3, seed=11, temperature=0.5, max_tokens=99)
    outs = list(stage.process(PROBLEMS))
    assert [o.id for o in outs] == ["gsm-1", "gsm-2"]
    rows = [Response.model_validate(r) for o in outs for r in o.records]
    assert [r.id for r in rows] == ["gsm-1/0", "gsm-1/1", "gsm-1/2", "gsm-2/0", "gsm-2/1", "gsm-2/2"]
    assert stage.output_ids(PROBLEMS[0]) == ["gsm-1/0", "gsm-1/1", "gsm-1/2"]
    first = rows[0].dump()
    assert first["problem_id"] == "gsm-1" and first["answer"] == "8" and first["source"] == "hand"
    assert first["steps"][:2] == ["First, think.", "\nThen add."] and len(first["steps"]) == 3
    seeds = [r.sampling.seed for r in engine.requests]
    assert len(set(seeds)) == 6 and seeds[0] == derive_seed("sample", "gsm-1", 0, 11)
    for r in rows:
        gen = r.dump()["generator"]
        assert gen["seed"] in seeds and gen["temperature"] == 0.5 and gen["max_tokens"] == 99
        assert gen["finish_reason"] == "stop" and gen["model"] == "scripted"
        expect = "8" if gen["seed"] % 2 else "5"
        assert r.final_answer == expect and r.correct == (expect == r.answer)
    assert all(req.messages[0]["role"] == "system" and "\\boxed{}" in req.messages[0]["content"] for req in engine.requests)
    assert stage.stats["responses"] == 6


def test_blank_text_is_redrawn_with_a_new_seed_and_a_hopeless_problem_fails():
    blank_once = {derive_seed("sample", "gsm-1", 1, 0)}

    def script(r):
        if r.sampling.seed in blank_once or "2 + 2" in r.messages[-1]["content"]:
            return "  \n\n  "
        return "\\boxed{8}"

    stage = SampleStage(ScriptedEngine(script), n=2, empty_retries=2)
    out = {o.id: o for o in stage.process(PROBLEMS)}
    ok = out["gsm-1"].records
    assert all(isinstance(r, Response) for r in ok)  # the stage makes its record model
    assert [r.generator["attempt"] for r in ok] == [0, 1]
    assert ok[1].generator["seed"] == derive_seed("sample", "gsm-1", 1, 0, "retry", 1)
    assert out["gsm-2"].records == [] and "blank text in all 3 attempts" in out["gsm-2"].error
    assert stage.stats["blank_samples"] == 1 + 2 * 3


def test_engine_failure_fails_the_problem_only():
    stage = SampleStage(ScriptedEngine(lambda r: RuntimeError("boom") if "2 + 2" in r.messages[-1]["content"]
                                       else "\\boxed{8}"), n=2)
    out = {o.id: o for o in stage.process(PROBLEMS)}
    assert len(out["gsm-1"].records) == 2 and out["gsm-2"].error and "boom" in out["gsm-2"].error


def test_the_ray_drivers_copy_builds_without_an_engine():
    """The Ray driver builds its stage with build(None): it answers for ids and settings as the
    workers' copies do (which have an engine), the model named by engine_info."""
    info = {"engine": "vllm", "model": "m", "dtype": "float32"}
    driver = SampleStage(None, n=3, seed=2, engine_info=info)
    worker = SampleStage(ScriptedEngine(answer_by_seed, model="m"), n=3, seed=2, engine_info=info)
    assert driver.settings() == worker.settings() and driver.settings()["model"] == "m"
    assert driver.output_ids(PROBLEMS[0]) == worker.output_ids(PROBLEMS[0]) == ["gsm-1/0", "gsm-1/1", "gsm-1/2"]
    driver.close()


def test_custom_separator_and_system_prompt(tmp_path):
    from prm_annotate.io.prompt_files import load_prompt

    path = tmp_path / "sys.txt"
    path.write_text("Be brief.\n")
    engine = ScriptedEngine(lambda r: "a\nb\n\\boxed{8}")
    stage = SampleStage(engine, n=1, step_sep="\n", system_prompt=str(path))
    [out] = list(stage.process(PROBLEMS[:1]))
    assert out.records[0].dump()["steps"] == ["a", "b", "\\boxed{8}"]
    assert engine.requests[0].messages[0]["content"] == "Be brief."
    assert stage.settings()["system_prompt_sha256"] == load_prompt(str(path)).sha256
    assert out.records[0].dump()["generator"]["system_prompt"] == str(path)


def test_the_default_system_prompt_is_qwen25_math_cot_and_the_step_prompt_is_a_choice():
    """The paper's policies (Qwen2.5-Math-Instruct) get the prompt they were trained with, verbatim
    (QwenLM/Qwen2.5-Math's README and its evaluation's `qwen25-math-cot`); the record names it."""
    texts = {}
    for choice in (None, "qwen25-math-cot", "step"):
        engine = ScriptedEngine(lambda r: "\\boxed{8}")
        [out] = list(SampleStage(engine, n=1, system_prompt=choice).process(PROBLEMS[:1]))
        gen = out.records[0].dump()["generator"]
        texts[choice] = (engine.requests[0].messages[0]["content"], gen["system_prompt"], gen["system_prompt_sha256"])
    assert texts[None] == texts["qwen25-math-cot"]
    assert texts[None][:2] == ("Please reason step by step, and put your final answer within \\boxed{}.", "qwen25-math-cot")
    assert texts["step"][1] == "step" and "paragraph" in texts["step"][0]
    assert SampleStage(ScriptedEngine(lambda r: ""), n=1).config.sampling.max_tokens == 2048


@pytest.mark.engine
def test_sample_on_the_tiny_model_is_reproducible_per_seed(vllm_engine):
    stage = SampleStage(vllm_engine, n=3, max_tokens=32, seed=5)
    outs = list(stage.process(PROBLEMS))
    assert all(o.error is None for o in outs)
    rows = [Response.model_validate(r) for o in outs for r in o.records]
    assert len(rows) == 6 and all(r.steps for r in rows)
    assert all(r.dump()["generator"]["generated_tokens"] > 0 for r in rows)
    assert len({tuple(r.steps) for r in rows}) > 1  # different seeds, different texts
    # one problem alone, in a different batch: the same texts for the same ids
    again = {r.id: r.steps for o in SampleStage(vllm_engine, n=3, max_tokens=32, seed=5).process(PROBLEMS[1:])
             for r in o.records}
    assert again == {r.id: r.steps for r in rows if r.problem_id == "gsm-2"}
