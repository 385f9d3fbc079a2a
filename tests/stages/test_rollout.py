"""rollout: label arithmetic on hand-made cases (scripted engine, real grader), the strategy seam,
seeds, failures; then the stage on the tiny model through the real vLLM engine."""
from __future__ import annotations

import pytest

from prm_annotate.errors import UsageError
from prm_annotate.io.jsonl import iter_jsonl
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.stages.rollout import RolloutInput, RolloutStage
from prm_annotate.strategies import PlanResult, first_error_of, get_strategy
from testing.scripted_engine import ScriptedEngine

STEPS = ["We start with 3 apples.", "Then 3 + 5 = 8.", "Then 8 * 2 = 17.", "So the answer is \\boxed{17}."]


def response(rid="p/0", steps=STEPS, correct=False, answer="16", **extra) -> RolloutInput:
    return RolloutInput.model_validate({"id": rid, "problem": "Tom has 3 apples...", "answer": answer,
                                        "steps": list(steps), "correct": correct, **extra})


def scripted(stage: RolloutStage, records, right: dict[str, dict[int, set[int]]], fail=()):
    """An engine whose completion (step, index) of record id is right iff index in right[id][step]."""
    by_seed = {}
    for r in records:
        for step in range(len(r.steps)):
            for j in range(stage.config.k):
                by_seed[stage.completion_seed(r.id, step, j)] = (r.id, step, j)

    def script(request):
        rid, step, j = by_seed[request.sampling.seed]
        if (rid, step, j) in fail:
            return RuntimeError("server said no")
        good = j in right.get(rid, {}).get(step, set())
        return f"Let me finish.\n\nThe answer is \\boxed{{{16 if good else 99}}}."

    engine = ScriptedEngine(script)
    stage.engine = engine
    return engine


def run(stage, records):
    return {o.id: o for o in stage.process(records)}


def make(k=4, **kw) -> RolloutStage:
    return RolloutStage(ScriptedEngine(lambda r: ""), k=k, **kw)


def test_hard_labels_scores_and_first_error():
    stage = make(k=4)
    rec = response()
    engine = scripted(stage, [rec], {"p/0": {0: {0, 1}, 1: {3}, 2: set()}})
    out = run(stage, [rec])["p/0"]
    assert out.error is None
    mc = out.records[0].dump()["mc"]
    assert mc["scores"] == [0.5, 0.25, 0.0, 0.0]  # the last from the response's own (wrong) answer
    assert mc["first_error"] == 2
    assert mc["completions"] == 12 and mc["k"] == 4 and mc["strategy"] == "exhaustive"
    assert mc["generated_tokens"] == 12 * 7  # the scripted engine counts words as tokens
    assert len(engine.requests) == 12  # 3 probed steps x K; the last step is not rolled out
    assert {r.messages[-1]["content"] for r in engine.requests} == {
        "\n\n".join(STEPS[: i + 1]) + "\n\n" for i in range(3)}
    assert all(r.continue_final and r.n == 1 for r in engine.requests)


def test_threshold_moves_the_first_error():
    for threshold, expected in [(0.0, 2), (0.25, 1), (0.5, 0)]:
        stage = make(k=4, threshold=threshold)
        rec = response()
        scripted(stage, [rec], {"p/0": {0: {0, 1}, 1: {3}, 2: set()}})
        assert run(stage, [rec])["p/0"].records[0].dump()["mc"]["first_error"] == expected, threshold


def test_last_step_decided_by_the_response_own_answer():
    stage = make(k=2)
    right = {"a": {0: {0}, 1: {0, 1}, 2: {1}}, "b": {0: {0}, 1: {0, 1}, 2: {1}}}
    recs = [response("a", correct=True), response("b", correct=False)]
    scripted(stage, recs, right)
    out = run(stage, recs)
    assert out["a"].records[0].dump()["mc"]["scores"] == [0.5, 1.0, 0.5, 1.0]
    assert out["a"].records[0].dump()["mc"]["first_error"] == -1
    assert out["b"].records[0].dump()["mc"]["scores"] == [0.5, 1.0, 0.5, 0.0]
    assert out["b"].records[0].dump()["mc"]["first_error"] == 3


