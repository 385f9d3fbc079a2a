"""Reasoning judges: the thought split off before the verdict is parsed, in process (vLLM's own
reasoning parser, or the plain `<think>` split) and behind `vllm serve --reasoning-parser`; its
tokens counted apart from the answer's; a thought cut at max_tokens recorded as cut, never parsed.

The engine test forces think-block completions out of a tiny model (testing/forcing.py: a
structured-output regex per request on a model whose logits are all 0) through the in-process
engine and through a real `vllm serve` with vLLM's `deepseek_r1` parser, and checks that both give
the same verdicts and the same reasoning-token counts under `--prompt paper` and
`--prompt processbench`."""
from __future__ import annotations

import pytest

from prm_annotate.engines.base import GenerationResult
from prm_annotate.thinking.split import split_think, template_thinks
from prm_annotate.errors import UsageError
from prm_annotate.records import Response
from prm_annotate.stages.judge import JudgeStage
from testing.scripted_engine import ScriptedEngine

STEPS = ["3 + 5 = 8.", "8 * 2 = 17.", "So the answer is \\boxed{17}."]


def rec(rid: str = "r/0") -> Response:
    return Response.model_validate({"id": rid, "problem": "Tom has 3 apples, gets 5 more, then doubles them.",
                                    "answer": "16", "steps": STEPS})


def paper_answer(first: int) -> str:
    analysed = len(STEPS) if first == -1 else first + 1
    body = "".join(f"<analysis_{k}>\nParagraph {k} checked.\n</analysis_{k}>\n" for k in range(1, analysed + 1))
    return body + f"<conclusion>\n{'Correct' if first == -1 else 'Incorrect'}\n</conclusion>"


def thought(draft: str) -> str:
    # The draft names another step: read with the answer, it would move the first error.
    return f"<think>\nLet me check each paragraph. At first I thought {draft}. Checking again: 8 * 2 is 16.\n</think>\n\n"


PAPER = {"r/0": thought("<analysis_1> was wrong") + paper_answer(1),
         "r/1": thought("all of it was fine") + paper_answer(-1),
         "r/2": thought("paragraph 3 was the error") + paper_answer(0)}
PROCESSBENCH = {"r/0": thought("\\boxed{0}") + "The earliest error is in paragraph 1: \\boxed{1}.",
                "r/1": thought("\\boxed{2}") + "Every paragraph is correct: \\boxed{-1}.",
                "r/2": thought("\\boxed{-1}") + "Paragraph 0 is already wrong: \\boxed{0}."}
TRUTH = {"r/0": 1, "r/1": -1, "r/2": 0}
CUT = "<think>\n" + "Let me check this again, and again. " * 40  # never ends within max_tokens


def record_id(key: str) -> str:
    """The record id in a request key (the scheduler prefixes its own)."""
    return key.split("\x1f")[-1].split("\x00")[0]


def script_of(texts: dict[str, str]):
    return lambda r: texts[record_id(r.key)]


def test_the_plain_split_follows_deepseek_r1s_rule():
    assert split_think("<think>a</think>b") == split_think("a</think>b")  # the template may open the thought
    assert (split_think("<think>a</think>b").reasoning, split_think("<think>a</think>b").answer) == ("a", "b")
    assert split_think("<think>a, unfinished").answer is None  # never read as an answer
    assert split_think("no tags at all").answer is None
    assert template_thinks("{{'<|im_start|>assistant\\n<think>\\n'}}") and not template_thinks("{{'<|im_start|>'}}")


def test_a_thought_split_off_is_not_parsed_its_tokens_counted_apart_and_a_cut_thought_is_cut():
    def script(r):
        text = {**PROCESSBENCH, "r/3": CUT}[record_id(r.key)]
        parts = split_think(text)
        return GenerationResult(key=r.key, texts=[parts.answer or ""], reasonings=[parts.reasoning],
                                finish_reasons=["length" if text is CUT else "stop"], prompt_tokens=100,
                                generated_tokens=len(text), reasoning_tokens=len(parts.reasoning))

    stage = JudgeStage(ScriptedEngine(script), prompt="processbench", reasoning="think", keep_reasoning=True)
    outs = [o.records[0].dump()["judge"] for o in stage.process([rec(f"r/{i}") for i in range(4)])]
    assert [j["first_error"] for j in outs] == [1, -1, 0, None]
    assert all("<think>" not in j["outputs"][0] and "</think>" not in j["outputs"][0] for j in outs)
    assert outs[3]["cut"] == 1 and outs[3]["parse_errors"] == ["cut at --max-tokens"]
    assert [j["cut"] for j in outs[:3]] == [0, 0, 0]
    for text, j in zip([PROCESSBENCH["r/0"], PROCESSBENCH["r/1"], PROCESSBENCH["r/2"], CUT], outs):
        assert j["reasoning_tokens"] == len(split_think(text).reasoning) > 0
        assert j["answer_tokens"] == j["generated_tokens"] - j["reasoning_tokens"] and j["prompt_tokens"] == 100
        assert j["reasoning"] == [split_think(text).reasoning]
    assert stage.sampling.max_tokens == 32768 and stage.settings()["reasoning"] == "think"
    assert stage.stats["cut_votes"] == 1 and stage.stats["reasoning_tokens"] == sum(j["reasoning_tokens"] for j in outs)
    assert stage.reasons == {"cut at --max-tokens": 1}


