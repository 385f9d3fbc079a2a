"""The `slips` answer style and the `recovery` protocol: the paper's Appendix C format carried past
the first error, so a judge says every slip of a trace and whether and where it is corrected
(issue 49; the labels' shape is prm_annotate/recovery/labels.py).

The judge analyses EVERY paragraph (numbered from 1), each `<analysis_k>` ending with one verdict
line, then lists the slips in `<conclusion>`:

    <analysis_1>
    ...
    Verdict: no slip
    </analysis_1>
    <analysis_2>
    ...
    Verdict: slip
    </analysis_2>
    <analysis_3>
    ...
    Verdict: no slip, corrects paragraph 2
    </analysis_3>
    <conclusion>
    Slips: 1
    Paragraph 2: corrected in paragraph 3
    </conclusion>

A verdict line is `Verdict: slip` or `Verdict: no slip` (a step wrong only because it carries an
earlier slip is "no slip": it starts no error), either followed by `, corrects paragraph j` or
`, corrects paragraph j and paragraph k ...` (a step may correct several slips and slip itself).
The conclusion's first line is `Slips: N`, then N lines `Paragraph k: corrected in paragraph j` or
`Paragraph k: not corrected`, k ascending. With no slip: `Slips: 0` alone.

Every label is said twice (the analyses' verdicts and the conclusion) and the count once more, so
one garbled token (a digit doubled, a word lost, a line dropped) makes them disagree and the
verdict is refused rather than read as other labels. Beyond the paper style's refusals
(paper.py: tag spellings, closings, order, gaps, text outside the tags), refused with reasons:
fewer or more analyses than paragraphs; an analysis with no verdict line last, or two; a malformed
verdict or conclusion line; a count that is not the number of lines; slips not ascending or out
of range; a correction not after its slip or past the last paragraph; a conclusion that disagrees
with an analysis.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

from prm_annotate.judging.paper import _OPEN_ANALYSIS, _check_closing, the_conclusion
from prm_annotate.judging.protocols import JudgeProtocol, Reading, read_each, strict_sampling
from prm_annotate.judging.styles import JudgeStyle, ParseFailure
from prm_annotate.recovery.labels import Recovery, Slip

_NUMBER = r"[1-9][0-9]*"
_VERDICT_LINE = re.compile(rf"Verdict: (no slip|slip)(?:, corrects (paragraph {_NUMBER}(?: and paragraph {_NUMBER})*))?")
_STARTS_VERDICT = re.compile(r"^\W*verdict\b", re.I | re.M)
_COUNT = re.compile(r"Slips: (0|[1-9][0-9]*)")
_SLIP_LINE = re.compile(rf"Paragraph ({_NUMBER}): (?:corrected in paragraph ({_NUMBER})|not corrected)")


def _verdict(body: str, k: int) -> tuple[bool, tuple[int, ...]]:
    """(slips here, the paragraphs it corrects) from analysis k's last line."""
    lines = [line.strip() for line in body.strip().splitlines() if line.strip()]
    said = [line for line in lines if _STARTS_VERDICT.match(line)]
    if len(said) != 1 or not lines or not _STARTS_VERDICT.match(lines[-1]):
        raise ParseFailure(f"analysis {k} does not end with one verdict line (found {len(said)})")
    m = _VERDICT_LINE.fullmatch(lines[-1])
    if m is None:
        raise ParseFailure(f"analysis {k}'s verdict {lines[-1][:50]!r} is not `Verdict: slip|no slip[, corrects "
                           "paragraph j]`")
    corrects = tuple(int(x) for x in re.findall(r"\d+", m.group(2) or ""))
    return m.group(1) == "slip", corrects


def _conclusion(block: str, n_steps: int) -> Recovery:
    lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
    count = _COUNT.fullmatch(lines[0]) if lines else None
    if count is None:
        raise ParseFailure(f"the conclusion does not open with `Slips: N` ({(lines or [''])[0][:40]!r})")
    if int(count.group(1)) != len(lines) - 1:
        raise ParseFailure(f"the conclusion says Slips: {count.group(1)} and lists {len(lines) - 1}")
    slips = []
    for line in lines[1:]:
        m = _SLIP_LINE.fullmatch(line)
        if m is None:
            raise ParseFailure(f"the conclusion line {line[:50]!r} is not `Paragraph k: corrected in paragraph j` "
                               "or `Paragraph k: not corrected`")
        step, at = int(m.group(1)), None if m.group(2) is None else int(m.group(2))
        if step > n_steps or (at is not None and at > n_steps):
            raise ParseFailure(f"paragraph {max(step, at or 0)} is outside 1..{n_steps}")
        if slips and step <= slips[-1].step + 1:
            raise ParseFailure(f"slips not in ascending order: paragraph {step} after {slips[-1].step + 1}")
        if at is not None and at <= step:
            raise ParseFailure(f"paragraph {step} corrected in paragraph {at}, not after it")
        slips.append(Slip(step - 1, None if at is None else at - 1))
    return Recovery(tuple(slips))