def test_ungraded_response_is_graded_here():
    stage = make(k=1)
    rec = response("u", steps=["3 + 5 = 8.", "8 * 2 = 16, so \\boxed{16}."], correct=None)
    scripted(stage, [rec], {"u": {0: {0}}})
    mc = run(stage, [rec])["u"].records[0].dump()["mc"]
    assert mc["last_correct"] is True and mc["last_step"] == "graded here" and mc["first_error"] == -1


def test_single_step_response_needs_no_rollout():
    stage = make(k=8)
    rec = response("one", steps=["\\boxed{16}"], correct=True)
    engine = scripted(stage, [rec], {})
    mc = run(stage, [rec])["one"].records[0].dump()["mc"]
    assert engine.requests == [] and mc["scores"] == [1.0] and mc["first_error"] == -1 and mc["completions"] == 0


def test_soft_label_keeps_scores_and_hard_first_error():
    stage = make(k=4, label="soft", threshold=0.0)
    rec = response()
    scripted(stage, [rec], {"p/0": {0: {0, 1}, 1: {3}, 2: set()}})
    mc = run(stage, [rec])["p/0"].records[0].dump()["mc"]
    assert mc["label"] == "soft" and mc["scores"] == [0.5, 0.25, 0.0, 0.0] and mc["first_error"] == 2


def test_a_failed_request_fails_only_its_record_and_never_writes_partial_labels():
    stage = make(k=2)
    recs = [response("ok", correct=True), response("bad", correct=True)]
    scripted(stage, recs, {"ok": {0: {0}, 1: {0}, 2: {0}}, "bad": {0: {0}, 1: {0}, 2: {0}}}, fail={("bad", 1, 1)})
    out = run(stage, recs)
    assert out["ok"].error is None and out["ok"].records[0].dump()["mc"]["first_error"] == -1
    assert out["bad"].records == [] and "server said no" in out["bad"].error


def test_engine_exception_fails_the_batch_not_the_run():
    class Broken(ScriptedEngine):
        def generate(self, requests):
            raise RuntimeError("EngineCore died")

    stage = RolloutStage(Broken(lambda r: ""), k=2)
    out = run(stage, [response("x"), response("y")])
    assert all(o.error and "EngineCore died" in o.error for o in out.values())


def test_grader_errors_count_as_not_correct():
    class FlakyGrader:
        def start(self, wait=True):
            pass

        def grade_many(self, pairs, cut=None):
            from types import SimpleNamespace as V
            return [V(final_answer=None, correct=None, error="timeout") if "TIMEOUT" in t
                    else V(final_answer="16", correct=True, error=None) for _, t in pairs]

    stage = RolloutStage(ScriptedEngine(lambda r: "TIMEOUT" if r.sampling.seed % 2 else "\\boxed{16}"), k=4,
                         grader=FlakyGrader())
    rec = response("g", correct=True)
    mc = run(stage, [rec])["g"].records[0].dump()["mc"]
    seeds = [[stage.completion_seed("g", s, j) % 2 for j in range(4)] for s in range(3)]
    assert mc["scores"][:3] == [sum(1 for b in row if not b) / 4 for row in seeds]
    assert mc["grade_errors"] == sum(map(sum, seeds))


def test_seeds_are_prefix_stable_across_k():
    small, large = make(k=8), make(k=16)
    assert [small.completion_seed("r/1", 2, j) for j in range(8)] == [large.completion_seed("r/1", 2, j) for j in range(8)]
    assert len({large.completion_seed("r/1", s, j) for s in range(5) for j in range(16)}) == 80
    assert derive_seed("a/1", 2) != derive_seed("a", "1/2") and 0 < derive_seed("x") < 2 ** 31
    assert make(k=8, seed=1).completion_seed("r/1", 2, 0) != small.completion_seed("r/1", 2, 0)


