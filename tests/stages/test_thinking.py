"""Thinking policies: sample tells the thought from the answer, rollout continues inside a thought,
an unfinished thought or a completion with two different answers is never graded or labelled, and
`--reasoning auto` over HTTP finds a thought inside the content from the first answer (or stops).

The engine here is scripted (the texts are given) but the chat templates are real: a Qwen3-like
and an R1-like template (testing/thinking_models.py) rendered by a real tokenizer, as the
in-process engine renders them. tests/stages/test_thinking_engine.py runs real vLLM."""
from __future__ import annotations

from dataclasses import replace

import pytest

from prm_annotate.engines.base import GenerationRequest, GenerationResult
from prm_annotate.engines.vllm_engine import render_prompt
from prm_annotate.errors import UsageError
from prm_annotate.export.examples import example_from
from prm_annotate.grading.grader import Grader
from prm_annotate.thinking.grading import TWO_ANSWERS, UNFINISHED, grade_traces
from prm_annotate.records import Problem, Response
from prm_annotate.stages.grade import GradeStage
from prm_annotate.stages.judge import JudgeStage
from prm_annotate.stages.rollout import RolloutStage
from prm_annotate.stages.sample import SampleStage
from prm_annotate.thinking.probe import UNANSWERED
from prm_annotate.steps import join_steps, prefix_text
from prm_annotate.segmenting import segment_trace
from prm_annotate.segmenting.paragraphs import Paragraphs
from prm_annotate.thinking.tags import CLOSED, MODEL, OPEN, prompt_thought, read_trace
from testing.scripted_engine import ScriptedEngine
from testing.thinking_models import TEMPLATES


@pytest.fixture(scope="module")
def tokenizer():
    from testing.tiny_model import THINK_TOKENS, build_tokenizer

    return build_tokenizer(extra_tokens=THINK_TOKENS)


class TemplateEngine(ScriptedEngine):
    """A scripted engine that renders prompts with a real tokenizer's chat template, as VLLMEngine does."""

    def __init__(self, script, tokenizer, template: str):
        super().__init__(script)
        self.tokenizer = tokenizer
        self.template = template

    def chat_template_thinks(self) -> bool:
        return "<think>" in self.template

    def generation_prompt(self, messages) -> str:
        return self.tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                  add_generation_prompt=True, chat_template=self.template)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))


THOUGHT = "Let me add 3 and 5.\n\n3 + 5 = 8.\n\nCheck: 8 - 5 = 3, fine."
QWEN3_TEXT = f"<think>\n{THOUGHT}\n</think>\n\nThe sum is 8.\n\nSo the answer is \\boxed{{8}}."
R1_TEXT = f"{THOUGHT}\n</think>\n\nThe sum is 8.\n\nSo the answer is \\boxed{{8}}."


def problem(pid: str = "p", answer: str = "8") -> Problem:
    return Problem.model_validate({"id": pid, "problem": "What is 3 + 5?", "answer": answer})


# ------------------------------------------------------------------ reading a trace


def test_a_trace_is_read_by_where_the_template_leaves_the_thought():
    assert read_trace(QWEN3_TEXT, MODEL).answer == read_trace(R1_TEXT, OPEN).answer == "\n\nThe sum is 8.\n\nSo the answer is \\boxed{8}."
    assert read_trace(QWEN3_TEXT, MODEL).thought.strip() == read_trace(R1_TEXT, OPEN).thought.strip() == THOUGHT
    cut = "Let me add 3 and 5.\n\nMaybe \\boxed{9}"
    assert not read_trace(cut, OPEN).finished and read_trace(cut, OPEN).answer == ""
    assert not read_trace("<think>\n" + cut, MODEL).finished
    # no thought opened anywhere: the whole text is the answer; a closed prompt: always the answer
    assert read_trace(cut, MODEL).thought is None and read_trace(cut, MODEL).answer == cut
    assert read_trace(R1_TEXT, CLOSED).answer == R1_TEXT


