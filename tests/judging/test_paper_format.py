"""The paper's judge protocol (Appendix C of arXiv 2501.07301) as a format: what the strict parser
reads (a bare Incorrect is the last paragraph analysed) and every malformed case docs/pipeline.md
says it refuses, each refused for its own reason."""
from __future__ import annotations

import re

import pytest

from prm_annotate.judging import JUDGE_STYLES, ParseFailure, load_judge_prompt, render_judge_prompt
from prm_annotate.judging.paper import parse_paper
from testing.paths import REPO

# The paper's own example reply (an error in the third of five paragraphs), typo included: it
# closes analysis 2 with </analysis_3>.
PAPER_EXAMPLE = """<analysis_1>
...(analysis of paragraph 1)...
</analysis_1>
<analysis_2>
...(analysis of paragraph 2)...
</analysis_3>
<analysis_3>
...(analysis of paragraph 3; since an error is found here, also provide detailed
critique and correction guideline)...
</analysis_3>
<conclusion>
Incorrect
</conclusion>"""


def analyses(*numbers: int | str, close: bool = True) -> str:
    return "\n".join(f"<analysis_{k}>\nparagraph {k} checked: 3 + 5 = 8 holds.\n" + (f"</analysis_{k}>" if close else "")
                     for k in numbers)


def reply(numbers, word: str, *, before: str = "", after: str = "") -> str:
    return f"{before}{analyses(*numbers)}\n<conclusion>\n{word}\n</conclusion>{after}"


@pytest.mark.parametrize("text,n,expected", [
    (PAPER_EXAMPLE, 5, 2),  # the last analysed paragraph, 3 counted from 1, is step 2
    (reply([1, 2, 3, 4], "Correct"), 4, -1),
    (reply([1, 2, 3, 4], "Incorrect"), 4, 3),  # every paragraph analysed, the last one wrong
    (reply([1], "Incorrect"), 4, 0),
    # "Incorrect." as the paper quotes it, and Correct written the same way
    (reply([1, 2], "Incorrect."), 4, 1),
    (reply([1, 2], "Correct."), 2, -1),
    # the layout is the typesetting's: the word inline, blank lines, whitespace around the reply
    (f"\n\n{analyses(1, 2)}\n\n<conclusion>Incorrect</conclusion>\n", 3, 1),
    (f"{analyses(1, 2)}<conclusion>  Correct  </conclusion>", 2, -1),
    # closing tags of analyses before the last may be missing or misnumbered (the paper's own typo)
    (f"{analyses(1, 2, close=False)}{analyses(3)}\n<conclusion>\nIncorrect\n</conclusion>", 3, 2),
    (f"{analyses(1, 2)}\n<conclusion>\nIncorrect\n</conclusion>", 5, 1),
])
def test_the_paper_format_is_read(text, n, expected):
    assert parse_paper(text, n) == expected