def test_strategy_seam_runs_several_rounds():
    """A toy two-round strategy (step 0 first, the rest only if step 0 was ever right) shows the stage
    runs rounds, batches all records' probes of a round into one engine call, and keeps nulls."""
    from prm_annotate.strategies import Probe

    class TwoRound:
        name, supports_soft = "two-round", False

        def plan(self, n_steps, k, threshold, last_correct):
            class P:
                round, seen = 0, {}

                def next_round(self):
                    self.round += 1
                    if self.round == 1:
                        return [Probe(0, j) for j in range(k)]
                    if self.round == 2 and any(self.seen.get(0, [])):
                        return [Probe(s, j) for s in range(1, n_steps - 1) for j in range(k)]
                    return []

                def observe(self, results):
                    for r in results:
                        self.seen.setdefault(r.probe.step, []).append(r.correct is True)

                def result(self):
                    scores = [sum(v) / len(v) if (v := self.seen.get(s)) else None for s in range(n_steps - 1)]
                    scores.append(1.0 if last_correct else 0.0)
                    return PlanResult(scores, first_error_of(scores, threshold))

            return P()

    stage = RolloutStage(ScriptedEngine(lambda r: ""), k=2, strategy=TwoRound())
    recs = [response("a", correct=True), response("b", correct=True)]
    engine = scripted(stage, recs, {"a": {0: {0}, 1: {0}, 2: {1}}, "b": {0: set()}})
    out = run(stage, recs)
    assert engine.calls == 2
    assert out["a"].records[0].dump()["mc"]["scores"] == [0.5, 0.5, 0.5, 1.0]
    assert out["b"].records[0].dump()["mc"]["scores"] == [0.0, None, None, 1.0]
    assert out["b"].records[0].dump()["mc"]["first_error"] == 0


def test_unknown_strategy_and_soft_refusal():
    with pytest.raises(UsageError, match="unknown"):
        get_strategy("nope")
    # Soft labels need all K completions at every step: only exhaustive gives them.
    for name in ("early-stop", "binary", "scan"):
        with pytest.raises(UsageError, match="cannot give --label soft"):
            get_strategy(name, "soft")
        assert get_strategy(name, "hard").name == name
    assert get_strategy("exhaustive", "soft").name == "exhaustive"


def test_run_stage_writes_valid_rollouts(tmp_path):
    from prm_annotate.io.jsonl import dumps
    from prm_annotate.records import Rollout

    src = tmp_path / "responses.jsonl"
    src.write_bytes(b"".join(dumps(response(f"p/{i}", correct=bool(i % 2)).dump()) for i in range(5)))
    stage = RolloutStage(ScriptedEngine(lambda r: "\\boxed{16}" if r.sampling.seed % 3 else "\\boxed{1}"), k=3)
    summary = run_stage(stage, RunOptions(str(src), str(tmp_path / "out.jsonl"), quiet=True, batch_size=2))
    assert summary.exit_code == 0 and summary.written == 5
    rows = [Rollout.model_validate(obj) for _, obj in iter_jsonl(tmp_path / "out.jsonl")]
    assert [r.id for r in rows] == [f"p/{i}" for i in range(5)]
    assert stage.stats["completions"] == 5 * 3 * 3


@pytest.mark.engine
def test_rollout_on_the_tiny_model(vllm_engine, tmp_path):
    """Real vLLM: every probe runs, texts are reproducible per seed, prefix cache is used."""
    import time

    recs = [response(f"t/{i}", steps=[f"Tom has {i} apples.", f"Then {i} + 2 = {i + 2}.", f"So \\boxed{{{i + 2}}}."],
                     answer=str(i + 2), correct=True) for i in range(4)]
    stage = RolloutStage(vllm_engine, k=4, max_tokens=24, seed=7)
    started = time.monotonic()
    out = run(stage, recs)
    seconds = time.monotonic() - started
    for rec in recs:
        mc = out[rec.id].records[0].dump()["mc"]
        assert mc["completions"] == 8 and len(mc["scores"]) == 3 and mc["scores"][-1] == 1.0
        assert all(s in (0.0, 0.25, 0.5, 0.75, 1.0) for s in mc["scores"])
        assert mc["first_error"] == first_error_of(mc["scores"], 0.0)
        assert mc["generated_tokens"] > 0
    assert stage.stats["cached_prompt_tokens"] > 0
    # The same seeds give the same completions in another batch composition.
    again = RolloutStage(vllm_engine, k=4, max_tokens=24, seed=7)
    assert run(again, recs[2:3])[recs[2].id].records[0].dump()["mc"] == out[recs[2].id].records[0].dump()["mc"]
    print(f"tiny rollout: 4 responses x 2 steps x K=4 in {seconds:.2f} s, "
          f"{stage.stats['generated_tokens']} tokens, {stage.stats['cached_prompt_tokens']} of "
          f"{stage.stats['prompt_tokens']} prompt tokens cached")


# ---------------------------------------------------------------- the completer's system prompt

