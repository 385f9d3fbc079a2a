"""No reader makes up a first error: well-formed paper and ProcessBench verdicts, mutated as judges
garble them (tag case, spacing, duplication, deletion, reordering, truncation, wrappers such as
code fences, markdown headings and `<think>` blocks), read as the true index or are refused —
never another index (docs/pipeline.md, "a parse that could move the first error is a refusal").

The baseline in each test: the unmutated verdict reads as its true index, and the thought split
off a think-wrapped one reads as it too. The official ProcessBench reading takes the last box by
design (the named faithful choice), so it is held to the restated script instead, on the same
mutated critiques."""
from __future__ import annotations

import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prm_annotate.thinking.split import split_think
from prm_annotate.judging import JUDGE_STYLES, ParseFailure, aggregate_votes
from prm_annotate.judging.paper import parse_paper
from prm_annotate.judging.processbench import parse_processbench
from prm_annotate.judging.processbench_official import read_official
from testing.processbench_script import official_prediction

CASES = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Draw:
    """Hypothesis draws one seed per case (cheap), the case is built from it by a seeded RNG: a
    thousand cases take seconds. `draw(strategy-like)` takes the few shapes used below."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, what):
        return what(self.rng)


def integers(lo: int, hi: int):
    return lambda rng: rng.randint(lo, hi)


def sampled_from(items):
    items = list(items)
    return lambda rng: rng.choice(items)


SEEDS = st.integers(0, 2**32 - 1).map(Draw)

# Words a body may hold: numbers, boxes, the verdict words, brackets; never a tag, never a line
# that starts like an analysis heading (every body line starts with "Paragraph").
WORDS = ["3", "+", "5", "=", "8", "holds", "wrong", "Correct", "Incorrect", "the", "conclusion", "analysis", "of",
         "paragraph", "2", "\\boxed{17}", "$x$", "(", ")", "*", "#", "step", "-1", "is", "fine."]


def read(parse, text: str, n: int) -> int | None:
    try:
        return parse(text, n)
    except ParseFailure:
        return None


def body(rng) -> str:
    lines = [[rng.choice(WORDS) for _ in range(rng.randint(0, 8))] for _ in range(rng.randint(1, 3))]
    return "\n".join("Paragraph " + " ".join(words) for words in lines)


# ---------------------------------------------------------------- the paper's format

def paper_verdict(draw: Draw) -> tuple[str, int, int]:
    """(verdict, paragraphs, true first error)."""
    n = draw(integers(1, 8))
    first = draw(integers(-1, n - 1))
    analysed = n if first == -1 else first + 1
    parts = []
    for k in range(1, analysed + 1):
        close = k
        if k < analysed and draw(integers(0, 5)) == 0:
            close = k + 1  # the paper's own typo: </analysis_3> closing analysis 2
        sep = draw(sampled_from(["\n", "\n\n", ""]))
        parts.append(f"<analysis_{k}>\n{draw(body)}\n</analysis_{close}>{sep}")
    word = ("Correct" if first == -1 else "Incorrect") + draw(sampled_from(["", "."]))
    layout = draw(sampled_from(["<conclusion>\n{}\n</conclusion>", "<conclusion>{}</conclusion>",
                                   "<conclusion> {} </conclusion>"]))
    lead, tail = draw(sampled_from(["", "\n", "  \n"])), draw(sampled_from(["", "\n"]))
    return lead + "".join(parts) + layout.format(word) + tail, n, first


PAPER_TAG = re.compile(r"</?analysis_\d+>|</?conclusion>")


def respell(tag: str, how: int) -> str:
    """A tag written slightly off, as judges do."""
    name = tag.strip("</>")
    slash = "/" if tag.startswith("</") else ""
    return [f"<{slash}{name.capitalize()}>", f"<{slash}{name.upper()}>", f"<{slash}{name} >", f"< {slash}{name}>",
            f"<{slash}{name.replace('_', ' ')}>", f"<{slash}{name.replace('_', '')}>", f"<{slash}{name}/>",
            f"### {name.replace('_', ' ').capitalize()}", f"**{name.replace('_', ' ').capitalize()}:**",
            f"<{slash}{name.replace('_', '-')}>"][how]


def mutate_tags(draw: Draw, text: str, tag_re: re.Pattern) -> str:
    """One mutation of the tags, segments or wrapping of `text`."""
    tags = list(tag_re.finditer(text))
    kind = draw(sampled_from(["respell", "delete", "duplicate", "move", "swap", "truncate", "fence", "think",
                                 "segments"]))
    if kind == "truncate":
        return text[:draw(integers(0, max(0, len(text) - 1)))]
    if kind == "fence":
        return draw(sampled_from(["```\n{}\n```", "```xml\n{}\n```", "> {}", "**Review**\n{}"])).format(text)
    if kind == "think":
        draft = draw(sampled_from(["", "<analysis_1>\nlooks fine\n</analysis_1>", "maybe \\boxed{0}",
                                      "Analysis 2 is wrong", "<conclusion>Correct</conclusion>"]))
        return f"<think>\nLet me check each paragraph. {draft}\n</think>\n\n{text}"
    if not tags:
        return text
    i = draw(integers(0, len(tags) - 1))
    tag = tags[i]
    if kind == "respell":
        return text[:tag.start()] + respell(tag.group(), draw(integers(0, 9))) + text[tag.end():]
    if kind == "delete":
        return text[:tag.start()] + text[tag.end():]
    if kind == "duplicate":
        at = draw(integers(0, len(text)))
        return text[:at] + tag.group() + text[at:]
    if kind == "move":
        rest = text[:tag.start()] + text[tag.end():]
        at = draw(integers(0, len(rest)))
        return rest[:at] + tag.group() + rest[at:]
    if kind == "swap":
        j = draw(integers(0, len(tags) - 1))
        a, b = sorted((tag, tags[j]), key=lambda m: m.start())
        if a.start() == b.start():
            return text
        return text[:a.start()] + b.group() + text[a.end():b.start()] + a.group() + text[b.end():]
    # segments: a stretch from one tag to another, duplicated or moved
    j = draw(integers(i, len(tags) - 1))
    start, end = tag.start(), tags[j].end()
    piece = text[start:end]
    action = draw(sampled_from(["duplicate", "move"]))
    rest = text[:start] + text[end:]
    at = draw(integers(0, len(rest)))
    if action == "duplicate":
        return text[:end] + piece + text[end:]
    return rest[:at] + piece + rest[at:]


def mutated_paper(draw: Draw):
    text, n, first = paper_verdict(draw)
    mutated = text
    for _ in range(draw(integers(1, 3))):
        mutated = mutate_tags(draw, mutated, PAPER_TAG)
    return text, mutated, n, first


@CASES
@given(SEEDS)
def test_a_garbled_paper_verdict_reads_true_or_is_refused(draw):
    text, mutated, n, first = mutated_paper(draw)
    assert parse_paper(text, n) == first  # the baseline: well-formed, it reads
    got = read(parse_paper, mutated, n)
    assert got in (first, None), f"read {got}, the judge said {first}:\n{mutated}"


@CASES
@given(SEEDS, st.sampled_from(["", "I must check <analysis_1> first. \\boxed{0}", "Analysis 2: wrong."]))
def test_a_paper_verdict_after_a_thought_reads_once_the_thought_is_split_off(draw, draft):
    text, n, first = paper_verdict(draw)
    thought = f"<think>\nLet me check. {draft}\n</think>\n\n{text}"
    assert read(parse_paper, thought, n) in (first, None)  # not split: true or refused
    split = split_think(thought)
    assert parse_paper(split.answer, n) == first


def test_the_issues_catalogue_of_off_tags_is_refused():
    good = "<analysis_1>\nfine\n</analysis_1>\n<analysis_2>\nfine\n</analysis_2>\n<analysis_3>\nwrong\n</analysis_3>\n" \
           "<conclusion>\nIncorrect\n</conclusion>"
    assert parse_paper(good, 4) == 2
    for off in ("<Analysis_3>", "<analysis_3 >", "<analysis 3>", "### Analysis 3"):
        assert read(parse_paper, good.replace("<analysis_3>", off), 4) is None, off


# ---------------------------------------------------------------- ProcessBench's format

def processbench_verdict(draw: Draw) -> tuple[str, int, int]:
    n = draw(integers(1, 12))
    first = draw(integers(-1, n - 1))
    lines = [f"Paragraph {i}: {' '.join(draw.rng.choice(WORDS[:14]) for _ in range(draw.rng.randint(0, 6)))} "
             + ("This is correct." if first == -1 or i < first else "This is the earliest error.")
             for i in range(n if first == -1 else first + 1)]
    box = draw(sampled_from(["\\boxed{{{}}}", "$\\boxed{{{}}}$", "\\boxed{{ {} }}", "\\fbox{{{}}}",
                                "\\[\\boxed{{{}}}\\]"])).format(first)
    ending = draw(sampled_from(["So the earliest error is {}.", "Final answer: {}", "{}"])).format(box)
    again = draw(sampled_from(["", f" To repeat: \\boxed{{{first}}}.", f" That is \\boxed{{0{first}}}."
                                  if first >= 0 else " That is \\boxed{-01}."]))
    return "\n\n".join(lines) + "\n\n" + ending + again, n, first


BOX = re.compile(r"\\(?:boxed|fbox)\s*\{[^{}]*\}")


def mutate_boxes(draw: Draw, text: str) -> str:
    boxes = list(BOX.finditer(text))
    kind = draw(sampled_from(["case", "spacing", "spelling", "duplicate", "delete", "move", "truncate",
                                 "fence", "think", "brace"]))
    if kind == "truncate":
        return text[:draw(integers(0, max(0, len(text) - 1)))]
    if kind == "fence":
        return draw(sampled_from(["```\n{}\n```", "```latex\n{}\n```", "$${}$$"])).format(text)
    if kind == "think":
        draft = draw(sampled_from(["", "maybe \\boxed{0}", "\\boxed{-1}?", "paragraph 1 looks off"]))
        return f"<think>\nLet me check. {draft}\n</think>\n\n{text}"
    if not boxes:
        return text
    box = boxes[draw(integers(0, len(boxes) - 1))]
    b, inner = box.group(), re.search(r"\{([^{}]*)\}", box.group()).group(1)
    if kind == "case":
        new = b.replace("boxed", draw(sampled_from(["Boxed", "BOXED", "boxeD"]))).replace(
            "fbox", draw(sampled_from(["Fbox", "FBOX"])))
    elif kind == "spacing":
        new = draw(sampled_from([b.replace("{", " {", 1), b.replace("{", "{ ", 1), b.replace("}", " }"),
                                    b.replace("{", "{\n", 1)]))
    elif kind == "spelling":
        if not re.fullmatch(r"-?\d+", inner.strip()):
            return text  # a box an earlier mutation garbled
        value = int(inner.strip())
        new = b.replace(inner, draw(sampled_from([f"0{value}" if value >= 0 else "-01", f"00{value}"
                                                     if value >= 0 else "-001"])))
    elif kind == "duplicate":
        at = draw(integers(0, len(text)))
        return text[:at] + b + text[at:]
    elif kind == "delete":
        new = ""
    elif kind == "move":
        rest = text[:box.start()] + text[box.end():]
        at = draw(integers(0, len(rest)))
        return rest[:at] + b + rest[at:]
    else:  # a brace lost
        new = draw(sampled_from([b.replace("{", "", 1), b[:-1]]))
    return text[:box.start()] + new + text[box.end():]


def mutated_processbench(draw: Draw):
    text, n, first = processbench_verdict(draw)
    mutated = text
    for _ in range(draw(integers(1, 3))):
        mutated = mutate_boxes(draw, mutated)
    return text, mutated, n, first


@CASES
@given(SEEDS)
def test_a_garbled_processbench_verdict_reads_true_or_is_refused(draw):
    text, mutated, n, first = mutated_processbench(draw)
    assert parse_processbench(text, n) == first
    got = read(parse_processbench, mutated, n)
    assert got in (first, None), f"read {got}, the judge said {first}:\n{mutated}"


@CASES
@given(SEEDS, st.integers(-1, 11))
def test_a_processbench_verdict_after_a_thought_reads_once_the_thought_is_split_off(draw, draft):
    text, n, first = processbench_verdict(draw)
    thought = f"<think>\nFirst guess: \\boxed{{{draft}}}. Let me check again.\n</think>\n{text}"
    assert read(parse_processbench, thought, n) in (first, None)
    assert parse_processbench(split_think(thought).answer, n) == first


@CASES
@given(SEEDS)
def test_the_official_reading_of_garbled_critiques_is_the_official_scripts(draw):
    """The faithful choice: the last box wins, so a garbled critique may read as another index —
    exactly when the official script's reading of it does."""
    cases = [mutated_processbench(draw) for _ in range(draw(integers(1, 5)))]
    n = min(c[2] for c in cases)
    texts = [c[1] for c in cases]
    reading = read_official(texts, n, JUDGE_STYLES["processbench"])
    assert reading.extra["prediction"] == official_prediction(texts, voting=len(texts) > 1)


