"""judge: strict parsing of ProcessBench-style verdicts (the paper's format: tests/judging), voting,
the stage with a scripted engine, and the stage on the tiny model through real vLLM (both
protocols; the official one against the official script's own call on the same engine)."""
from __future__ import annotations

import re

import pytest

from prm_annotate.judging import JUDGE_STYLES as STYLES
from prm_annotate.judging import ParseFailure, aggregate_votes
from prm_annotate.judging.processbench import parse_processbench
from prm_annotate.records import Judged, Response
from prm_annotate.stages.judge import JudgeStage
from testing.scripted_engine import ScriptedEngine

PB_GOOD = """Let's check each paragraph.

Paragraph 0 restates the problem: Tom has 3 apples. Correct.

Paragraph 1 computes 3 + 5 = 8. Correct.

Paragraph 2 claims 8 * 2 = 17, but 8 * 2 = 16. This is the earliest error.

Therefore the index of the earliest error is \\boxed{2}."""

@pytest.mark.parametrize("text,n,expected", [
    (PB_GOOD, 4, 2),
    ("All paragraphs are correct.\n\nFinal answer: \\boxed{-1}", 4, -1),
    ("The first error is in paragraph 0. $\\boxed{0}$", 3, 0),
    ("\\boxed{ 1 }", 3, 1),
    ("So \\boxed{2}. To repeat, the answer is \\boxed{2}.", 3, 2),  # the same answer twice is one answer
    ("So \\boxed{3}. To repeat, the answer is \\boxed{03}.", 4, 3),  # equal indices in two spellings agree
    ("\\boxed{-1}, that is \\boxed{-01}", 4, -1),
    ("\\boxed {2} and \\fbox{2}", 3, 2),  # every kind of box is read
])
def test_processbench_parses(text, n, expected):
    assert parse_processbench(text, n) == expected


@pytest.mark.parametrize("text,n,why", [
    ("Paragraph 2 is wrong.", 4, "no \\\\boxed"),
    ("The error is in \\boxed{1}... no wait, \\boxed{2}.", 4, "conflicting"),
    ("\\boxed{4}", 4, "outside"),  # paragraphs 0..3
    ("\\boxed{-2}", 4, "outside"),
    ("\\boxed{paragraph 2}", 4, "not a paragraph index"),
    ("\\boxed{2.5}", 4, "not a paragraph index"),
    ("\\boxed{\\frac{1}{2}}", 4, "not a paragraph index"),
    ("the answer is \\boxed{2", 4, "unclosed"),
    ("", 4, "no \\\\boxed"),
    ("\\boxed{1}, and the answer is \\fbox{2}", 4, "conflicting answers: 1, 2"),  # an fbox is an answer too
    ("Quoting it: \\boxed{1}. The earliest error: \\Boxed{2}", 4, "a box written \\\\Boxed"),
    ("\\boxed{1} or \\boxed{x}", 4, "not a paragraph index"),
    ("\\boxed 12", 14, "without braces"),
])
def test_processbench_refuses(text, n, why):
    with pytest.raises(ParseFailure, match=why):
        parse_processbench(text, n)


def test_forced_answer_regexes_accept_only_this_response_paragraphs():
    pb = STYLES["processbench"]
    assert re.fullmatch(pb.answer_regex(3), "\\boxed{2}") and re.fullmatch(pb.answer_regex(3), "\\boxed{-1}")
    assert not re.fullmatch(pb.answer_regex(3), "\\boxed{3}") and not re.fullmatch(pb.answer_regex(3), "{2}")
    # the forced text starts with the lead the free text stopped at, and always parses
    assert pb.answer_regex(3).startswith(re.escape(pb.answer_lead))
    assert parse_processbench("blah\n" + "\\boxed{2}", 3) == 2


@pytest.mark.parametrize("votes,expected", [
    ([2, 2, -1], 2),
    ([-1, -1, 2], -1),
    ([3, 1], 1),  # tie: the earliest error
    ([-1, 2], 2),  # tie between no error and an error: the error
    ([None, None, 4], 4),
    ([None, None], None),
    ([], None),
    ([1, 1, 3, 3, -1], 1),
])
def test_majority_vote_ties_go_to_the_earliest_error(votes, expected):
    assert aggregate_votes(votes) == expected


