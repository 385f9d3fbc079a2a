"""The `slips` answer style (the `recovery` protocol): every well-formed verdict reads as the labels
it says, and every garbled one reads as them too or is refused, never as other labels.

Cases are generated (a seed per case, the case built by a seeded RNG: a thousand take about a
second): traces of 1-30 paragraphs with 0-5 slips, corrected later, never, several by one
paragraph, a slip that is itself a correction; analyses of free text that quotes the format's own
words. Each mutated case applies ONE garble (a token dropped, doubled or swapped with its
neighbour, a number changed, a line dropped, doubled or moved, a tag respelt, dropped, doubled or
moved, a second conclusion, the text cut): two garbles made to agree are a different verdict, which
no reader can tell from a real one."""
from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prm_annotate.judging import JUDGE_PROTOCOLS, JUDGE_STYLES, ParseFailure, load_judge_prompt
from prm_annotate.judging.protocols import CUT
from prm_annotate.judging.slips import parse_slips, read_recovery
from prm_annotate.recovery.labels import Recovery, Slip

CASES = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(0, 2**32 - 1).map(random.Random)
# Free text of an analysis: numbers and the format's own words, never a line opening with "Verdict".
WORDS = ["3", "+", "5", "=", "8", "holds", "wrong", "slip", "no", "corrects", "paragraph", "Paragraph", "2:",
         "corrected", "in", "not", "Slips:", "1", "is", "the", "value", "verdict", "fine.", "(", ")", "$x$", "17"]


def random_recovery(rng: random.Random, n: int) -> Recovery:
    steps = sorted(rng.sample(range(n), rng.randint(0, min(5, n))))
    slips = []
    for s in steps:
        later = list(range(s + 1, n))
        at = rng.choice(later) if later and rng.random() < 0.6 else None
        if later and slips and slips[-1].corrected_at is not None and rng.random() < 0.3 \
                and slips[-1].corrected_at > s:
            at = slips[-1].corrected_at  # one paragraph correcting two slips
        slips.append(Slip(s, at))
    return Recovery(tuple(slips))


def free_text(rng: random.Random) -> str:
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9))) for _ in range(rng.randint(1, 3))]
    return "\n".join("Here " + line for line in lines)


def verdict(rng: random.Random, recovery: Recovery, n: int) -> str:
    slipped = {s.step for s in recovery.slips}
    parts = []
    for i in range(n):
        fixed = sorted(s.step + 1 for s in recovery.slips if s.corrected_at == i)
        line = "Verdict: " + ("slip" if i in slipped else "no slip")
        if fixed:
            line += ", corrects " + " and ".join(f"paragraph {j}" for j in fixed)
        sep = rng.choice(["\n", "\n\n", ""])
        parts.append(f"<analysis_{i + 1}>\n{free_text(rng)}\n{line}\n</analysis_{i + 1}>{sep}")
    lines = [f"Slips: {len(recovery.slips)}"] + [
        f"Paragraph {s.step + 1}: " + ("not corrected" if s.corrected_at is None else
                                       f"corrected in paragraph {s.corrected_at + 1}") for s in recovery.slips]
    block = rng.choice(["\n", "\n\n"]).join(lines)
    lead, tail = rng.choice(["", "\n", " \n"]), rng.choice(["", "\n"])
    return f"{lead}{''.join(parts)}<conclusion>\n{block}\n</conclusion>{tail}"


def case(rng: random.Random) -> tuple[str, int, Recovery]:
    n = rng.randint(1, 30)
    recovery = random_recovery(rng, n)
    return verdict(rng, recovery, n), n, recovery


TOKEN = re.compile(r"\d+|[A-Za-z]+|\s+|.", re.S)
TAG = re.compile(r"</?analysis_\d+>|</?conclusion>")