# ---------------------------------------------------------------- votes

@CASES
@given(st.integers(-1, 9), st.lists(st.booleans(), min_size=1, max_size=9))
def test_votes_that_each_read_true_or_refuse_aggregate_true_or_none(first, read_flags):
    votes = [first if ok else None for ok in read_flags]
    assert aggregate_votes(votes) == (first if any(read_flags) else None)


# ---------------------------------------------------------------- the tests can fail

def lenient_paper(text: str, n: int) -> int:
    """A reader with the lenient rules the strict one refuses: openings counted however the rest
    of the text looks, the word anywhere in the conclusion."""
    analyses = re.findall(r"<analysis_\d+>", text.split("<conclusion>")[0])
    conclusion = re.search(r"<conclusion>(.*?)</conclusion>", text, re.S)
    if conclusion is None or not analyses:
        raise ParseFailure("no")
    return -1 if conclusion.group(1).strip().startswith("Correct") else len(analyses) - 1


def lenient_processbench(text: str, n: int) -> int:
    """The last braced \\boxed holding an integer."""
    found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", text)
    if not found:
        raise ParseFailure("no")
    return int(found[-1])


def test_the_same_mutations_make_a_lenient_reader_fabricate():
    """The baseline for the property tests above: on the same generated cases, readers with the
    lenient rules do read other indices (often), the strict readers never."""
    for mutated_case, strict, lenient in ((mutated_paper, parse_paper, lenient_paper),
                                          (mutated_processbench, parse_processbench, lenient_processbench)):
        fabricated = {"strict": 0, "lenient": 0}
        for seed in range(1000):
            _, mutated, n, first = mutated_case(Draw(seed))
            for name, reader in (("strict", strict), ("lenient", lenient)):
                fabricated[name] += read(reader, mutated, n) not in (first, None)
        print(strict.__name__, fabricated)
        assert fabricated["strict"] == 0 and fabricated["lenient"] >= 10, (strict.__name__, fabricated)