def rec(rid="r/0", steps=("3 + 5 = 8.", "8 * 2 = 17.", "\\boxed{17}")) -> Response:
    return Response.model_validate({"id": rid, "problem": "Tom has 3 apples. Then gets 5 more. Then doubles them.",
                                    "answer": "16", "steps": list(steps)})


def test_prompts_render_with_their_own_numbering_and_the_default_is_the_papers():
    for name, first, last in (("paper", "<paragraph_1>", "<paragraph_3>"), ("processbench", "<paragraph_0>", "<paragraph_2>")):
        stage = JudgeStage(ScriptedEngine(lambda r: ""), prompt=name)
        text = stage._messages(rec())[0]["content"]
        assert first in text and last in text and "{paragraphs}" not in text and "Tom has 3 apples" in text
    default = JudgeStage(ScriptedEngine(lambda r: ""))
    assert default.prompt.name == "paper" and default.style.name == "paper" and default.protocol.name == "strict"
    assert default._messages(rec()) == JudgeStage(ScriptedEngine(lambda r: ""), prompt="paper")._messages(rec())
    assert default.settings()["prompt"] == "paper" and default.settings()["max_tokens"] == 8192


def test_votes_are_seeded_parsed_and_aggregated():
    answers = iter(["\\boxed{1}", "I think \\boxed{-1}", "no idea", "\\boxed{1}", "\\boxed{9}"])
    engine = ScriptedEngine(lambda r: next(answers))
    stage = JudgeStage(engine, prompt="processbench", votes=5)
    [out] = list(stage.process([rec()]))
    judge = Judged.model_validate(out.records[0]).judge
    assert judge.votes == [1, -1, None, 1, None] and judge.first_error == 1 and judge.parse_failures == 2
    assert stage.sampling.temperature == 0.7 and len({r.sampling.seed for r in engine.requests}) == 5
    assert all(r.n == 1 for r in engine.requests)
    assert out.records[0].dump()["judge"]["prompt"] == "processbench"
    assert out.records[0].dump()["judge"]["protocol"] == "strict"


def test_no_parsed_vote_gives_null_and_engine_failure_leaves_record_for_rerun():
    stage = JudgeStage(ScriptedEngine(lambda r: "looks fine to me"), votes=1)
    [out] = list(stage.process([rec()]))
    assert out.records[0].dump()["judge"]["first_error"] is None and out.records[0].dump()["judge"]["parse_failures"] == 1
    assert stage.sampling.temperature == 0.0
    failing = JudgeStage(ScriptedEngine(lambda r: RuntimeError("HTTP 500")), votes=2)
    [out] = list(failing.process([rec()]))
    assert out.records == [] and "HTTP 500" in out.error


def test_constrained_mode_continues_the_analysis_with_a_forced_answer():
    def script(r):
        if r.guided_regex is None:
            assert r.stop == ("<conclusion>",)
            return "<analysis_1>fine</analysis_1>\n<analysis_2>wrong</analysis_2>\n"
        assert r.continue_final and r.messages[-1]["content"].endswith("</analysis_2>\n")
        assert r.guided_regex.startswith("<conclusion>")
        return "<conclusion>\nIncorrect\n</conclusion>"

    stage = JudgeStage(ScriptedEngine(script), prompt="paper", constrained=True)
    [out] = list(stage.process([rec()]))
    assert out.records[0].dump()["judge"]["first_error"] == 1 and out.records[0].dump()["judge"]["constrained"] is True


@pytest.mark.engine
def test_judge_on_the_tiny_model_with_and_without_constraint(vllm_engine):
    """Real vLLM, both prompts. The random tiny model writes noise: unconstrained, its verdicts
    (nearly) never parse; constrained, every processbench verdict parses and lies in range, and
    every paper verdict has the forced conclusion (what is refused is the judge's own analyses)."""
    records = [rec(f"r/{i}", steps=[f"{i} + 5 = {i + 5}.", f"{i + 5} * 2 = {2 * i + 10}.", f"\\boxed{{{2 * i + 10}}}"])
               for i in range(6)]
    rates = {}
    for name in ("processbench", "paper"):
        for constrained in (False, True):
            stage = JudgeStage(vllm_engine, prompt=name, votes=2, max_tokens=64,
                               constrained=constrained)
            outs = list(stage.process(records))
            assert all(o.error is None for o in outs)
            judged = [Judged.model_validate(o.records[0]).judge for o in outs]
            rates[name, constrained] = stage.stats["parse_failures"] / stage.stats["votes"]
            if constrained and name == "processbench":
                assert rates[name, True] == 0.0
                assert all(j.first_error is not None and -1 <= j.first_error < 3 for j in judged)
            if constrained and name == "paper":
                outputs = [text for o in outs for text in o.records[0].dump()["judge"]["outputs"]]
                assert all(re.search(r"<conclusion>\n(Correct|Incorrect)\n</conclusion>$", text) for text in outputs)
                errors = [e for o in outs for e in o.records[0].dump()["judge"].get("parse_errors", [])]
                assert not [e for e in errors if "conclusion" in e], errors
    print("judge parse-failure rates on the tiny model:", rates)