# Each case docs/pipeline.md lists as refused (the key is its wording there), with the reason.
REFUSED = {
    "no conclusion": (analyses(1, 2), 2, "no <conclusion>"),
    "an unclosed conclusion": (f"{analyses(1, 2)}\n<conclusion>\nIncor", 2, "unclosed <conclusion>"),
    "several conclusions": (reply([1, 2], "Correct") + "\n<conclusion>\nCorrect\n</conclusion>", 2,
                            "several <conclusion>"),
    "a conclusion other than Correct or Incorrect": (reply([1, 2, 3], "Incorrect: paragraph 3"), 4, "neither Correct"),
    "an analysis after the conclusion": (reply([1, 2], "Incorrect") + "\n" + analyses(3), 4,
                                         "an analysis after the conclusion"),
    "a gap in the analyses": (reply([1, 3], "Incorrect"), 4, "a gap: <analysis_3> where <analysis_2> is due"),
    "analyses out of order": (reply([1, 2, 2], "Incorrect"), 4, "out of order: <analysis_2> where <analysis_3>"),
    "more analyses than paragraphs": (reply([1, 2, 3], "Correct"), 2, "3 analyses for 2 paragraphs"),
    "text before the first analysis": (reply([1, 2], "Correct", before="Here is my review.\n"), 2,
                                       "text before <analysis_1>"),
    "text after the conclusion": (reply([1, 2], "Correct", after="\nThe answer is 8."), 2, "text after </conclusion>"),
    "Incorrect with no analysis": ("<conclusion>\nIncorrect\n</conclusion>", 3, "Incorrect with no analysis"),
    "Correct with paragraphs left unanalysed": (reply([1, 2], "Correct"), 4, "Correct, but 2 of 4 paragraphs"),
    "a tag that looks like an analysis opening but is not written exactly so": (
        reply([1, 2], "Incorrect").replace("<analysis_2>", "<Analysis_2>"), 3, "a tag written '<Analysis_2>'"),
    "an analysis opened in markdown": (
        analyses(1) + "\n### Analysis 2\nparagraph 2 is wrong.\n<conclusion>\nIncorrect\n</conclusion>", 3,
        "a line opening an analysis as '### Analysis 2'"),
    "an analysis holding two closing tags": (
        reply([1, 2], "Incorrect").replace("<analysis_2>", ""), 3, "analysis 1 holds 2 closing tags"),
    "a last analysis not closed by its own closing tag": (
        f"{analyses(1, 2, close=False)}\n<conclusion>\nIncorrect\n</conclusion>", 3,
        "the last analysis, <analysis_2>, is not closed by </analysis_2>"),
    "text between the last analysis and the conclusion": (
        f"{analyses(1, 2)}\nSo paragraph 2 is wrong.\n<conclusion>\nIncorrect\n</conclusion>", 5,
        "text between the last analysis and the conclusion"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_each_malformed_reply_is_refused_for_its_reason(case):
    text, n, reason = REFUSED[case]
    with pytest.raises(ParseFailure, match=re.escape(reason)):
        parse_paper(text, n)


@pytest.mark.parametrize("text,n", [
    (reply([0, 1], "Correct"), 2),  # numbered from 0, as ProcessBench's prompt does
    (reply(["01", 2], "Correct"), 2),
    (reply([1, 2], "correct"), 2),  # the paper writes Correct / Incorrect
    (reply([1, 2], "**Correct**"), 2),
    (reply([1, 2], "Correct!"), 2),
    (reply([1, 2], "Incorrect, paragraph 2"), 2),
    (reply([2, 3], "Incorrect"), 4),  # not starting at 1
    ("```\n" + reply([1, 2], "Correct") + "\n```", 2),
    # the catalogue: a slightly-off last analysis tag must not merge into the one before it
    (reply([1, 2, 3], "Incorrect").replace("<analysis_3>", "<Analysis_3>"), 4),
    (reply([1, 2, 3], "Incorrect").replace("<analysis_3>", "<analysis_3 >"), 4),
    (reply([1, 2], "Incorrect").replace("<analysis_2>", "<analysis 2>"), 4),
    (reply([1, 2], "Incorrect").replace("<analysis_2>", "< analysis_2>"), 4),
    (reply([1, 2], "Incorrect").replace("<analysis_2>", "**Analysis 2:**"), 4),
    (reply([1, 2], "Incorrect").replace("<conclusion>", "<Conclusion>"), 4),
    (reply([1, 2], "Incorrect").replace("</analysis_2>", "</analysis_2 >"), 4),
    ("<think>\nLet me check.\n</think>\n" + reply([1, 2], "Incorrect"), 4),  # reasoning is split off before
])
def test_near_misses_are_refused_too(text, n):
    with pytest.raises(ParseFailure):
        parse_paper(text, n)


def test_the_docs_list_every_refused_case():
    pipeline = (REPO / "docs" / "pipeline.md").read_text()
    missing = [case for case in REFUSED if case not in pipeline]
    assert not missing, f"docs/pipeline.md does not list: {missing}"


def test_the_built_in_prompt_asks_for_the_papers_format():
    prompt = load_judge_prompt("paper")
    assert prompt.style.name == "paper" and prompt.style.first_paragraph == 1
    text = prompt.file.text
    assert "<conclusion>\nCorrect/Incorrect\n</conclusion>" in text and "<conclusion>\nIncorrect\n</conclusion>" in text
    assert "paragraph 3" in text and "Incorrect: paragraph" not in text
    rendered = render_judge_prompt(text, "Tom has 3 apples.", ["3 + 5 = 8.", "\\boxed{8}"], start=1)
    assert "<paragraph_1>\n3 + 5 = 8.\n</paragraph_1>\n\n<paragraph_2>\n\\boxed{8}\n</paragraph_2>" in rendered
    assert "<math_problem>\nTom has 3 apples.\n</math_problem>" in rendered


def test_the_forced_conclusion_is_the_papers_and_settles_only_the_word():
    style = JUDGE_STYLES["paper"]
    regex = style.answer_regex(3)
    assert regex.startswith(re.escape(style.answer_lead))
    assert re.fullmatch(regex, "<conclusion>\nIncorrect\n</conclusion>")
    assert re.fullmatch(regex, "<conclusion>\nCorrect\n</conclusion>")
    assert not re.fullmatch(regex, "<conclusion>\nIncorrect: paragraph 3\n</conclusion>")
    # the analyses are still the judge's: a forced Correct over two of three analyses is refused
    with pytest.raises(ParseFailure, match="Correct, but 2 of 3"):
        parse_paper(analyses(1, 2) + "\n" + "<conclusion>\nCorrect\n</conclusion>", 3)
    assert parse_paper(analyses(1, 2) + "\n" + "<conclusion>\nIncorrect\n</conclusion>", 3) == 1