def test_steps_keep_the_thought_and_the_answer_apart_and_give_the_text_back():
    for text, state in ((QWEN3_TEXT, MODEL), (R1_TEXT, OPEN)):
        made = segment_trace(read_trace(text, state), Paragraphs())
        assert made.thought_steps == 3 and len(made.steps) == 5
        assert not any("think>" in s for s in made.steps)
        assert made.joins[2] == "\n</think>\n\n" and made.joins[:2] == ["\n\n", "\n\n"]
        assert join_steps(made.steps, made.joins) == R1_TEXT  # the text as written, from its first step
        assert prefix_text(made.steps, made.joins, 2) == THOUGHT + "\n</think>\n\n"
        assert prefix_text(made.steps, made.joins, 1) == "Let me add 3 and 5.\n\n3 + 5 = 8.\n\n"
    plain = segment_trace(read_trace("a\n\nb", CLOSED), Paragraphs())
    assert plain.record_joins is None and plain.thought_steps == 0  # the old rule, the old record


@pytest.mark.parametrize("name,state", [("qwen3", MODEL), ("r1", OPEN), ("no-think", CLOSED)])
def test_the_generation_prompt_says_where_the_thought_starts(tokenizer, name, state):
    engine = TemplateEngine(lambda r: "", tokenizer, TEMPLATES[name])
    assert prompt_thought(engine.generation_prompt(({"role": "user", "content": "x"},))) == state


# ------------------------------------------------------------------ the prompt a rollout continues


@pytest.mark.parametrize("name", ["qwen3", "r1"])
def test_a_prefix_inside_or_after_the_thought_is_continued_as_written(tokenizer, name):
    """Templates strip or rewrite thoughts in assistant turns (R1's keeps only what follows
    `</think>`, Qwen3's trims the thought's whitespace): the prefix is appended raw to the
    generation prompt instead, so the text continued is the text written."""
    from prm_annotate.strategies import Probe

    text = "<think>\nLet me add 3 and 5.\n\n3 + 5 = 8.\n\n</think>\n\nThe sum is 8.\n\nSo \\boxed{8}."
    made = segment_trace(read_trace(text, MODEL), Paragraphs())
    assert made.joins == ["\n\n", "\n\n</think>\n\n", "\n\n"]
    response = Response.model_validate({"id": "p/0", "problem": "What is 3 + 5?", "answer": "8", "steps": made.steps,
                                        "thought_steps": made.thought_steps, "thought_finished": True,
                                        "step_joins": made.joins})
    engine = TemplateEngine(lambda r: "", tokenizer, TEMPLATES[name])
    tokenizer.chat_template = TEMPLATES[name]
    stage = RolloutStage(engine, k=1, system_prompt="none")
    head = engine.generation_prompt(({"role": "user", "content": "What is 3 + 5?"},))
    for step in (0, 2):  # inside the thought; in the answer, after </think>
        request = stage._request(response, Probe(step, 0))
        assert request.append_raw and request.continue_final
        prompt = render_prompt(tokenizer, request)
        assert prompt.startswith(head) and prompt.count("<think>") == 1  # never a second <think>
        written = prefix_text(made.steps, made.joins, step)
        assert prompt[len(head):] == ("<think>\n" if name == "qwen3" else "") + written
        # the baseline: the template's own continuation of the same text
        own = replace(request, append_raw=False)
        if step == 2:  # the thought in the turn is stripped (R1) or rewritten (Qwen3): refused
            with pytest.raises(ValueError, match="final message does not appear"):
                render_prompt(tokenizer, own)
        elif name == "qwen3":  # inside the thought there is no `</think>` to strip: the same text
            assert render_prompt(tokenizer, own) == prompt


# ------------------------------------------------------------------ sample


def sample(tokenizer, template: str, texts: dict[int, str | GenerationResult], n: int | None = None, **settings):
    def script(request):
        index = int(request.key.split("\x00")[1])
        return texts[index]

    engine = TemplateEngine(script, tokenizer, template)
    stage = SampleStage(engine, n=n or len(texts), system_prompt="none", **settings)
    try:
        [outcome] = stage.process([problem()])
    finally:
        stage.close()
    return stage, [r.dump() for r in outcome.records]


def cut(text: str) -> GenerationResult:
    return GenerationResult(key="", texts=[text], finish_reasons=["length"], generated_tokens=40, prompt_tokens=10)