def parse_slips(text: str, n_steps: int) -> Recovery:
    """Every slip and its correction, or ParseFailure saying why the verdict is not read."""
    conclusion = the_conclusion(text)
    if text[conclusion.end():].strip():
        raise ParseFailure("text after </conclusion>")
    analyses = list(_OPEN_ANALYSIS.finditer(text, 0, conclusion.start()))
    for due, tag in enumerate(analyses, 1):
        if tag.group(1) != str(due):
            raise ParseFailure(f"analyses out of order or with a gap: <analysis_{tag.group(1)}> where "
                               f"<analysis_{due}> is due")
    if len(analyses) != n_steps:
        raise ParseFailure(f"{len(analyses)} analyses for {n_steps} paragraphs (every paragraph is analysed)")
    if text[:analyses[0].start() if analyses else conclusion.start()].strip():
        raise ParseFailure("text before <analysis_1>")
    _check_closing(text, analyses, conclusion.start())
    said_slip: list[int] = []
    said_corrects: dict[int, set[int]] = {}
    for i, tag in enumerate(analyses):
        stop = analyses[i + 1].start() if i + 1 < len(analyses) else conclusion.start()
        body = re.sub(r"</analysis_\d+>", "", text[tag.end():stop])
        slipped, corrects = _verdict(body, i + 1)
        if slipped:
            said_slip.append(i)
        for j in corrects:
            if j > i or j < 1:
                raise ParseFailure(f"analysis {i + 1} corrects paragraph {j}, not an earlier one")
            said_corrects.setdefault(j - 1, set()).add(i)
    recovery = _conclusion(conclusion.group(1), n_steps)
    if [s.step for s in recovery.slips] != said_slip:
        raise ParseFailure(f"the conclusion's slips (paragraphs {[s.step + 1 for s in recovery.slips]}) are not the "
                           f"analyses' ({[i + 1 for i in said_slip]})")
    for s in recovery.slips:
        fixed = said_corrects.pop(s.step, set())
        if fixed != ({s.corrected_at} if s.corrected_at is not None else set()):
            raise ParseFailure(f"the conclusion and the analyses disagree on where paragraph {s.step + 1} is corrected")
    if said_corrects:
        raise ParseFailure(f"an analysis corrects paragraph {min(said_corrects) + 1}, which no slip is")
    return recovery


def _answer_regex(n_steps: int) -> str:
    # The lines' indices are forced into range; their order and agreement with the analyses stay the
    # judge's, read by the parser.
    k = "(?:" + "|".join(str(i) for i in range(1, n_steps + 1)) + ")"
    line = rf"Paragraph {k}: (corrected in paragraph {k}|not corrected)\n"
    return rf"<conclusion>\nSlips: [0-9]+\n({line}){{0,{n_steps}}}</conclusion>"


STYLE = JudgeStyle("slips", "every slip and its correction: <analysis_k> from 1, each ending in a verdict; "
                   "<conclusion> lists the slips", 1,
                   lambda text, n: parse_slips(text, n).first_error(), "<conclusion>", _answer_regex, parse_slips)


def read_recovery(texts: list[str], n_steps: int, style: JudgeStyle, cut: Sequence[bool] = (),
                  refused: Sequence[str | None] = ()) -> Reading:
    """Each vote read by `parse_slips` (cut or refused votes are not read, as under `strict`); the
    recovery labels are the ones a strict majority of the read votes give, identical; none: null,
    and `first_error` null with them, so consensus never pairs a first error with other slips."""
    if style.name != STYLE.name:
        raise ParseFailure(f"--protocol recovery reads the slips style, not {style.name}")
    read, errors = read_each(texts, n_steps, parse_slips, cut, refused)
    parsed = [r for r in read if r is not None]
    extra: dict[str, Any] = {"recovery": None}
    if parsed:
        top, count = Counter(parsed).most_common(1)[0]
        if 2 * count > len(parsed):
            extra["recovery"] = top.to_json()
        else:
            extra["recovery_problem"] = f"no majority: {len(set(parsed))} different readings of {len(parsed)} votes"
    first = None if extra["recovery"] is None else Recovery.from_json(extra["recovery"], n_steps).first_error()
    return Reading(first, [None if r is None else r.first_error() for r in read], errors, extra)


PROTOCOL = JudgeProtocol(
    "recovery", "labels beyond the first error: every slip and its correction (prompt slips); a strict majority's "
    "reading", "slips", strict_sampling, read_recovery,
    # the forced conclusion grows with the paragraphs: past FORCED_ANSWER_TOKENS it would be cut
    fixed=("constrained",))