def garble(rng: random.Random, text: str, n: int) -> str:
    tokens = TOKEN.findall(text)
    i = rng.randrange(len(tokens))
    kind = rng.choice(["drop", "double", "swap", "number", "drop line", "double line", "move line", "tag",
                       "second conclusion", "cut"])
    if kind == "drop":
        return "".join(tokens[:i] + tokens[i + 1:])
    if kind == "double":
        return "".join(tokens[:i + 1] + tokens[i:])
    if kind == "swap":
        j = min(i + 1, len(tokens) - 1)
        tokens[i], tokens[j] = tokens[j], tokens[i]
        return "".join(tokens)
    if kind == "number":
        numbers = [k for k, t in enumerate(tokens) if t.isdigit()]
        k = rng.choice(numbers)
        tokens[k] = str(rng.choice([0, n, n + 1, n + 2, int(tokens[k]) + 1, max(0, int(tokens[k]) - 1),
                                    rng.randint(0, n + 3)]))
        return "".join(tokens)
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    if kind == "drop line":
        return "\n".join(lines[:k] + lines[k + 1:])
    if kind == "double line":
        return "\n".join(lines[:k + 1] + lines[k:])
    if kind == "move line":
        line = lines.pop(k)
        lines.insert(rng.randrange(len(lines) + 1), line)
        return "\n".join(lines)
    if kind == "tag":
        tag = rng.choice(list(TAG.finditer(text)))
        how = rng.choice(["respell", "drop", "double", "move"])
        rest = text[:tag.start()] + text[tag.end():]
        if how == "respell":
            return text[:tag.start()] + rng.choice([tag.group().upper(), tag.group().replace("_", " "),
                                                    tag.group().replace(">", " >")]) + text[tag.end():]
        if how == "drop":
            return rest
        at = rng.randrange(len(rest) + 1)
        return (text[:at] + tag.group() + text[at:]) if how == "double" else (rest[:at] + tag.group() + rest[at:])
    if kind == "second conclusion":
        other = random_recovery(rng, n)
        block = "\n".join([f"Slips: {len(other.slips)}"] + [f"Paragraph {s.step + 1}: not corrected"
                                                            for s in other.slips])
        return text.rstrip() + f"\n<conclusion>\n{block}\n</conclusion>"
    return text[:rng.randrange(len(text))]


def read(text: str, n: int) -> Recovery | None:
    try:
        return parse_slips(text, n)
    except ParseFailure:
        return None


@CASES
@given(SEEDS)
def test_every_well_formed_verdict_reads_as_it_says(rng):
    text, n, recovery = case(rng)
    assert parse_slips(text, n) == recovery, text
    assert JUDGE_STYLES["slips"].parse(text, n) == recovery.first_error()


@CASES
@given(SEEDS)
def test_every_garbled_verdict_reads_as_it_says_or_is_refused(rng):
    text, n, recovery = case(rng)
    assert parse_slips(text, n) == recovery  # the baseline: unmutated, it reads
    mutated = garble(rng, text, n)
    got = read(mutated, n)
    assert got in (recovery, None), f"read {got}, the judge said {recovery}:\n{mutated}"


def test_a_lenient_reader_of_the_conclusion_alone_would_fabricate():
    """The baseline for the property above: the same garbles aimed at the conclusion, read from the
    conclusion alone (no cross-check with the analyses), give other labels; the strict reader never."""
    from prm_annotate.judging.paper import _CONCLUSION
    from prm_annotate.judging.slips import _conclusion

    def lenient(text: str, n: int) -> Recovery | None:
        m = _CONCLUSION.search(text)
        try:
            return _conclusion(m.group(1), n) if m else None
        except (ParseFailure, ValueError):
            return None

    rng = random.Random(7)
    fabricated = strict = 0
    for _ in range(1000):
        text, n, recovery = case(rng)
        head, lead, tail = text.partition("<conclusion>")
        mutated = head + garble(rng, lead + tail, n)
        fabricated += lenient(mutated, n) not in (recovery, None)
        strict += read(mutated, n) not in (recovery, None)
    assert fabricated >= 10 and strict == 0, (fabricated, strict)


THREE = "\n".join(f"<analysis_{k}>\nchecked.\nVerdict: {v}\n</analysis_{k}>" for k, v in
                  [(1, "no slip"), (2, "slip"), (3, "no slip, corrects paragraph 2")])