def test_sample_records_the_thought_apart_and_never_grades_an_unfinished_one(tokenizer):
    stage, records = sample(tokenizer, TEMPLATES["qwen3"], {
        0: QWEN3_TEXT, 1: cut("<think>\nLet me add.\n\nIt is \\boxed{8} I think, but wait")})
    done, unfinished = records
    assert done["thought_steps"] == 3 and done["thought_finished"] is True and done["correct"] is True
    assert done["final_answer"] == "8" and done["steps"][0] == "Let me add 3 and 5."
    assert done["generator"]["thought_tokens"] + done["generator"]["answer_tokens"] == done["generator"]["generated_tokens"]
    assert 0 < done["generator"]["thought_tokens"]
    # the draft \boxed{8} in the cut thought would grade right: it is never graded
    assert unfinished["thought_finished"] is False and unfinished["correct"] is None
    assert unfinished["final_answer"] is None and unfinished["grade_error"] == UNFINISHED
    assert unfinished["thought_steps"] == len(unfinished["steps"]) == 2
    assert stage.stats["unfinished_thoughts"] == 1 and stage.sampling.max_tokens == 32768
    assert stage.settings()["reasoning"] == "think" and stage.settings()["thought_state"] == MODEL


def test_sample_under_a_template_that_opens_the_thought(tokenizer):
    _, [rec] = sample(tokenizer, TEMPLATES["r1"], {0: R1_TEXT})
    assert rec["thought_steps"] == 3 and rec["correct"] is True and rec["step_joins"][2] == "\n</think>\n\n"
    _, [unfinished] = sample(tokenizer, TEMPLATES["r1"], {0: cut("Let me add.\n\nSo \\boxed{8}")})
    assert unfinished["thought_finished"] is False and unfinished["correct"] is None


def test_sample_under_a_template_that_closes_the_thought_reads_the_whole_completion_as_the_answer(tokenizer):
    stage, [rec] = sample(tokenizer, TEMPLATES["no-think"], {0: "3 + 5 = 8.\n\nSo the answer is \\boxed{8}."})
    assert rec["correct"] is True and "thought_steps" not in rec and "step_joins" not in rec
    assert stage.sampling.max_tokens == 2048  # no thought: the policy budget stays


def test_two_different_answers_in_one_completion_are_refused_equal_ones_are_one_answer(tokenizer):
    again = "<think>\nAdd.\n</think>\n\nThe answer is \\boxed{{{0}}}.\n\n<think>\nWait, let me redo it.\n</think>\n\nThe answer is \\boxed{{{1}}}."
    stage, records = sample(tokenizer, TEMPLATES["qwen3"], {
        0: again.format("8", "9"), 1: again.format("9", "8"), 2: again.format("8\\sqrt{2}", "\\sqrt{128}"),
        3: again.format("8", "8")})
    refused_a, refused_b, same_value, same = records
    for r in (refused_a, refused_b):  # neither order picks one of the two
        assert r["correct"] is None and r["final_answer"] is None and r["grade_error"].startswith(TWO_ANSWERS)
    assert same["correct"] is True and "grade_error" not in same
    assert "grade_error" not in same_value and same_value["correct"] is False and same_value["final_answer"] == "\\sqrt{128}"  # one answer, graded (wrong)
    assert stage.stats["two_answers"] == 2


def test_under_a_template_that_opened_the_thought_two_answers_are_refused_and_no_step_holds_a_tag(tokenizer):
    """The R1 template opens the thought in the prompt: the completion closes it, answers, thinks
    again and answers differently. Neither answer is graded; the steps keep the tags in their joins."""
    again = "Add.\n</think>\n\nThe answer is \\boxed{{{0}}}.\n\n<think>\nWait, redo it.\n</think>\n\nThe answer is \\boxed{{{1}}}."
    stage, records = sample(tokenizer, TEMPLATES["r1"], {0: again.format("8", "9"), 1: again.format("8", "8")})
    refused, same = records
    assert refused["correct"] is None and refused["grade_error"].startswith(TWO_ANSWERS)
    assert same["correct"] is True and stage.stats["two_answers"] == 1
    for r, text in zip(records, (again.format("8", "9"), again.format("8", "8"))):
        assert r["thought_steps"] == 1 and not any("think>" in step for step in r["steps"])
        assert join_steps(r["steps"], r["step_joins"]) == text
        assert r["step_joins"] == ["\n</think>\n\n", "\n\n<think>\n", "\n</think>\n\n"]


