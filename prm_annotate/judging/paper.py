"""The paper's answer style, its Appendix C protocol (arXiv 2501.07301): paragraphs numbered from
1, one `<analysis_k>` per paragraph in order, analysis stopped at the first wrong paragraph, then
`<conclusion>` holding Correct or Incorrect and nothing else. The conclusion names no paragraph:
under Incorrect the first error is the last paragraph analysed, so every rule below asks one
thing: could reading this verdict put the first error anywhere but where the judge put it? Where
it could, the verdict is refused (docs/pipeline.md lists the rules for users).

Read:
- the opening `<analysis_k>` tags, exactly so written, locate the error, in the order written.
  Whatever follows `<analysis_k>` up to the next tag belongs to analysis k.
- closing tags of an analysis other than the last may carry another number: the paper's own
  example closes analysis 2 with `</analysis_3>`.
- the word in the conclusion may be surrounded by whitespace (the paper puts it on its own line
  and its layout is typeset, not specified) and end with one period (the paper writes the
  conclusion of "Incorrect.").
Refused, each with its reason: a tag that looks like an analysis or conclusion tag but is not
written exactly so (`<Analysis_3>`, `<analysis_3 >`, `<analysis 3>`, `</ conclusion>`), or a
line that opens an analysis in markdown (`### Analysis 3`, `**Analysis 3:**`): such an analysis
would be merged into the one before it and move the error one paragraph early; no conclusion, an
unclosed one or several; another word in it (such as "Incorrect: paragraph 3"); an analysis after
the conclusion; analyses out of order or with a gap; more analyses than paragraphs; text before
the first analysis or after the conclusion; an analysis holding two closing tags, or a last
analysis not closed by its own `</analysis_k>` (a lost opening tag would otherwise merge two
analyses), or text between the last analysis and the conclusion; Incorrect with no analysis;
Correct with paragraphs left unanalysed.
"""
from __future__ import annotations

import re

from prm_annotate.judging.styles import JudgeStyle, ParseFailure, refuse_thought

_OPEN_ANALYSIS = re.compile(r"<analysis_(\d+)>")
_CLOSE_ANALYSIS = re.compile(r"</analysis_(\d+)>")
_OPEN_CONCLUSION = "<conclusion>"
_CONCLUSION = re.compile(r"<conclusion>(.*?)</conclusion>", re.S)
_VERDICT = re.compile(r"(Correct|Incorrect)\.?")
# Anything a reader could take for an analysis or conclusion tag, in any spelling.
_TAG_LIKE = re.compile(r"<\s*/?\s*(?:analysis|conclusion)\b[^<>]{0,40}>|<\s*/?\s*analysis[\s_-]*\d+[^<>]{0,20}>", re.I)
_EXACT_TAG = re.compile(r"</?analysis_\d+>|</?conclusion>")
# A line opening an analysis in markdown or plain words: "### Analysis 3", "**Analysis 3:**", "Analysis_2".
_HEADING = re.compile(r"^[ \t>#*_\-]*analysis[ \t_#:-]*(?:of[ \t]+paragraph[ \t]*)?\d+", re.I | re.M)


def _check_spelling(text: str) -> None:
    for m in _TAG_LIKE.finditer(text):
        if not _EXACT_TAG.fullmatch(m.group()):
            raise ParseFailure(f"a tag written {m.group()!r}, not <analysis_k>, </analysis_k> or <conclusion>")
    m = _HEADING.search(text)
    if m is not None:
        raise ParseFailure(f"a line opening an analysis as {m.group().strip()[:30]!r}, not <analysis_k>")


def _check_closing(text: str, analyses: list[re.Match], end: int) -> None:
    """Each analysis holds at most one closing tag; the last is closed by its own, then the conclusion."""
    for i, tag in enumerate(analyses):
        stop = analyses[i + 1].start() if i + 1 < len(analyses) else end
        closings = list(_CLOSE_ANALYSIS.finditer(text, tag.end(), stop))
        if len(closings) > 1:
            raise ParseFailure(f"analysis {tag.group(1)} holds {len(closings)} closing tags")
        if i + 1 == len(analyses):
            if not closings or closings[0].group(1) != tag.group(1):
                raise ParseFailure(f"the last analysis, <analysis_{tag.group(1)}>, is not closed by "
                                   f"</analysis_{tag.group(1)}>")
            if text[closings[0].end():stop].strip():
                raise ParseFailure("text between the last analysis and the conclusion")
    if not analyses and _CLOSE_ANALYSIS.search(text, 0, end):
        raise ParseFailure("a closing </analysis_k> with no analysis opened")


def the_conclusion(text: str) -> re.Match:
    """The one `<conclusion>` of a verdict whose tags are all spelt right (no thought left in it)."""
    refuse_thought(text)
    _check_spelling(text)
    conclusions = list(_CONCLUSION.finditer(text))
    if not conclusions:
        raise ParseFailure("an unclosed <conclusion>" if _OPEN_CONCLUSION in text else "no <conclusion>")
    if len(conclusions) > 1 or _OPEN_CONCLUSION in text[conclusions[0].end():]:
        raise ParseFailure("several <conclusion> blocks")
    return conclusions[0]


def parse_paper(text: str, n_steps: int) -> int:
    conclusion = the_conclusion(text)
    verdict = _VERDICT.fullmatch(conclusion.group(1).strip())
    if verdict is None:
        raise ParseFailure(f"the conclusion {conclusion.group(1).strip()[:40]!r} is neither Correct nor Incorrect")
    if _OPEN_ANALYSIS.search(text, conclusion.end()):
        raise ParseFailure("an analysis after the conclusion")
    if text[conclusion.end():].strip():
        raise ParseFailure("text after </conclusion>")
    analyses = list(_OPEN_ANALYSIS.finditer(text, 0, conclusion.start()))
    for due, tag in enumerate(analyses, 1):
        if tag.group(1) != str(due):
            kind = "a gap" if int(tag.group(1)) > due else "out of order"
            raise ParseFailure(f"analyses {kind}: <analysis_{tag.group(1)}> where <analysis_{due}> is due")
    if len(analyses) > n_steps:
        raise ParseFailure(f"{len(analyses)} analyses for {n_steps} paragraphs")
    if text[: analyses[0].start() if analyses else conclusion.start()].strip():
        raise ParseFailure("text before <analysis_1>")
    _check_closing(text, analyses, conclusion.start())
    if verdict.group(1) == "Correct":
        if len(analyses) != n_steps:
            raise ParseFailure(f"Correct, but {len(analyses)} of {n_steps} paragraphs analysed")
        return -1
    if not analyses:
        raise ParseFailure("Incorrect with no analysis to locate the error")
    return len(analyses) - 1


def _answer_regex(n_steps: int) -> str:
    # The conclusion names no paragraph, so forcing it cannot make a verdict whose analyses are
    # misnumbered parse: constrained decoding settles the word, the analyses stay the judge's.
    return r"<conclusion>\n(Correct|Incorrect)\n</conclusion>"


STYLE = JudgeStyle("paper", "the paper's Appendix C: <analysis_k> from 1, <conclusion>Correct|Incorrect", 1,
                   parse_paper, "<conclusion>", _answer_regex)