@pytest.mark.parametrize("text,n,reason", [
    (THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: not corrected\n</conclusion>", 3, "disagree on where paragraph 2"),
    (THREE + "\n<conclusion>\nSlips: 2\nParagraph 2: corrected in paragraph 3\n</conclusion>", 3, "lists 1"),
    (THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: corrected in paragraph 3\n</conclusion>", 4, "3 analyses for 4"),
    (THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: corrected in paragraph 1\n</conclusion>", 3, "not after it"),
    (THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: corrected in paragraph 5\n</conclusion>", 3, "outside 1..3"),
    (THREE.replace("Verdict: slip", "Verdict: an error") + "\n<conclusion>\nSlips: 0\n</conclusion>", 3,
     "is not `Verdict"),
    (THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: corrected in paragraph 3\n</conclusion>\n"
     "<conclusion>\nSlips: 0\n</conclusion>", 3, "several <conclusion>"),
])
def test_each_disagreement_is_refused_for_its_reason(text, n, reason):
    with pytest.raises(ParseFailure, match=re.escape(reason)):
        parse_slips(text, n)


def test_the_protocol_fills_recovery_and_its_first_error_from_the_majority():
    style = JUDGE_STYLES["slips"]
    good = THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: corrected in paragraph 3\n</conclusion>"
    other = good.replace("no slip, corrects paragraph 2", "no slip").replace("corrected in paragraph 3",
                                                                             "not corrected")
    r = read_recovery([good], 3, style)
    assert r.first_error == 1 and r.extra["recovery"] == {"slips": [{"step": 1, "corrected_at": 2}]}
    r = read_recovery([good, other, good], 3, style)
    assert r.first_error == 1 and r.votes == [1, 1, 1] and r.extra["recovery"]["slips"][0]["corrected_at"] == 2
    # two readings that share the first error but not the correction: no majority, nothing written
    r = read_recovery([good, other], 3, style)
    assert r.first_error is None and r.extra["recovery"] is None and "no majority" in r.extra["recovery_problem"]
    r = read_recovery([good, "garbled"], 3, style, cut=[True, False])
    assert r.first_error is None and r.errors == [CUT, "no <conclusion>"]
    assert JUDGE_PROTOCOLS["recovery"].prompt == "slips" and load_judge_prompt("slips").style is style


def test_the_judge_stage_writes_recovery_beside_its_first_error():
    from prm_annotate.errors import UsageError
    from prm_annotate.records import Response
    from prm_annotate.stages.judge import JudgeStage
    from testing.scripted_engine import ScriptedEngine

    good = THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: corrected in paragraph 3\n</conclusion>"
    texts = {"a": good, "b": good.replace("Slips: 1", "Slips: 2")}
    stage = JudgeStage(ScriptedEngine(lambda r: next(t for i, t in texts.items() if i in r.key)), protocol="recovery")
    assert stage.prompt.name == "slips" and stage.style.name == "slips"
    records = [Response(id=i, problem="3 + 5 - 2?", steps=["3 + 5 = 8.", "8 - 2 = 5.", "Wait: 8 - 2 = 6."])
               for i in texts]
    a, b = [o.records[0].dump()["judge"] for o in stage.process(records)]
    assert a["protocol"] == "recovery" and a["first_error"] == 1 and a["votes"] == [1]
    assert a["recovery"] == {"slips": [{"step": 1, "corrected_at": 2}]} and "parse_errors" not in a
    assert b["first_error"] is None and b["recovery"] is None and b["parse_errors"] == [
        "the conclusion says Slips: 2 and lists 1"]
    with pytest.raises(UsageError, match="--constrained"):
        JudgeStage(ScriptedEngine(lambda r: good), protocol="recovery", constrained=True)


def test_an_answer_that_thinks_again_must_say_the_same_slips_both_times():
    """Two answers in one vote with the same first slip but another correction are two verdicts."""
    from prm_annotate.engines.base import GenerationResult
    from prm_annotate.records import Response
    from prm_annotate.stages.judge import JudgeStage
    from testing.scripted_engine import ScriptedEngine

    good = THREE + "\n<conclusion>\nSlips: 1\nParagraph 2: corrected in paragraph 3\n</conclusion>"
    other = good.replace("no slip, corrects paragraph 2", "no slip").replace("corrected in paragraph 3", "not corrected")
    texts = {"same": good + "\n<think>\nLet me look again.\n</think>\n" + good,
             "differ": good + "\n<think>\nLet me look again.\n</think>\n" + other}

    def script(r):
        text = next(t for i, t in texts.items() if i in r.key)
        return GenerationResult(key=r.key, texts=[text], reasonings=["I check each paragraph."], finish_reasons=["stop"],
                                prompt_tokens=10, generated_tokens=50, reasoning_tokens=5)

    stage = JudgeStage(ScriptedEngine(script), protocol="recovery", reasoning="think")
    records = [Response(id=i, problem="3 + 5 - 2?", steps=["3 + 5 = 8.", "8 - 2 = 5.", "Wait: 8 - 2 = 6."])
               for i in texts]
    same, differ = [o.records[0].dump()["judge"] for o in stage.process(records)]
    assert same["recovery"] == {"slips": [{"step": 1, "corrected_at": 2}]}
    assert JUDGE_STYLES["slips"].parse(other, 3) == JUDGE_STYLES["slips"].parse(good, 3)  # the first errors agree
    assert differ["recovery"] is None and "two different verdicts" in differ["parse_errors"][0]