def test_a_preamble_before_the_models_own_think_counts_with_the_thought_and_is_continued_as_written(tokenizer):
    """Decided: text the model writes before its own `<think>` is no part of the thought's text
    (DeepSeek-R1's rule) but its steps count with the thought's (they come before `</think>`), the
    `<think>` in their join; a rollout writes no second `<think>` before them."""
    from prm_annotate.strategies import Probe

    text = "Let me think.\n\n<think>\n3 + 5 = 8.\n</think>\n\nSo the answer is \\boxed{8}."
    trace = read_trace(text, MODEL)
    assert trace.thought == "\n3 + 5 = 8.\n" and trace.answer == "\n\nSo the answer is \\boxed{8}."
    stage, [rec] = sample(tokenizer, TEMPLATES["qwen3"], {0: text})
    assert rec["steps"] == ["Let me think.", "3 + 5 = 8.", "So the answer is \\boxed{8}."]
    assert rec["thought_steps"] == 2 and rec["step_joins"] == ["\n\n<think>\n", "\n</think>\n\n"]
    assert rec["correct"] is True
    engine = TemplateEngine(lambda r: "", tokenizer, TEMPLATES["qwen3"])
    rollout = RolloutStage(engine, k=1, system_prompt="none")
    response = Response.model_validate({**rec, "answer": "8"})
    assert rollout._request(response, Probe(1, 0)).messages[-1]["content"] == text[:text.index("</think>") + len("</think>\n\n")]


def test_grade_and_export_never_treat_an_unfinished_thought_as_answered(tokenizer):
    _, [unfinished, done] = sample(tokenizer, TEMPLATES["qwen3"], {
        0: cut("<think>\nSo \\boxed{8}"), 1: QWEN3_TEXT})
    grade = GradeStage()
    try:
        graded = [o.records[0].dump() for o in grade.process([GradeStage.input_model.model_validate(r)
                                                                for r in (unfinished, done)])]
    finally:
        grade.close()
    assert graded[0]["correct"] is None and graded[0]["grade_error"] == UNFINISHED
    assert graded[1]["correct"] is True and graded[1]["final_answer"] == "8"
    labelled = {**unfinished, "judge": {"first_error": -1, "votes": [-1], "parse_failures": 0, "model": "j",
                                        "prompt": "paper"}}
    assert "unfinished thought" in example_from(labelled, "x.jsonl", "line 1")
    assert not isinstance(example_from({**labelled, **{k: done[k] for k in ("steps", "thought_steps",
                                                                             "thought_finished", "step_joins")}},
                                       "x.jsonl", "line 1"), str)


# ------------------------------------------------------------------ rollout


def test_rollout_sets_an_unfinished_thought_aside_and_reads_completions_after_the_thought(tokenizer):
    _, [unfinished, done] = sample(tokenizer, TEMPLATES["qwen3"], {
        0: cut("<think>\nAdd them.\n\nSo \\boxed{8}"), 1: QWEN3_TEXT})

    def complete(request):
        prefix = request.messages[-1]["content"]
        assert prefix.startswith("<think>\n") and prefix.count("<think>") == 1
        if "</think>" in prefix:
            return "So the answer is \\boxed{8}."
        if prefix.endswith("3 + 5 = 8.\n\n"):
            return cut("Still thinking, \\boxed{8} maybe")  # cut inside the thought: no answer
        return "Fine.\n</think>\n\n\\boxed{8}"

    engine = TemplateEngine(complete, tokenizer, TEMPLATES["qwen3"])
    stage = RolloutStage(engine, k=2, system_prompt="none")
    try:
        outcomes = stage.process([RolloutStage.input_model.model_validate(r) for r in (unfinished, done)])
    finally:
        stage.close()
    assert outcomes[0].records == [] and outcomes[0].error is None  # set aside, not failed
    mc = outcomes[1].records[0].dump()["mc"]
    assert mc["scores"] == [1.0, 0.0, 1.0, 1.0, 1.0] and mc["first_error"] == 1
    assert mc["cut"][1] == 2 and mc["cut_in_thought"] == 2 and mc["max_tokens"] == 32768
    assert stage.stats[f"set aside: {UNFINISHED}"] == 1
    assert all(r.append_raw for r in engine.requests)
    # consensus cuts the joins and the thought with the steps it keeps
    from prm_annotate.records import Judged, Rollout
    from prm_annotate.stages.consensus import consensus_record

    rollout = Rollout.model_validate(outcomes[1].records[0].dump())
    judge = {"first_error": 1, "votes": [1], "parse_failures": 0, "model": "j", "prompt": "paper"}
    kept = consensus_record(rollout, Judged.model_validate({**done, "judge": judge})).dump()
    assert kept["steps"] == done["steps"][:2] and kept["step_joins"] == done["step_joins"][:1]
    assert kept["thought_steps"] == 2 and kept["labels"] == [True, False]


