"""`evaluate --benchmark deltabench`: DeltaBench's section metric (OpenStellarTeam/DeltaBench
evaluation.py) on rows written here in its published shape (none of its own rows: the repository
has no licence), against the metric computed by hand and against the script restated in
testing/deltabench_script.py; a PRM's section scores (a section's lowest step's) at a threshold;
the thinking world's traces exported to the format, run end to end with the truth as predictions
and with a perturbed prediction; the critic prompt and its strict reader."""
from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.io.inputs import read_records
from prm_annotate.judging import ParseFailure, load_judge_prompt, render_judge_prompt
from prm_annotate.judging.deltabench import parse_deltabench
from prm_annotate.evaluation import deltabench
from prm_annotate.world.deltabench import trace_rows
from testing import deltabench_script
from testing.jsonl_files import write_jsonl

runner = CliRunner()


def sections(n: int) -> str:
    return "\n\n".join(f"section{k}:\nWork of part {k}: 3 + {k} = {3 + k}." for k in range(1, n + 1))


def row(rid: str | None, n: int, errors: list[int], unuseful: list[int], task: str) -> dict:
    out = {"question": f"Question {rid}?", "sections_content": sections(n), "reason_error_section_numbers": errors,
           "reason_unuseful_section_numbers": unuseful, "task_l1": task}
    return out if rid is None else {"id": rid, **out}


def yes(*numbers: str) -> str:
    return "Conclusion: yes\n" + "\n".join(f"Error Section Number: {k}\nExplanation: wrong sum." for k in numbers)


# (row, critique): each case a rule of the script, its result worked out by hand below.
FIXTURE = [
    (row("a", 5, [2], [4], "math"), yes("2", "5")),  # 5 is past the last gold section (4): dropped
    (row("b", 4, [1, 3], [], "math"), yes("section 3", "none")),  # "none" has no digits: section -1, a FP
    (row("c", 3, [], [], "code"), "Conclusion: no error"),  # error-free: left out of every average
    (row("d", 3, [2], [2], "code"), "Conclusion: no error"),  # gold {2}: nothing found
    (row("e", 3, [3], [], "code"), ""),  # an empty critique: left out
    (row("f", 2, [1], [], "code"), "Looking at the eyes of it.\nError Section Number: 1\nExplanation: x"),  # "yes"
    (row(None, 2, [1], [], "code"), None),  # no prediction
]
# By hand. a: pred {2}, gold {2,4}: TP1 FP0 FN1, P 1, R 1/2, F1 2/3. b: pred {3,-1}, gold {1,3}:
# TP1 FP1 FN1, P R F1 1/2. d: TP0 FP0 FN1, all 0. f: pred {1}: TP1, all 1.
HAND = {
    "Overall": dict(precision_macro=(1 + .5 + 0 + 1) / 4, recall_macro=(.5 + .5 + 0 + 1) / 4,
                    f1_macro=(2 / 3 + .5 + 0 + 1) / 4, precision_micro=3 / 4, recall_micro=3 / 6, f1_micro=0.6),
    "math": dict(precision_macro=.75, recall_macro=.5, f1_macro=(2 / 3 + .5) / 2, precision_micro=2 / 3,
                 recall_micro=.5, f1_micro=4 / 7),
    "code": dict(precision_macro=.5, recall_macro=.5, f1_macro=.5, precision_micro=1.0, recall_micro=.5,
                 f1_micro=2 / 3),
}