def sampled(rid="p/0", prompt="step", sha=None, **extra) -> dict:
    """A response as `sample` writes it under the built-in system prompt `prompt`."""
    from prm_annotate.stages.common import system_prompt_file

    gen = {"model": "m", "system_prompt": prompt, "system_prompt_sha256": sha or system_prompt_file(prompt).sha256}
    return {**response(rid, **extra).dump(), "generator": gen}


def system_of(engine) -> set[str]:
    return {r.messages[0]["content"] if r.messages[0]["role"] == "system" else "" for r in engine.requests}


def test_the_completer_continues_under_the_prompt_each_response_was_sampled_under():
    from prm_annotate.stages.common import system_prompt_file

    stage = make(k=1)
    model = stage.input_model
    recs = [model.model_validate(sampled("a", "step")), model.model_validate(sampled("b", "none")),
            model.model_validate(sampled("c", "qwen25-math-cot"))]
    engine = scripted(stage, recs, {})
    out = run(stage, recs)
    by_id = {rid: {r.messages[0]["content"] if r.messages[0]["role"] == "system" else None
                   for r in engine.requests if stage.completion_seed(rid, 0, 0) == r.sampling.seed} for rid in "abc"}
    assert by_id == {"a": {system_prompt_file("step").text.strip()}, "b": {None},
                     "c": {"Please reason step by step, and put your final answer within \\boxed{}."}}
    assert [out[r].records[0].dump()["mc"]["system_prompt"] for r in "abc"] == ["step", "none", "qwen25-math-cot"]
    assert stage.settings()["system_prompt"] == "the responses' own"
    assert set(stage.settings()["system_prompts_used"]) == {"step", "none", "qwen25-math-cot"}


def test_a_response_is_found_by_its_prompt_sha256_and_one_not_written_by_sample_gets_the_default(tmp_path):
    from prm_annotate.stages.common import system_prompt_file

    stage = make(k=1)
    # an old record: only the sha256 of the step prompt, no name
    old = sampled("old", "step")
    del old["generator"]["system_prompt"]
    renamed = sampled("renamed", "step")
    renamed["generator"]["system_prompt"] = str(tmp_path / "gone.txt")  # a file no longer there, same text
    bare = response("bare").dump()  # no generator: the default
    recs = [stage.input_model.model_validate(r) for r in (old, renamed, bare)]
    assert [stage.prompts.for_record(r).name for r in recs] == ["step", "step", "qwen25-math-cot"]
    assert stage.prompts.for_record(recs[2]).sha256 == system_prompt_file(None).sha256


def test_a_different_or_unknown_system_prompt_is_refused_unless_forced(tmp_path):
    from pydantic import ValidationError

    changed = sampled("x", "step", sha="0" * 64)  # a prompt that is nowhere now
    with pytest.raises(ValidationError, match="neither built in nor found as it was: give it with --system-prompt"):
        make(k=1).input_model.model_validate(changed)
    given = make(k=1, system_prompt="qwen25-math-cot")
    with pytest.raises(ValidationError, match="sampled under the system prompt 'step'.*--force-system-prompt"):
        given.input_model.model_validate(sampled("y", "step"))
    assert given.input_model.model_validate(sampled("z", "qwen25-math-cot"))  # the same one is fine
    forced = make(k=1, system_prompt="qwen25-math-cot", force_system_prompt=True)
    rec = forced.input_model.model_validate(sampled("y", "step"))
    scripted(forced, [rec], {})
    mc = run(forced, [rec])["y"].records[0].dump()["mc"]
    assert mc["system_prompt"] == "qwen25-math-cot" and mc["system_prompt_sha256"] != rec.generator["system_prompt_sha256"]
    with pytest.raises(UsageError, match="--force-system-prompt needs --system-prompt"):
        make(k=1, force_system_prompt=True)


def test_rollout_refuses_a_different_system_prompt_with_exit_2_before_the_engine_starts(tmp_path):
    import subprocess
    import sys

    from testing.jsonl_files import write_jsonl

    src = write_jsonl(tmp_path / "responses.jsonl", [sampled("p/0", "step"), sampled("p/1", "qwen25-math-cot")])
    out = tmp_path / "rollouts.jsonl"
    cli = subprocess.run([sys.executable, "-m", "prm_annotate", "rollout", str(src), "-o", str(out), "--model",
                          str(tmp_path / "no-model"), "--system-prompt", "step"], capture_output=True, text=True,
                         timeout=120)
    assert cli.returncode == 2, cli.stderr
    last = cli.stderr.strip().splitlines()[-1]
    assert last.startswith(f"prm-annotate: error: {src}:2: ") and "'qwen25-math-cot'" in last, last
    assert "--force-system-prompt" in last and not out.exists()