# ------------------------------------------------------------------ judge


STEPS = ["3 + 5 = 8.", "8 * 2 = 17.", "So the answer is \\boxed{17}."]


def split(text: str) -> GenerationResult:
    """What an engine asked for the `think` split returns."""
    from prm_annotate.thinking.split import split_think

    parts = split_think(text)
    return GenerationResult(key="", texts=[parts.answer or ""], reasonings=[parts.reasoning], finish_reasons=["stop"],
                            generated_tokens=len(text))


def judged(texts: list[str], **settings):
    record = Response.model_validate({"id": "r/0", "problem": "Double 3 + 5.", "answer": "16", "steps": STEPS})
    stage = JudgeStage(ScriptedEngine(lambda r: split(texts[int(r.key.split("\x00")[-1])])), prompt="processbench",
                       reasoning="think", votes=len(texts), **settings)
    [outcome] = stage.process([record])
    return outcome.records[0].dump()["judge"]


@pytest.mark.parametrize("splitter", ["think", "deepseek_r1"])
def test_a_judge_whose_template_opened_the_thought_answering_twice_is_refused(tokenizer, splitter):
    """No `<think>` in the completion (the prompt opened it): vLLM's parsers would start the
    reasoning at the second `<think>` and read only the last verdict; the in-process split keeps both."""
    from prm_annotate.thinking.split import TokenSplitter

    again = "Check.\n</think>\n\n\\boxed{{{0}}}\n\n<think>\nHm, again.\n</think>\n\n\\boxed{{{1}}}"
    splitter_ = TokenSplitter(splitter, tokenizer)

    def result(text: str) -> GenerationResult:
        parts = splitter_.split(text, tokenizer.encode(text, add_special_tokens=False))
        return GenerationResult(key="", texts=[parts.answer or ""], reasonings=[parts.reasoning],
                                finish_reasons=["stop"], generated_tokens=len(text), reasoning_tokens=parts.reasoning_tokens)

    record = Response.model_validate({"id": "r/0", "problem": "Double 3 + 5.", "answer": "16", "steps": STEPS})
    texts = [again.format(1, 0), again.format(1, 1)]
    stage = JudgeStage(ScriptedEngine(lambda r: result(texts[int(r.key.split("\x00")[-1])])), prompt="processbench",
                       reasoning="think", votes=2, temperature=0.7)
    [outcome] = stage.process([record])
    j = outcome.records[0].dump()["judge"]
    assert j["votes"] == [None, 1] and j["parse_errors"][0].startswith("two different verdicts in one answer")


def test_a_judge_that_answers_thinks_again_and_answers_differently_is_refused():
    again = "<think>\nCheck.\n</think>\n\n\\boxed{{{0}}}\n\n<think>\nHm, again.\n</think>\n\n\\boxed{{{1}}}"
    j = judged([again.format(1, 0), again.format(1, 1), "<think>\nx\n</think>\\boxed{1}"], temperature=0.7)
    assert j["votes"] == [None, 1, 1] and j["first_error"] == 1
    assert j["parse_errors"][0].startswith("two different verdicts in one answer")
    # two verdicts in the answer without thinking again: refused by the style's parser
    j = judged(["<think>\nx\n</think>\n\\boxed{1} or rather \\boxed{0}"])
    assert j["first_error"] is None and "conflicting answers" in j["parse_errors"][0]


# ------------------------------------------------------------------ auto over HTTP


class ServerEngine(ScriptedEngine):
    template_on_server = True


@pytest.mark.parametrize("content,split", [(QWEN3_TEXT, "think"), (R1_TEXT, "think"), ("\\boxed{8}", None)])
def test_auto_over_http_finds_a_thought_in_the_content_from_the_first_answer(content, split):
    engine = ServerEngine(lambda r: content)
    stage = SampleStage(engine, n=2, system_prompt="none")
    try:
        outcomes = list(stage.stream(iter([problem("a"), problem("b")]), 4))
    finally:
        stage.close()
    assert stage.split == split and engine.calls >= 2 and engine.requests[0].key == "a\x000\x000"  # the probe first
    asked = [r.key.rpartition("\x1f")[2] for r in engine.requests]  # less the scheduler's job number
    assert len(asked) == len(set(asked)) == 4  # each request once: the probe's answer is its job's
    records = [r.dump() for o in outcomes for x in o for r in x.records]
    assert all(r["correct"] is True for r in records)
    assert all((r.get("thought_steps") == 3) == (split is not None) for r in records)
    assert stage.sampling.max_tokens == (32768 if split else 2048)