def test_without_the_split_the_thought_is_refused_not_read():
    stage = JudgeStage(ScriptedEngine(script_of(PROCESSBENCH)), prompt="processbench", reasoning="off")
    outs = [o.records[0].dump()["judge"] for o in stage.process([rec(f"r/{i}") for i in range(3)])]
    assert [j["first_error"] for j in outs] == [None, None, None]
    assert all("<think>" in j["parse_errors"][0] for j in outs) and all("reasoning_tokens" not in j for j in outs)
    assert stage.sampling.max_tokens == 8192


def test_a_cut_verdict_is_not_read_even_without_reasoning():
    cut = GenerationResult(key="", texts=["Paragraph 1 looks wrong, so \\boxed{1}... but wait, paragraph 0"],
                           finish_reasons=["length"], generated_tokens=20)
    stage = JudgeStage(ScriptedEngine(lambda r: cut), prompt="processbench")
    [out] = stage.process([rec()])
    judge = out.records[0].dump()["judge"]
    assert judge["first_error"] is None and judge["cut"] == 1 and judge["parse_errors"] == ["cut at --max-tokens"]


def test_reasoning_options_are_checked_before_any_engine():
    with pytest.raises(UsageError, match="--reasoning nonsense: choose auto, think, off or a vLLM reasoning parser"):
        JudgeStage(ScriptedEngine(lambda r: ""), reasoning="nonsense")
    with pytest.raises(UsageError, match="--constrained"):
        JudgeStage(ScriptedEngine(lambda r: ""), reasoning="think", constrained=True)
    with pytest.raises(UsageError, match="processbench-official sets --reasoning itself"):
        JudgeStage(ScriptedEngine(lambda r: ""), protocol="processbench-official", reasoning="think")
    assert JudgeStage(ScriptedEngine(lambda r: ""), reasoning="deepseek_r1").reasoning == "deepseek_r1"


