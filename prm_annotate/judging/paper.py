"""The paper's answer style, its Appendix C protocol (arXiv 2501.07301): paragraphs numbered from
1, one `<analysis_k>` per paragraph in order, analysis stopped at the first wrong paragraph, then
`<conclusion>` holding Correct or Incorrect and nothing else. The conclusion names no paragraph:
under Incorrect the first error is the last paragraph analysed.

What is read, and what the paper's text lets through (docs/pipeline.md lists it for users):
- only the opening `<analysis_k>` tags locate the error, in the order written; closing tags are
  not read, since the paper's own example closes analysis 2 with `</analysis_3>`. Whatever follows
  `<analysis_k>` up to the next tag belongs to analysis k.
- the word in the conclusion may be surrounded by whitespace (the paper puts it on its own line
  and its layout is typeset, not specified) and end with one period (the paper writes the
  conclusion of "Incorrect.").
- nothing but whitespace before the first analysis or after `</conclusion>`: the paper asks to
  "respond with your analyses and conclusion directly".
Refused, each with its reason: no conclusion, an unclosed one or several; another word in it
(such as "Incorrect: paragraph 3"); an analysis after the conclusion; analyses out of order or
with a gap; more analyses than paragraphs; text before the first analysis or after the
conclusion; Incorrect with no analysis; Correct with paragraphs left unanalysed.
"""
from __future__ import annotations

import re

from prm_annotate.judging.styles import JudgeStyle, ParseFailure

_OPEN_ANALYSIS = re.compile(r"<analysis_(\d+)>")
_OPEN_CONCLUSION = "<conclusion>"
_CONCLUSION = re.compile(r"<conclusion>(.*?)</conclusion>", re.S)
_VERDICT = re.compile(r"(Correct|Incorrect)\.?")


def parse_paper(text: str, n_steps: int) -> int:
    conclusions = list(_CONCLUSION.finditer(text))
    if not conclusions:
        raise ParseFailure("an unclosed <conclusion>" if _OPEN_CONCLUSION in text else "no <conclusion>")
    if len(conclusions) > 1 or _OPEN_CONCLUSION in text[conclusions[0].end():]:
        raise ParseFailure("several <conclusion> blocks")
    conclusion = conclusions[0]
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