def test_auto_over_http_stops_before_the_batch_when_the_first_answer_cannot_tell():
    engine = ServerEngine(lambda r: cut("Let me add 3 and 5. Hmm"))
    stage = SampleStage(engine, n=2, system_prompt="none")
    with pytest.raises(UsageError, match="give --reasoning think"):
        list(stage.stream(iter([problem("a"), problem("b")]), 4))
    stage.close()
    assert len(engine.requests) == 1  # the probe only: nothing of the batch spent
    judge = JudgeStage(ServerEngine(lambda r: cut("Paragraph 1 seems")), prompt="processbench")
    with pytest.raises(UsageError, match="judge --reasoning auto"):
        list(judge.stream(iter([Response.model_validate({"id": "r", "problem": "x", "steps": STEPS})]), 4))
    server = ServerEngine(lambda r: "Check.\n</think>\n\n\\boxed{1}")
    thinking_judge = JudgeStage(server, prompt="processbench")
    [[outcome]] = list(thinking_judge.stream(iter([Response.model_validate({"id": "r", "problem": "x",
                                                                             "steps": STEPS})]), 4))
    assert thinking_judge.reasoning == "think"
    # the probe's answer is the record's votes' first, split here as the engine splits it: asked once
    assert len(server.requests) == thinking_judge.config.votes and outcome.records[0].dump()["judge"]["first_error"] == 1


def test_a_probe_without_an_answer_stops_on_its_error_and_the_manifest_claims_nothing():
    """Every probe request failed: the run stops with their error, not with advice on --reasoning
    (nothing was answered to tell), and the settings the manifest records say auto found nothing."""
    engine = ServerEngine(lambda r: RuntimeError("failed after 5 attempt(s): HTTP 500: boom"))
    stage = SampleStage(engine, n=2, system_prompt="none")
    with pytest.raises(UsageError) as stopped:
        list(stage.stream(iter([problem(p) for p in "abcd"]), 4))
    stage.close()
    said = str(stopped.value)
    assert said.startswith("sample: the first 3 request(s) failed (the last: failed after 5 attempt(s): HTTP 500: boom)")
    assert "--reasoning" not in said and len(engine.requests) == 3  # PROBE_TRIES records, one request each
    assert (stage.settings()["reasoning"], stage.settings()["thought_state"]) == (UNANSWERED, None)
    judge = JudgeStage(ServerEngine(lambda r: RuntimeError("HTTP 400: no")), prompt="processbench")
    with pytest.raises(UsageError, match=r"^judge: the first 1 request\(s\) failed") as stopped:
        list(judge.stream(iter([Response.model_validate({"id": "r", "problem": "x", "steps": STEPS})]), 4))
    assert "--reasoning" not in str(stopped.value) and judge.settings()["reasoning"] == UNANSWERED
    idle = SampleStage(ServerEngine(lambda r: "\\boxed{8}"), n=1, system_prompt="none")
    assert list(idle.stream(iter([]), 4)) == []  # nothing to ask: nothing found, nothing claimed
    assert (idle.settings()["reasoning"], idle.settings()["thought_state"]) == (UNANSWERED, None)
    idle.close()


