"""DeltaBench's critic answer (OpenStellarTeam/DeltaBench `utils/prompt.py`; prompts/critic_deltabench.txt
asks for it in this project's words), read STRICTLY as a label: sections numbered from 1, either

    Conclusion: no error

or `Conclusion: yes` followed by one or more pairs

    Error Section Number: 4
    Explanation: ...

The first error is the lowest section named (0-based); -1 for no error. `evaluate --benchmark
deltabench` does not use this reader: it reads the critique as DeltaBench's script does
(evaluation/deltabench.py). This one refuses where the script guesses: no conclusion or several; a
conclusion other than `yes` or `no error`; `no error` with sections listed, or `yes` with none; a
section number that is not a bare number in 1..n; an `Error Section Number:` not followed by
exactly one `Explanation:` line; a keyword (any case or spacing) that does not open its own line
as written above; text before the conclusion. The format says each section once, so a doubled
digit or a lost pair is another well-formed answer, which no reader can tell (the `slips` style
says every label twice for this reason).
"""
from __future__ import annotations

import re

from prm_annotate.judging.styles import JudgeStyle, ParseFailure, refuse_thought

_CONCLUSION = re.compile(r"^Conclusion:[ \t]*(.*)$", re.M)
_NUMBER_LINE = re.compile(r"^Error Section Number:[ \t]*(.*)$", re.M)
_EXPLANATION = re.compile(r"^Explanation:", re.M)


# the keywords with their colons: "conclusion" or "explanation" in an explanation's prose is fine
_ANY_KEYWORD = re.compile(r"conclusion\s*:|error\s*section\s*number|explanation\s*:", re.I)
_LINE_KEYWORD = re.compile(r"^(?:Conclusion:|Error Section Number:|Explanation:)", re.M)


def _check_keywords(text: str) -> None:
    """Each keyword opens its own line, spelt so: one moved into a line, or respelt, would merge or
    split the pairs."""
    at_lines = {m.start() for m in _LINE_KEYWORD.finditer(text)}
    for m in _ANY_KEYWORD.finditer(text):
        if m.start() not in at_lines:
            raise ParseFailure(f"{m.group()!r} written where it does not open a line as `Conclusion:`, "
                               "`Error Section Number:` or `Explanation:`")


def parse_deltabench(text: str, n_steps: int) -> int:
    refuse_thought(text)
    _check_keywords(text)
    conclusions = list(_CONCLUSION.finditer(text))
    if len(conclusions) != 1:
        raise ParseFailure("no `Conclusion:` line" if not conclusions else "several `Conclusion:` lines")
    conclusion = conclusions[0]
    if text[:conclusion.start()].strip():
        raise ParseFailure("text before `Conclusion:`")
    word = conclusion.group(1).strip()
    numbers = list(_NUMBER_LINE.finditer(text))
    if word == "no error":
        if numbers or text[conclusion.end():].strip():
            raise ParseFailure("`Conclusion: no error` followed by more")
        return -1
    if word != "yes":
        raise ParseFailure(f"the conclusion {word[:30]!r} is neither `yes` nor `no error`")
    if not numbers:
        raise ParseFailure("`Conclusion: yes` with no `Error Section Number:`")
    if text[conclusion.end():numbers[0].start()].strip():
        raise ParseFailure("text between the conclusion and the first `Error Section Number:`")
    sections = []
    for i, m in enumerate(numbers):
        if not re.fullmatch(r"[1-9][0-9]*", m.group(1).strip()):
            raise ParseFailure(f"the section number {m.group(1).strip()[:20]!r} is not a number")
        k = int(m.group(1))
        if k > n_steps:
            raise ParseFailure(f"section {k} is outside 1..{n_steps}")
        stop = numbers[i + 1].start() if i + 1 < len(numbers) else len(text)
        explanations = list(_EXPLANATION.finditer(text, m.end(), stop))
        if len(explanations) != 1 or text[m.end():explanations[0].start()].strip():
            raise ParseFailure(f"section {k} is not followed by exactly one `Explanation:` line "
                               f"({len(explanations)} before the next section)")
        sections.append(k)
    return min(sections) - 1


def _answer_regex(n_steps: int) -> str:
    k = "(" + "|".join(str(i) for i in range(1, n_steps + 1)) + ")"
    return rf"Conclusion: (no error|yes(\nError Section Number: {k}\nExplanation: [^\n]{{1,40}})+)"


STYLE = JudgeStyle("deltabench", "DeltaBench's critic answer: Conclusion: yes|no error, Error Section Number: k "
                   "from 1", 1, parse_deltabench, "Conclusion:", _answer_regex)