# ---------------------------------------------------------------- completions cut at --max-tokens

def cut_engine(stage: RolloutStage, record, cut: dict[int, set[int]], right: dict[int, set[int]]):
    """Completion j of step s stops at the budget iff j in cut[s]; its text reaches the gold answer
    iff j in right[s] (a cut text may hold an answer: it wrote one, then went on)."""
    from prm_annotate.engines.base import GenerationResult

    where = {stage.completion_seed(record.id, s, j): (s, j) for s in range(len(record.steps)) for j in range(stage.config.k)}

    def script(request):
        s, j = where[request.sampling.seed]
        text = f"\n\nThe answer is \\boxed{{{16 if j in right.get(s, ()) else 99}}}"
        reason = "length" if j in cut.get(s, ()) else "stop"
        return GenerationResult(key="", texts=[text], finish_reasons=[reason], generated_tokens=5)

    stage.engine = ScriptedEngine(script)


@pytest.mark.parametrize("rule,scores,first_error", [
    ("graded", [0.5, 0.25, 0.0, 0.0], 2),  # a cut text is graded as written
    ("wrong", [0.25, 0.0, 0.0, 0.0], 1),  # step 1's only right completion was cut
    ("right", [0.75, 0.25, 0.5, 0.0], 3),  # a step is never blamed on the budget
])
def test_cut_completions_are_counted_per_step_and_count_as_chosen(rule, scores, first_error):
    stage = make(k=4, cut_completions=rule)
    rec = response()
    cut_engine(stage, rec, cut={0: {1, 2}, 1: {3}, 2: {0, 1}}, right={0: {0, 1}, 1: {3}, 2: set()})
    mc = run(stage, [rec])["p/0"].records[0].dump()["mc"]
    assert mc["cut"] == [2, 1, 2, None] and mc["truncated"] == 5 and mc["cut_completions"] == rule
    assert mc["scores"] == scores and mc["first_error"] == first_error
    assert stage.stats["completions_cut"] == 5
    assert stage.stats["first_errors_at_cut_steps"] == (first_error < 3)


def test_first_errors_on_cuts_are_counted_for_the_summary():
    stage = make(k=2)
    recs = [response("cut-step"), response("clean"),
            RolloutInput.model_validate({**response("cut-response").dump(),
                                         "generator": {"finish_reason": "length"}})]
    where = {stage.completion_seed(r.id, s, j): (r.id, s, j) for r in recs for s in range(3) for j in range(2)}
    from prm_annotate.engines.base import GenerationResult

    def script(request):
        rid, s, j = where[request.sampling.seed]
        wrong = (rid == "cut-step" and s == 1) or (rid == "clean" and s == 2)
        reason = "length" if rid == "cut-step" and (s, j) == (1, 0) else "stop"
        return GenerationResult(key="", texts=[f"\\boxed{{{99 if wrong else 16}}}"], finish_reasons=[reason])

    stage.engine = ScriptedEngine(script)
    out = run(stage, recs)
    assert [out[r.id].records[0].dump()["mc"]["first_error"] for r in recs] == [1, 2, 3]
    assert stage.stats["first_errors_at_cut_steps"] == 1 and stage.stats["first_errors_at_cut_responses"] == 1
    assert stage.stats["first_error_found"] == 3


def test_an_unknown_cut_rule_is_refused():
    with pytest.raises(UsageError, match="--cut-completions maybe: choose graded, wrong, right"):
        make(cut_completions="maybe")