def test_the_probes_answer_serves_the_request_it_would_have_answered_once():
    """ProbeAnswer: the same request (or one the answer could not have come out otherwise for) gets the
    probe's answer, once; a request the answer does not fit is sent again."""
    from prm_annotate.engines.sampling import Sampling
    from prm_annotate.thinking.probe import ProbeAnswer, asked

    sent = GenerationRequest("a", ({"role": "user", "content": "q"},), sampling=Sampling(max_tokens=32768, seed=1))
    done = GenerationResult("a", ["<think>\nx\n</think>\n\n8"], ["stop"], prompt_tokens=5, generated_tokens=300)
    lower = replace(sent, sampling=replace(sent.sampling, max_tokens=2048))
    assert ProbeAnswer(sent, done).serves(sent) is done
    assert ProbeAnswer(sent, done).serves(lower) is done  # finished in 300 tokens: 2,048 gives the same
    assert ProbeAnswer(sent, done).serves(replace(lower, sampling=replace(lower.sampling, max_tokens=300))) is None
    assert ProbeAnswer(sent, replace(done, finish_reasons=["length"])).serves(lower) is None
    assert ProbeAnswer(sent, done).serves(replace(sent, sampling=replace(sent.sampling, seed=2))) is None
    assert ProbeAnswer(sent, done).serves(replace(sent, key="b")) is None
    assert ProbeAnswer(sent, GenerationResult("a", error="boom")).serves(sent) is None
    split_here = ProbeAnswer(sent, done).serves(replace(sent, reasoning="think"))
    assert (split_here.texts, split_here.reasonings) == (["\n\n8"], ["\nx\n"])
    probe = ProbeAnswer(sent, done)
    round_ = asked([sent, replace(sent, key="b")], probe)
    assert [r.key for r in next(round_)] == ["b"]  # only what the probe did not answer is sent
    with pytest.raises(StopIteration) as stop:
        round_.send({"b": replace(done, key="b")})
    assert set(stop.value.value) == {"a", "b"} and probe.used and probe.take([sent]) == {}


def test_sample_fits_its_probe_and_its_requests_to_the_context():
    """Over HTTP under auto, the probe is the problem's first request as its job sends it: clamped to
    the server's context, and a problem whose prompt leaves no room is refused, not probed."""
    from prm_annotate.engines.context import Context

    class SmallServer(ServerEngine):
        def context(self):
            return Context(1000, source="option", counter="estimate")

        def prompt_tokens(self, request):
            return 2000 if "long" in request.messages[-1]["content"] else 100

    engine = SmallServer(lambda r: QWEN3_TEXT)
    stage = SampleStage(engine, n=2, system_prompt="none")
    long = Problem.model_validate({"id": "long", "problem": "a long problem", "answer": "8"})
    try:
        outcomes = [o for batch in stage.stream(iter([long, problem("a")]), 4) for o in batch]
    finally:
        stage.close()
    assert [r.key for r in engine.requests][:1] == ["a\x000\x000"]  # the refused problem sends nothing
    assert {r.sampling.max_tokens for r in engine.requests} == {900} and len(engine.requests) == 2
    assert outcomes[0].kind == "permanent" and "2000 tokens" in outcomes[0].error
    assert all(r.dump()["generator"]["max_tokens_clamped"] == 900 for r in outcomes[1].records)
    assert stage.stats["refused_over_context"] == 1 and stage.stats["max_tokens_clamped"] == 1


def test_a_judge_under_a_template_that_closes_the_thought_reads_the_whole_answer(tokenizer):
    record = Response.model_validate({"id": "r/0", "problem": "Double 3 + 5.", "answer": "16", "steps": STEPS})
    for name, split in (("no-think", None), ("qwen3", "think")):
        stage = JudgeStage(TemplateEngine(lambda r: "Paragraph 1 is wrong: \\boxed{1}.", tokenizer, TEMPLATES[name]),
                           prompt="processbench")
        assert stage.reasoning == split
    [outcome] = JudgeStage(TemplateEngine(lambda r: "Paragraph 1 is wrong: \\boxed{1}.", tokenizer, TEMPLATES["no-think"]),
                           prompt="processbench").process([record])
    assert outcome.records[0].dump()["judge"]["first_error"] == 1


def test_a_thinking_trace_is_cut_by_the_runs_segmenter_thought_and_answer_apart(tokenizer):
    """The segmenter cuts the thought and the answer apart: no step holds a tag, the join between
    them holds `</think>`, and the steps with their joins give the completion back."""
    text = "<think>\nLet me add.\n\n3 + 5 = 8.\n\nWait, check: 8.\n</think>\n\nSo \\boxed{8}."
    _, (plain,) = sample(tokenizer, TEMPLATES["qwen3"], {0: text})
    _, (turns,) = sample(tokenizer, TEMPLATES["qwen3"], {0: text}, segment="reflection")
    assert plain["thought_steps"] == 3 and plain["segmenter"]["name"] == "paragraphs"
    assert turns["steps"] == ["Let me add.\n\n3 + 5 = 8.", "Wait, check: 8.", "So \\boxed{8}."]
    assert turns["thought_steps"] == 2 and turns["segmenter"]["name"] == "reflection"
    assert "</think>" in turns["step_joins"][1] and not any("think>" in s for s in turns["steps"])
    assert "<think>\n" + join_steps(turns["steps"], turns["step_joins"]) == text