def files(tmp_path, fixture=FIXTURE):
    gold = tmp_path / "deltabench.jsonl"
    write_jsonl(gold, [r for r, _ in fixture])
    ids = [r["id"] for _, r in read_records(gold, "deltabench")]
    preds = tmp_path / "judged.jsonl"
    write_jsonl(preds, [{"id": rid, "judge": {"outputs": [c]}} for rid, (_, c) in zip(ids, fixture) if c is not None])
    return gold, preds


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["evaluate", *args, "--benchmark", "deltabench", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_metric_is_the_one_computed_by_hand_and_the_scripts(tmp_path):
    gold, preds = files(tmp_path)
    got = run_json(str(preds), "--gold", str(gold))
    for name, want in HAND.items():
        have = got["overall"] if name == "Overall" else got["tasks"][name]
        assert {k: have[k] for k in want} == pytest.approx(want), name
    assert got["overall"]["rows"] == 4 and got["tasks"]["math"]["rows"] == 2
    assert got["rows"]["a"]["predicted"] == [2] and got["rows"]["b"]["predicted"] == [3, -1]
    assert got["left_out"] == {"error_free_rows": ["c"], "empty_critiques": ["e"],
                               "missing_predictions": ["deltabench-deltabench-6"]}
    # the script restated, in its own order (pandas' mean skipping the rows written without metrics)
    script = deltabench_script.get_metrics([{**r, "critic": c} for r, c in FIXTURE if c is not None])
    for name, want in script.items():
        have = got["overall"] if name == "Overall" else got["tasks"][name]
        assert have["f1_macro"] == pytest.approx(want["f1_score_macro"]) and have["f1_micro"] == pytest.approx(
            want["f1_micro"]) and have["recall_macro"] == pytest.approx(want["recall_macro"])
    table = runner.invoke(app, ["evaluate", str(preds), "--gold", str(gold), "--benchmark", "deltabench"])
    assert table.exit_code == 0 and "54.17" in table.output and "1 error-free row(s) left out" in table.output


def test_a_prms_section_is_its_lowest_step_at_the_threshold(tmp_path):
    gold = tmp_path / "deltabench.jsonl"
    write_jsonl(gold, [row("a", 3, [2], [], "math"), row("b", 2, [1], [], "math")])
    preds = tmp_path / "scored.jsonl"
    # a: five paragraph scores in sections 1,1,2,3,3; lowest per section 0.9, 0.3, 0.45 -> {2, 3} below 0.5;
    # 3 is past the last gold section (2): dropped, so P 1 R 1. b: one score per section: {2}, dropped: all 0.
    write_jsonl(preds, [{"id": "a", "prm": {"scores": [0.9, 0.95, 0.3, 0.8, 0.45]}, "step_sections": [1, 1, 2, 3, 3]},
                        {"id": "b", "prm": {"scores": [0.7, 0.2]}}])
    got = run_json(str(preds), "--gold", str(gold), "--threshold", "0.5")
    assert got["rows"]["a"]["predicted"] == [2] and got["rows"]["b"]["predicted"] == []
    assert got["overall"]["f1_macro"] == pytest.approx(0.5) and got["overall"]["recall_micro"] == pytest.approx(0.5)
    # the same scores at 0.25: a finds nothing (0.3 is above), b section 2 dropped: every rate 0
    got = run_json(str(preds), "--gold", str(gold), "--threshold", "0.25")
    assert got["overall"]["f1_macro"] == 0 and got["threshold"]["value"] == 0.25
    assert deltabench.section_scores([0.9, 0.95, 0.3], [1, 1, 2], 2) == [0.9, 0.3]
    with pytest.raises(ValueError, match="no step_sections"):
        deltabench.section_scores([0.9, 0.95, 0.3], None, 2)


def test_bad_rows_are_refused_naming_file_and_line(tmp_path):
    gold = tmp_path / "deltabench.jsonl"
    bad = row("a", 3, [4], [], "math")
    write_jsonl(gold, [row("z", 2, [1], [], "math"), bad])
    preds = tmp_path / "judged.jsonl"
    write_jsonl(preds, [{"id": "a", "judge": {"outputs": ["Conclusion: no error"]}}])
    result = runner.invoke(app, ["evaluate", str(preds), "--gold", str(gold), "--benchmark", "deltabench"])
    assert result.exit_code == 2 and "deltabench.jsonl:2:" in result.output and "section 4 is labelled" in result.output
    write_jsonl(gold, [{**bad, "sections_content": "section1:\na\n\nsection3:\nb", "reason_error_section_numbers": [1]}])
    result = runner.invoke(app, ["evaluate", str(preds), "--gold", str(gold), "--benchmark", "deltabench"])
    assert result.exit_code == 2 and "numbered in order" in result.output


def test_the_thinking_worlds_traces_run_end_to_end(tmp_path):
    rows = trace_rows(60, seed=3, per_section=2)
    assert sum(bool(r["reason_error_section_numbers"]) for r in rows) >= 20  # the export has errors to find
    assert any(len(r["reason_error_section_numbers"]) > 1 for r in rows)
    for r in rows:  # each error section holds a slip paragraph of the truth; the sections give the text back
        slips = {s["step"] for s in r["truth"]["slips"]}
        assert r["reason_error_section_numbers"] == sorted({r["paragraph_sections"][i] for i in slips})
        assert [p for s in deltabench_sections(r) for p in s.split("\n\n")] == r["paragraphs"]
    gold = tmp_path / "world.jsonl"
    write_jsonl(gold, rows)
    with_errors = [r for r in rows if r["reason_error_section_numbers"]]
    truth = {r["id"]: yes(*map(str, r["reason_error_section_numbers"])) if r["reason_error_section_numbers"]
             else "Conclusion: no error" for r in rows}
    preds = tmp_path / "truth.jsonl"
    write_jsonl(preds, [{"id": rid, "judge": {"outputs": [c]}} for rid, c in truth.items()])
    got = run_json(str(preds), "--gold", str(gold))
    assert got["overall"]["rows"] == len(with_errors) and got["overall"]["f1_macro"] == 1.0
    assert len(got["left_out"]["error_free_rows"]) == len(rows) - len(with_errors)
    # a PRM scoring paragraphs as the truth does (low on a slip): its sections, their lowest paragraph's
    scored = tmp_path / "scored.jsonl"
    write_jsonl(scored, [{"id": r["id"], "step_sections": r["paragraph_sections"], "prm": {"scores": [
        0.1 if i in {s["step"] for s in r["truth"]["slips"]} else 0.9 for i in range(len(r["paragraphs"]))]}}
        for r in rows])
    assert run_json(str(scored), "--gold", str(gold), "--threshold", "0.5")["overall"]["f1_macro"] == 1.0
    # perturbed, by hand: deltabench-3-4 (gold {1, 2}) names only 2: P 1, R 1/2, F1 2/3; deltabench-3-2
    # (gold {1}) says no error: all 0; deltabench-3-1 (gold {1}) names 1 and 2, and 2 is past its last
    # gold section, dropped (the script's rule): unchanged. The other 39 rows stay at 1.
    assert len(with_errors) == 42
    assert [next(r for r in rows if r["id"] == f"deltabench-3-{i}")["reason_error_section_numbers"]
            for i in (4, 2, 1)] == [[1, 2], [1], [1]]
    truth.update({"deltabench-3-4": yes("2"), "deltabench-3-2": "Conclusion: no error", "deltabench-3-1": yes("1", "2")})
    write_jsonl(preds, [{"id": rid, "judge": {"outputs": [c]}} for rid, c in truth.items()])
    got = run_json(str(preds), "--gold", str(gold))["overall"]
    assert got["precision_macro"] == pytest.approx(41 / 42) and got["recall_macro"] == pytest.approx(40.5 / 42)
    assert got["f1_macro"] == pytest.approx((40 + 2 / 3) / 42)
    gold_sections = sum(len(r["reason_error_section_numbers"]) for r in with_errors)
    assert got["precision_micro"] == 1.0 and got["recall_micro"] == pytest.approx((gold_sections - 2) / gold_sections)


def deltabench_sections(r: dict) -> list[str]:
    from prm_annotate.io.inputs.deltabench import sections as split_sections
    return split_sections(r["sections_content"])


def test_the_critic_prompt_names_sections_and_its_strict_reader_refuses_what_the_script_guesses():
    prompt = load_judge_prompt("deltabench")
    assert prompt.style.name == "deltabench" and prompt.style.first_paragraph == 1
    text = render_judge_prompt(prompt.file.text, "Q?", ["a", "b"], start=prompt.style.first_paragraph)
    assert "section1:\na\n\nsection2:\nb" in text and "Conclusion: no error" in text
    assert parse_deltabench(yes("4", "2"), 5) == 1 and parse_deltabench("Conclusion: no error\n", 3) == -1
    assert parse_deltabench("Conclusion: yes\nError Section Number: 2\nExplanation: its conclusion is wrong.", 3) == 1
    for bad, n in [(yes("section 3"), 4), (yes("6"), 5), ("Conclusion: yes", 3), ("Looking at eyes\n" + yes("1"), 2),
                   ("Conclusion: no error\nError Section Number: 2\nExplanation: x", 3),
                   ("Conclusion: yes\nError Section Number: 2", 3), ("Conclusion: probably", 3)]:
        with pytest.raises(ParseFailure):
            parse_deltabench(bad, n)
    # the same critiques the benchmark's reading takes (its sections, a guess): the label reader never does
    assert deltabench.critic_sections(yes("section 3")) == [3]
    assert deltabench.critic_sections("Looking at eyes\n" + yes("1")) == [1]


# ---------------------------------------------------------------- the strict reader, generated cases

def critique(rng, n: int) -> tuple[str, int]:
    named = sorted(rng.sample(range(1, n + 1), rng.randint(0, min(4, n))))
    rng.shuffle(named)  # a critic may list them in any order; the first error is the lowest
    if not named:
        return "Conclusion: no error" + rng.choice(["", "\n"]), -1
    pairs = [f"Error Section Number: {k}\nExplanation: {rng.choice(['3 + 4 is 7', 'wrong sign', 'eyes: yes'])}."
             for k in named]
    return "Conclusion: yes\n" + "\n".join(pairs) + rng.choice(["", "\n"]), min(named) - 1


KEYWORD = re.compile(r"Conclusion:|Error Section Number:|Explanation:|yes|no error")


def garble_structure(rng, text: str) -> str:
    """One garble of the answer's structure: a keyword dropped, doubled, moved or respelt, a line
    dropped or doubled (not a pair), a second conclusion, a thought left in. (A cut answer is not
    among them: the judge refuses a vote cut at --max-tokens before reading it, and a list cut
    between pairs is another well-formed answer: the limits test.)"""
    kind = rng.choice(["keyword drop", "keyword double", "keyword move", "respell", "line", "second", "think"])
    if kind == "second":
        return text + "\nConclusion: " + rng.choice(["no error", "yes\nError Section Number: 1\nExplanation: x"])
    if kind == "think":
        return "<think>\nmaybe section 1\n</think>\n" + text
    if kind == "line":
        lines = text.split("\n")
        k = rng.randrange(len(lines))
        if lines[k].startswith("Error Section Number:"):  # a number line and its pair: see the limits test
            return text
        return "\n".join(lines[:k] + lines[k + 1:] if rng.random() < 0.5 else lines[:k + 1] + lines[k:])
    m = rng.choice(list(KEYWORD.finditer(text)))
    rest = text[:m.start()] + text[m.end():]
    if kind == "keyword drop":
        return rest
    if kind == "keyword double":
        return text[:m.end()] + m.group() + text[m.end():]
    if kind == "respell":
        return text[:m.start()] + rng.choice([m.group().upper(), m.group().lower(), m.group().replace(":", " :"),
                                              "**" + m.group() + "**"]) + text[m.end():]
    at = rng.randrange(len(rest) + 1)
    return rest[:at] + m.group() + rest[at:]


CASES = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@CASES
@given(st.integers(0, 2**32 - 1).map(random.Random))
def test_the_strict_reader_reads_every_well_formed_critique_and_a_garbled_one_right_or_not_at_all(rng):
    n = rng.randint(1, 30)
    text, first = critique(rng, n)
    assert parse_deltabench(text, n) == first
    mutated = garble_structure(rng, text)
    try:
        got = parse_deltabench(mutated, n)
    except ParseFailure:
        got = None
    assert got in (first, None), f"read {got}, the critic said {first}:\n{mutated}"


def test_the_limits_of_the_format_no_reader_can_see():
    """DeltaBench's answer says each section once: a doubled digit, a lost pair or a list cut between
    pairs is another well-formed answer, read as it now says (the slips style says every label
    twice, and counts them, for this)."""
    assert parse_deltabench(yes("2"), 30) == 1 and parse_deltabench(yes("22"), 30) == 21
    assert parse_deltabench(yes("2", "5"), 9) == 1 and parse_deltabench(yes("5"), 9) == 4