@pytest.mark.engine
def test_rollout_on_the_tiny_model_follows_the_sampled_prompt_and_counts_cuts(vllm_engine, tmp_path):
    """Real vLLM through the runner: responses sampled under the step prompt are continued under
    it by default (the same completions as naming it), under another only when forced (other
    completions); a 4-token budget cuts every completion, and every step says so."""
    from prm_annotate.records import Problem
    from prm_annotate.stages.sample import SampleStage
    from testing.jsonl_files import read_jsonl, write_jsonl

    problems = [Problem.model_validate({"id": f"q{i}", "problem": f"Ann has {i} pens and buys 2 more. How many?",
                                        "answer": str(i + 2)}) for i in range(3)]
    sample = SampleStage(vllm_engine, n=1, max_tokens=24, seed=1, step_sep=" ", system_prompt="step")
    responses = [r.dump() for o in sample.process(problems) for r in o.records]
    sample.close()
    assert {r["generator"]["system_prompt"] for r in responses} == {"step"}
    src = write_jsonl(tmp_path / "responses.jsonl", responses)

    def rollout(name: str, **kw) -> list[dict]:
        stage = RolloutStage(vllm_engine, k=2, max_tokens=4, seed=3, step_sep=" ", **kw)
        summary = run_stage(stage, RunOptions(str(src), str(tmp_path / f"{name}.jsonl"), quiet=True))
        assert summary.exit_code == 0, summary.failures
        return read_jsonl(tmp_path / f"{name}.jsonl")

    own, named = rollout("own"), rollout("named", system_prompt="step")
    forced = rollout("forced", system_prompt="qwen25-math-cot", force_system_prompt=True)
    assert own == named and {r["mc"]["system_prompt"] for r in own} == {"step"}
    assert {r["mc"]["system_prompt"] for r in forced} == {"qwen25-math-cot"}
    for row in own:
        n = len(row["steps"])
        assert row["mc"]["cut"] == [2] * (n - 1) + [None] and row["mc"]["truncated"] == 2 * (n - 1)
    with pytest.raises(Exception, match="sampled under the system prompt 'step'"):
        rollout("refused", system_prompt="qwen25-math-cot")
    assert not (tmp_path / "refused.jsonl").exists() or not read_jsonl(tmp_path / "refused.jsonl")


def test_keep_completions_keeps_the_first_texts_of_each_probed_step_with_their_verdicts():
    rec = response()
    right = {"p/0": {0: {0, 1}, 1: {3}, 2: set()}}
    stage = make(k=4, keep_completions=2)
    scripted(stage, [rec], right)
    mc = run(stage, [rec])["p/0"].records[0].dump()["mc"]
    # The default keeps none and writes no field: records are as before.
    plain = make(k=4)
    scripted(plain, [rec], right)
    base = run(plain, [rec])["p/0"].records[0].dump()["mc"]
    assert "kept_completions" not in base and base["scores"] == mc["scores"]
    kept = mc["kept_completions"]
    assert len(kept) == 4 and kept[3] is None  # the last step is not rolled out
    for step in range(3):
        assert len(kept[step]) == 2
        for j, c in enumerate(kept[step]):  # completions 0 and 1 of the step, in order
            good = j in right["p/0"][step]
            assert c == {"text": f"Let me finish.\n\nThe answer is \\boxed{{{16 if good else 99}}}.",
                         "correct": good, "cut": False}
    with pytest.raises(UsageError):
        make(keep_completions=-1)


def test_recovery_rule_writes_mc_recovery_beside_the_hard_first_error():
    stage = make(k=4, recovery_rule="soft-drop")
    rec = response()
    # 1.0 -> 0.25 (a slip hard MC calls right) -> 1.0 (its correction) -> the right answer.
    recs = [response(correct=True)]
    scripted(stage, recs, {"p/0": {0: {0, 1, 2, 3}, 1: {3}, 2: {0, 1, 2, 3}}})
    mc = run(stage, recs)["p/0"].records[0].dump()["mc"]
    assert mc["scores"] == [1.0, 0.25, 1.0, 1.0] and mc["first_error"] == -1
    assert mc["recovery"] == {"slips": [{"step": 1, "corrected_at": 2}]}
    assert mc["recovery_rule"] == {"name": "soft-drop", "drop": 0.25}
    assert stage.settings()["recovery_rule"] == {"name": "soft-drop", "drop": 0.25}
    # Without the option, the record and the manifest are as before.
    plain = make(k=4)
    scripted(plain, [rec], {"p/0": {0: {0, 1, 2, 3}, 1: {3}, 2: {0, 1, 2, 3}}})
    assert "recovery" not in run(plain, [rec])["p/0"].records[0].dump()["mc"]
    assert "recovery_rule" not in plain.settings() and "recovery_drop" not in plain.settings()