def test_the_http_engine_reads_the_answer_from_content_and_keeps_the_reasoning():
    import asyncio

    import httpx

    from prm_annotate.engines.base import GenerationRequest
    from prm_annotate.engines.openai_engine import OpenAIEngine

    engine = OpenAIEngine("http://127.0.0.1:1/v1", "m")
    request = GenerationRequest(key="k", messages=({"role": "user", "content": "x"},), n=2, reasoning="deepseek_r1")
    data = {"choices": [{"index": 0, "message": {"content": "\\boxed{1}", "reasoning": "draft \\boxed{0}"},
                         "finish_reason": "stop"},
                        {"index": 1, "message": {"content": None, "reasoning_content": "an unfinished"},
                         "finish_reason": "length"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 30, "completion_tokens_details": {"reasoning_tokens": 22}}}
    result = engine._parse(request, data)
    assert result.texts == ["\\boxed{1}", ""] and result.reasonings == ["draft \\boxed{0}", "an unfinished"]
    assert result.reasoning_tokens == 22 and result.finish_reasons == ["stop", "length"]
    # a server without a reasoning parser: `think` splits here, its tokens counted by the server's
    # /tokenize (tests/cli/test_http_failures.py); a server that cannot count does not tell them
    plain = {"choices": [{"index": 0, "message": {"content": "<think>a</think>\\boxed{1}"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 7, "completion_tokens": 30}}
    think = GenerationRequest(key="k", messages=request.messages, reasoning="think")

    async def split_here():
        async with httpx.AsyncClient() as client:
            return await engine._split_here(client, engine._parse(think, plain))

    result = asyncio.run(split_here())
    assert result.texts == ["\\boxed{1}"] and result.reasonings == ["a"] and result.reasoning_tokens is None
    assert engine._parse(GenerationRequest(key="k", messages=request.messages), plain).texts == ["<think>a</think>\\boxed{1}"]


# ---------------------------------------------------------------- real vLLM

@pytest.fixture(scope="module")
def reasoning_model_dir(tmp_path_factory):
    from testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-reasoning"), reasoning=True, dtype="float32")


REASONING_MAX_MODEL_LEN = 4096


def judge_all(engine, prompt: str, texts: dict[str, str], **settings) -> tuple[dict, JudgeStage]:
    from testing.forcing import ForcingEngine

    stage = JudgeStage(ForcingEngine(engine, script_of(texts)), prompt=prompt, reasoning="deepseek_r1",
                       max_tokens=700, engine_info={"model": "tiny-reasoning"}, **settings)
    outs = list(stage.process([rec(rid) for rid in texts]))
    assert all(o.error is None for o in outs), [o.error for o in outs]
    return {o.id: o.records[0].dump()["judge"] for o in outs}, stage


def test_the_in_process_splitters_count_the_thoughts_tokens(reasoning_model_dir):
    """`think` counts the tokens up to and including `</think>`; vLLM's `deepseek_r1` those between
    the tags. Checked against the token ids themselves, and the tag-less tokenizer's count against
    the thought encoded alone."""
    from transformers import AutoTokenizer

    from prm_annotate.thinking.split import TokenSplitter

    text = PROCESSBENCH["r/0"]
    tokenizer = AutoTokenizer.from_pretrained(reasoning_model_dir)
    ids = tokenizer.encode(text, add_special_tokens=False)
    end = ids.index(tokenizer.convert_tokens_to_ids("</think>"))
    think, vllm = TokenSplitter("think", tokenizer).split(text, ids), TokenSplitter("deepseek_r1", tokenizer).split(text, ids)
    assert (think.reasoning, think.answer) == (vllm.reasoning, vllm.answer) == (split_think(text).reasoning,
                                                                                split_think(text).answer)
    assert think.reasoning_tokens == end + 1 and vllm.reasoning_tokens == end - 1
    from testing.tiny_model import build_tokenizer

    plain = build_tokenizer()  # `<think>` is several tokens here
    ids = plain.encode(text, add_special_tokens=False)
    counted = TokenSplitter("think", plain).split(text, ids).reasoning_tokens
    alone = len(plain.encode(text[:text.index("</think>") + len("</think>")], add_special_tokens=False))
    assert abs(counted - alone) <= 1 and counted < len(ids)


@pytest.mark.engine
def test_served_and_in_process_reasoning_judges_give_the_same_verdicts(reasoning_model_dir, heavy, tmp_path):
    """The same forced think-block completions through the in-process engine (vLLM's deepseek_r1
    parser run here) and through `vllm serve --reasoning-parser deepseek_r1` (the server's): the same
    verdicts, the true ones, under both prompts; the thought's tokens counted apart, by the same count;
    the cut thought cut on both. The baseline: in process without the split, every verdict is refused."""
    from prm_annotate.engines.openai_engine import OpenAIEngine
    from testing.forcing import ForcingEngine
    from testing.heavy import start_server, start_vllm_engine

    cases = {"paper": {**PAPER, "r/3": CUT}, "processbench": {**PROCESSBENCH, "r/3": CUT}}
    engine = heavy.get("vllm:tiny-reasoning", lambda: start_vllm_engine(
        reasoning_model_dir, max_model_len=REASONING_MAX_MODEL_LEN, dtype="float32"), lambda e: e.close())
    local = {prompt: judge_all(engine, prompt, texts, keep_reasoning=True)[0] for prompt, texts in cases.items()}
    off_stage = JudgeStage(ForcingEngine(engine, script_of(PAPER)), prompt="paper", reasoning="off", max_tokens=700)
    off = [o.records[0].dump()["judge"] for o in off_stage.process([rec(rid) for rid in PAPER])]
    assert [j["first_error"] for j in off] == [None] * 3 and all("<think>" in j["parse_errors"][0] for j in off)

    server = heavy.get("server:tiny-reasoning", lambda: start_server(
        reasoning_model_dir, "tiny-reasoning", tmp_path, max_model_len=REASONING_MAX_MODEL_LEN, dtype="float32",
        extra_args=["--reasoning-parser", "deepseek_r1",
                    "--structured-outputs-config", '{"enable_in_reasoning": true}']), lambda s: s.stop())
    http = OpenAIEngine(server.base_url, "tiny-reasoning", concurrency=4, timeout=300, max_attempts=1)
    try:
        served = {prompt: judge_all(http, prompt, texts, keep_reasoning=True)[0] for prompt, texts in cases.items()}
    finally:
        http.close()

    for prompt, texts in cases.items():
        for rid, text in texts.items():
            mine, theirs = local[prompt][rid], served[prompt][rid]
            assert mine["first_error"] == theirs["first_error"] == TRUTH.get(rid), (prompt, rid, mine, theirs)
            assert mine["outputs"] == theirs["outputs"] and mine["reasoning"] == theirs["reasoning"], (prompt, rid)
            assert mine["generated_tokens"] == theirs["generated_tokens"]
            assert mine["reasoning_tokens"] == theirs["reasoning_tokens"] > 0, (prompt, rid, mine, theirs)
            assert mine["answer_tokens"] == mine["generated_tokens"] - mine["reasoning_tokens"]
            if rid == "r/3":
                assert mine["cut"] == theirs["cut"] == 1 and mine["outputs"] == [""]
                # vLLM's parser counts the tokens between the tags: all but the opening one
                assert mine["reasoning_tokens"] == mine["generated_tokens"] - 1
            else:
                split = split_think(text)
                assert mine["outputs"] == [split.answer] and mine["reasoning"] == [split.reasoning]
                assert mine["cut"] == 0 and 0 < mine["answer_tokens"] < mine["generated_tokens"]
