"""judge: strict parsing of both prompt styles on real-looking outputs (including malformed ones),
voting, the stage with a scripted engine, and the stage on the tiny model through real vLLM."""
from __future__ import annotations

import re

import pytest

from prm_annotate.judging import JUDGE_STYLES as STYLES
from prm_annotate.judging import ParseFailure, aggregate_votes
from prm_annotate.judging.paper import parse_paper
from prm_annotate.judging.processbench import parse_processbench
from prm_annotate.records import Judged, Response
from prm_annotate.stages.judge import JudgeStage
from testing.scripted_engine import ScriptedEngine

PB_GOOD = """Let's check each paragraph.

Paragraph 0 restates the problem: Tom has 3 apples. Correct.

Paragraph 1 computes 3 + 5 = 8. Correct.

Paragraph 2 claims 8 * 2 = 17, but 8 * 2 = 16. This is the earliest error.

Therefore the index of the earliest error is \\boxed{2}."""

PAPER_GOOD = """<analysis_1>
The solution starts from 3 apples, as the problem says. This is correct.
</analysis_1>
<analysis_2>
3 + 5 = 8 is right.
</analysis_2>
<analysis_3>
8 * 2 is 16, not 17. The paragraph is wrong; it should read 8 * 2 = 16.
</analysis_3>
<conclusion>
Incorrect: paragraph 3
</conclusion>"""


@pytest.mark.parametrize("text,n,expected", [
    (PB_GOOD, 4, 2),
    ("All paragraphs are correct.\n\nFinal answer: \\boxed{-1}", 4, -1),
    ("The first error is in paragraph 0. $\\boxed{0}$", 3, 0),
    ("\\boxed{ 1 }", 3, 1),
    ("So \\boxed{2}. To repeat, the answer is \\boxed{2}.", 3, 2),  # the same answer twice is one answer
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
])
def test_processbench_refuses(text, n, why):
    with pytest.raises(ParseFailure, match=why):
        parse_processbench(text, n)


@pytest.mark.parametrize("text,n,expected", [
    (PAPER_GOOD, 4, 2),  # paragraph 3, counted from 1, is step 2
    ("<analysis_1>ok</analysis_1>\n<analysis_2>ok</analysis_2>\n<conclusion>\nCorrect\n</conclusion>", 2, -1),
    ("<conclusion>Correct.</conclusion>", 5, -1),
    ("<conclusion>incorrect, paragraph 1</conclusion>", 5, 0),
    # A bare "Incorrect", as the paper's own format has it: the analyses stop at the first error.
    ("<analysis_1>fine</analysis_1><analysis_2>wrong: 8*2 is 16</analysis_2>\n<conclusion>\nIncorrect\n</conclusion>", 4, 1),
    ("<conclusion>Incorrect: paragraph 2</conclusion> ... <conclusion>Incorrect: paragraph 2</conclusion>", 3, 1),
])
def test_paper_parses(text, n, expected):
    assert parse_paper(text, n) == expected


@pytest.mark.parametrize("text,n,why", [
    (PAPER_GOOD.replace("<conclusion>", "").replace("</conclusion>", ""), 4, "no <conclusion>"),
    ("<conclusion>Incorrect: paragraph 0</conclusion>", 4, "outside"),  # numbered from 1
    ("<conclusion>Incorrect: paragraph 5</conclusion>", 4, "outside"),
    ("<conclusion>Probably fine</conclusion>", 4, "neither"),
    ("<conclusion>Correct</conclusion>\n<conclusion>Incorrect: paragraph 2</conclusion>", 4, "conflicting"),
    ("<analysis_1>x</analysis_1><analysis_3>y</analysis_3><conclusion>Incorrect</conclusion>", 4, "bare Incorrect"),
    ("<conclusion>Incorrect</conclusion>", 4, "bare Incorrect"),
])
def test_paper_refuses(text, n, why):
    with pytest.raises(ParseFailure, match=why):
        parse_paper(text, n)