@pytest.mark.engine
def test_the_official_protocol_samples_what_the_official_script_samples(vllm_engine):
    """`--protocol processbench-official` on real vLLM against the official script's own call,
    restated (testing/processbench_script.py) on the same engine: its prompt token ids, one
    `LLM.generate` over every row, the script's SamplingParams. Greedy and 3 votes (n=3 in one
    request seeded 42); the same texts, and the prediction the script would make of them. The
    tiny model's context is 2,048 tokens, so both cap max_tokens at what the prompt leaves."""
    import json

    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from testing.processbench_script import (PROCESSBENCH, official_messages, official_prediction,
                                             official_prompt_ids, official_sampling)

    rows = json.loads((PROCESSBENCH / "gsm8k.json").read_text())[:2]
    tokenizer, llm = vllm_engine.tokenizer, vllm_engine._llm
    for votes in (1, 3):
        stage = JudgeStage(vllm_engine, protocol="processbench-official", votes=votes, engine_info={"model": "tiny"})
        outs = list(stage.process([stage.input_model.model_validate(r) for r in rows]))
        assert all(o.error is None for o in outs)
        judged = [o.records[0].dump()["judge"] for o in outs]

        ids = [official_prompt_ids(tokenizer, official_messages(r["problem"], r["steps"])) for r in rows]
        kwargs = official_sampling("tiny", votes if votes > 1 else None)
        params = [SamplingParams(**{**kwargs, "max_tokens": min(kwargs["max_tokens"], vllm_engine.max_model_len - len(i))})
                  for i in ids]
        generations = llm.generate([TokensPrompt(prompt_token_ids=i) for i in ids], params, use_tqdm=False)
        for row, judge, generation in zip(rows, judged, generations):
            texts = [c.text for c in sorted(generation.outputs, key=lambda c: c.index)]
            assert judge["outputs"] == texts, row["id"]
            assert judge["prediction"] == official_prediction(texts, voting=votes > 1)
        assert len(judged[0]["outputs"]) == votes and (votes == 1 or len(set(judged[0]["outputs"])) > 1)


def test_a_judge_template_without_paragraphs_is_refused_everywhere_the_same_way(tmp_path):
    """One check (prompt_files.check_judge_template) behind the CLI, the stage and the renderer."""
    import subprocess
    import sys

    from prm_annotate.errors import UsageError
    from prm_annotate.judging import load_judge_prompt, render_judge_prompt

    bad = tmp_path / "bad.txt"
    bad.write_text("Problem: {problem}\nFind the first wrong step.\n")
    message = f"{bad}: a judge prompt needs a {{paragraphs}} placeholder"
    with pytest.raises(UsageError) as stage_error:
        JudgeStage(ScriptedEngine(lambda r: ""), prompt=str(bad))
    assert str(stage_error.value) == message
    with pytest.raises(UsageError, match="needs a {paragraphs} placeholder"):
        render_judge_prompt(bad.read_text(), "p", ["s"])
    # A good template passes the same check: the refusal is about the placeholder, nothing else.
    good = load_judge_prompt("processbench").file
    assert "{paragraphs}" in good.text and "<paragraph_0>" in render_judge_prompt(good.text, "p", ["s"])

    responses = tmp_path / "responses.jsonl"
    responses.write_text(rec().model_dump_json() + "\n")
    out = tmp_path / "judged.jsonl"
    cli = subprocess.run([sys.executable, "-m", "prm_annotate", "judge", str(responses), "-o", str(out),
                          "--prompt", str(bad), "--model", str(tmp_path / "no-model")],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2, cli.stderr
    assert cli.stderr.strip().splitlines()[-1] == f"prm-annotate: error: {message}"
    assert not out.exists()