def test_forced_answer_regexes_accept_only_this_response_paragraphs():
    pb, paper = STYLES["processbench"], STYLES["paper"]
    assert re.fullmatch(pb.answer_regex(3), "\\boxed{2}") and re.fullmatch(pb.answer_regex(3), "\\boxed{-1}")
    assert not re.fullmatch(pb.answer_regex(3), "\\boxed{3}") and not re.fullmatch(pb.answer_regex(3), "{2}")
    assert re.fullmatch(paper.answer_regex(3), "<conclusion>\nIncorrect: paragraph 3\n</conclusion>")
    assert re.fullmatch(paper.answer_regex(3), "<conclusion>Correct</conclusion>")
    assert not re.fullmatch(paper.answer_regex(3), "<conclusion>Incorrect: paragraph 0</conclusion>")
    # the forced text starts with the lead the free text stopped at, and always parses
    assert pb.answer_regex(3).startswith(re.escape(pb.answer_lead))
    assert paper.answer_regex(3).startswith(re.escape(paper.answer_lead))
    assert parse_processbench("blah\n" + "\\boxed{2}", 3) == 2
    assert parse_paper("<analysis_1>x</analysis_1>" + "<conclusion>\nIncorrect: paragraph 3\n</conclusion>", 3) == 2


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


def test_prompts_render_with_their_own_numbering():
    for name, first, last in (("paper", "<paragraph_1>", "<paragraph_3>"), ("processbench", "<paragraph_0>", "<paragraph_2>")):
        stage = JudgeStage(ScriptedEngine(lambda r: ""), prompt=name)
        text = stage._messages(rec())[0]["content"]
        assert first in text and last in text and "{paragraphs}" not in text and "Tom has 3 apples" in text
    assert "<paragraph_3>" not in JudgeStage(ScriptedEngine(lambda r: ""))._messages(rec())[0]["content"]


def test_votes_are_seeded_parsed_and_aggregated():
    answers = iter(["\\boxed{1}", "I think \\boxed{-1}", "no idea", "\\boxed{1}", "\\boxed{9}"])
    engine = ScriptedEngine(lambda r: next(answers))
    stage = JudgeStage(engine, votes=5)
    [out] = list(stage.process([rec()]))
    judge = Judged.model_validate(out.records[0]).judge
    assert judge.votes == [1, -1, None, 1, None] and judge.first_error == 1 and judge.parse_failures == 2
    assert stage.config.sampling_temperature == 0.7 and len({r.seed for r in engine.requests}) == 5
    assert out.records[0].dump()["judge"]["prompt"] == "processbench"


def test_no_parsed_vote_gives_null_and_engine_failure_leaves_record_for_rerun():
    stage = JudgeStage(ScriptedEngine(lambda r: "looks fine to me"), votes=1)
    [out] = list(stage.process([rec()]))
    assert out.records[0].dump()["judge"]["first_error"] is None and out.records[0].dump()["judge"]["parse_failures"] == 1
    assert stage.config.sampling_temperature == 0.0
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
        return "<conclusion>\nIncorrect: paragraph 2\n</conclusion>"

    stage = JudgeStage(ScriptedEngine(script), prompt="paper", constrained=True)
    [out] = list(stage.process([rec()]))
    assert out.records[0].dump()["judge"]["first_error"] == 1 and out.records[0].dump()["judge"]["constrained"] is True


@pytest.mark.engine
def test_judge_on_the_tiny_model_with_and_without_constraint(vllm_engine):
    """Real vLLM, both prompts. The random tiny model writes noise: unconstrained, its verdicts
    (nearly) never parse; constrained, every one parses and lies in range."""
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
            if constrained:
                assert rates[name, True] == 0.0
                assert all(j.first_error is not None and -1 <= j.first_error < 3 for j in judged)
    print("judge parse-failure rates on the tiny model:", rates)


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
