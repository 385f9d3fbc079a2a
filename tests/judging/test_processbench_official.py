"""`judge --protocol processbench-official` + `evaluate` against ProcessBench's own script.

QwenLM/ProcessBench `code/run_eval.py` is restated in testing/processbench_script.py: how it builds
the prompt, extracts an answer from a critique, votes, and scores a split. A catalogue of critiques (several boxes, none, spaces, non-integers, out of range, ties...) is
given to the judge stage (a scripted engine stands in for the model: this is the reading, not
the sampling; tests/stages/test_judge.py runs the sampling on real vLLM) over the ProcessBench
rows in tests/data; then, case by case, the record agrees with the restated script, and
`evaluate`'s numbers equal the script's to the last bit.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from prm_annotate.engines.sampling import sampling_record
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.judge import JudgeStage
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.processbench_script import (PROCESSBENCH, official_answer, official_messages, official_prediction,
                                         official_sampling, official_scores)
from testing.scripted_engine import ScriptedEngine

ROWS = [row for split in ("gsm8k", "math") for row in json.loads((PROCESSBENCH / f"{split}.json").read_text())]


# ---------------------------------------------------------------- the catalogue

def other(label: int, n: int) -> int:
    """An index in range that is not the label."""
    return label + 1 if label + 1 < n else label - 1


def variant(label: int) -> str:
    """Another string for the same integer: a vote apart from `str(label)` when strings are counted."""
    return f"0{label}" if label >= 0 else "-01"


def arabic(label: int) -> str:
    return str(label).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))


BOX = "So the earliest error is in paragraph \\boxed{{{}}}."
NO_BOX = "Every paragraph looks fine to me, as far as I can tell."

SINGLE = {
    "the label boxed": lambda L, n: BOX.format(L),
    "spaces inside the box": lambda L, n: f"\\boxed{{   {L} }}",
    "a newline inside the box": lambda L, n: f"\\boxed{{\n{L}\n}}",
    "in math mode": lambda L, n: f"$\\boxed{{{L}}}$",
    "several boxes, the label last": lambda L, n: f"At first \\boxed{{{other(L, n)}}}; on reflection \\boxed{{{L}}}.",
    "several boxes, the label first": lambda L, n: f"\\boxed{{{L}}}. No, wait: \\boxed{{{other(L, n)}}}.",
    "no box": lambda L, n: NO_BOX,
    "an empty box": lambda L, n: "\\boxed{}",
    "a trailing period": lambda L, n: f"\\boxed{{{L}.}}",
    "words in the box": lambda L, n: f"\\boxed{{paragraph {L}}}",
    "a braced answer": lambda L, n: f"\\boxed{{\\text{{{L}}}}}",
    "a leading zero": lambda L, n: f"\\boxed{{{variant(L)}}}",
    "a plus sign": lambda L, n: f"\\boxed{{+{L}}}",
    "an underscore": lambda L, n: f"\\boxed{{1_{L}}}",
    "Arabic-Indic digits": lambda L, n: f"\\boxed{{{arabic(L)}}}",
    "past the last step": lambda L, n: f"\\boxed{{{n}}}",
    "below -1": lambda L, n: "\\boxed{-2}",
    "a space before the brace": lambda L, n: f"\\boxed {{{L}}}",
    "an fbox": lambda L, n: f"\\fbox{{{L}}}",
    "no error claimed": lambda L, n: "\\boxed{-1}",
}

VOTING = {
    "a clear majority": lambda L, n: [BOX.format(L)] * 5 + [BOX.format(other(L, n))] * 3,
    "all eight agree": lambda L, n: [BOX.format(L)] * 8,
    "a tie, the other first": lambda L, n: [BOX.format(other(L, n)), BOX.format(L), BOX.format(L),
                                            BOX.format(other(L, n))] + [NO_BOX] * 4,
    "a tie, the label first": lambda L, n: [BOX.format(L), BOX.format(other(L, n)), BOX.format(other(L, n)),
                                            BOX.format(L)] + [NO_BOX] * 4,
    "strings counted, not integers": lambda L, n: [BOX.format(other(L, n))] * 2 + [BOX.format(variant(L))]
    + [BOX.format(L)] * 2 + [NO_BOX] * 3,
    "no box anywhere": lambda L, n: [NO_BOX] * 8,
    "critiques without a box dropped": lambda L, n: [NO_BOX] * 5 + [BOX.format(other(L, n)), BOX.format(L),
                                                                    BOX.format(L)],
    "the winner not an integer": lambda L, n: ["\\boxed{x}"] * 3 + [BOX.format(L)] * 2 + [NO_BOX] * 3,
    "the winner out of range": lambda L, n: [BOX.format(n)] * 3 + [BOX.format(L)] * 2 + [NO_BOX] * 3,
    "the last box of each critique": lambda L, n: [f"\\boxed{{{other(L, n)}}} then \\boxed{{{L}}}"] * 5
    + [BOX.format(other(L, n))] * 3,
}


def critiques_by_id(catalogue: dict, voting: bool) -> tuple[dict[str, list[str]], dict[str, str]]:
    names = list(catalogue)
    texts, case = {}, {}
    for i, row in enumerate(ROWS):
        name = names[i % len(names)]
        made = catalogue[name](row["label"], len(row["steps"]))
        texts[row["id"]], case[row["id"]] = (made if voting else [made]), name
    return texts, case


def judge_and_evaluate(tmp_path, catalogue: dict, votes: int, model: str):
    texts, case = critiques_by_id(catalogue, votes > 1)
    # Each request is known by its prompt, which must be the script's for its row.
    row_of = {official_messages(row["problem"], row["steps"])[0]["content"]: row["id"] for row in ROWS}
    engine = ScriptedEngine(lambda r: texts[row_of[r.messages[0]["content"]]][: r.n] if votes > 1
                            else texts[row_of[r.messages[0]["content"]]][0])
    src = write_jsonl(tmp_path / "processbench.jsonl", ROWS)
    out = tmp_path / "judged.jsonl"
    stage = JudgeStage(engine, protocol="processbench-official", votes=votes, engine_info={"model": model})
    summary = run_stage(stage, RunOptions(str(src), str(out), quiet=True))
    assert summary.exit_code == 0 and summary.written == len(ROWS), list(summary.failures.items())[:2]
    report = subprocess.run([sys.executable, "-m", "prm_annotate", "evaluate", str(out), "--gold", str(src), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    return {r["id"]: r for r in read_jsonl(out)}, json.loads(report.stdout), texts, case, engine


@pytest.mark.parametrize("catalogue,votes", [(SINGLE, 1), (VOTING, 8)], ids=["greedy", "voting"])
def test_judge_and_evaluate_agree_with_the_official_script_case_by_case(tmp_path, catalogue, votes):
    judged, report, texts, case, _ = judge_and_evaluate(tmp_path, catalogue, votes, "/models/Qwen2.5-72B-Instruct")
    per_split: dict[str, list[tuple[int, int | None]]] = {}
    hits_by_case: Counter = Counter()
    for row in ROWS:
        judge = judged[row["id"]]["judge"]
        expected = official_prediction(texts[row["id"]], voting=votes > 1)
        where = f"{row['id']} ({case[row['id']]})"
        assert judge["outputs"] == texts[row["id"]], where
        assert judge["prediction"] == expected, where  # the script's prediction, whatever it is
        assert judge["extracted"] == [official_answer(t) for t in texts[row["id"]]], where
        assert (judge["first_error"] == row["label"]) == (expected == row["label"]), where  # a hit in both or neither
        if judge["first_error"] is not None:
            assert judge["first_error"] == expected, where
        hits_by_case[case[row["id"]]] += expected == row["label"]
        per_split.setdefault(row["id"].split("-")[0], []).append((row["label"], expected))
    for split, rows in per_split.items():
        ours = report["splits"][split]
        assert (ours["error_acc"], ours["correct_acc"], ours["f1"]) == official_scores(rows), split
    # The catalogue exercises both outcomes: some cases always hit, some never do.
    assert 0 < sum(hits_by_case.values()) < len(ROWS)
    assert hits_by_case["no box" if votes == 1 else "no box anywhere"] == 0


def test_where_the_official_reading_and_the_strict_one_part():
    """The strict reading (for labels) refuses or decides otherwise where the script guesses."""
    from prm_annotate.judging import JUDGE_PROTOCOLS, JUDGE_STYLES

    official, strict, style = JUDGE_PROTOCOLS["processbench-official"], JUDGE_PROTOCOLS["strict"], JUDGE_STYLES["processbench"]

    def both(texts):
        return official.read(texts, 4, style), strict.read(texts, 4, style)

    o, s = both(["\\boxed{1}. No, wait: \\boxed{2}."])  # two answers: the last wins / refused
    assert (o.first_error, s.first_error) == (2, None) and "conflicting" in s.errors[0]
    o, s = both([BOX.format(2), BOX.format(1), BOX.format(1), BOX.format(2)])  # a tie: the first seen / the earliest
    assert (o.first_error, s.first_error) == (2, 1)
    o, s = both([BOX.format(2)] * 2 + [BOX.format("03")] + [BOX.format(3)] * 2)  # "03" is its own string
    assert (o.first_error, s.first_error) == (2, 3)
    o, s = both([BOX.format(4)])  # past the last of 4 steps: kept as the prediction, never a first error
    assert (o.first_error, o.extra["prediction"], s.first_error) == (None, 4, None)


def test_the_official_sampling_and_prompt_are_requested():
    row = ROWS[0]
    unset = dict(n=1, top_p=1.0, top_k=0)  # SamplingParams' defaults where the script sets nothing
    for model, votes in [("/m/Qwen2.5-72B-Instruct", 1), ("/m/Qwen2.5-Math-72B-Instruct", 8),
                         ("/m/Llama-3.3-70B-Instruct", 8), ("/m/QwQ-32B-Preview", 4), ("/m/QwQ-32B-Preview", 1)]:
        expected = {**unset, **official_sampling(model, votes if votes > 1 else None)}
        engine = ScriptedEngine(lambda r: ["\\boxed{0}"] * r.n)
        stage = JudgeStage(engine, protocol="processbench-official", votes=votes, engine_info={"model": model})
        list(stage.process([stage.input_model.model_validate(row)]))
        [request] = engine.requests  # one request for every vote, under the script's seed
        sent = {"n": request.n, **sampling_record(request.sampling)}
        assert {k: sent[k] for k in expected} == expected, model
        assert not request.continue_final and request.stop == () and request.guided_regex is None
        assert list(request.messages) == official_messages(row["problem"], row["steps"])
        settings = stage.settings()
        assert settings["protocol"] == "processbench-official" and settings["prompt"] == "processbench"
        assert settings["seed"] == 42 and settings["one_request"] is True


def test_the_prompt_is_the_official_one_even_for_a_problem_with_spaces_and_braces():
    engine = ScriptedEngine(lambda r: "\\boxed{0}")
    stage = JudgeStage(engine, protocol="processbench-official", engine_info={"model": "m"})
    row = {**ROWS[0], "problem": "  What is {x} if x = 2?\n\n", "steps": ["{x} = 2 ", " so \\boxed{2}"]}
    list(stage.process([stage.input_model.model_validate(row)]))
    assert list(engine.requests[0].messages) == official_messages(row["problem"], row["steps"])


@pytest.mark.parametrize("flags", [["--temperature", "0.5"], ["--top-k", "5"], ["--max-tokens", "100"],
                                   ["--seed", "1"], ["--prompt", "paper"], ["--constrained"], ["--style", "paper"]])
def test_options_the_protocol_sets_itself_are_refused(tmp_path, flags):
    src = write_jsonl(tmp_path / "pb.jsonl", ROWS[:1])
    out = tmp_path / "judged.jsonl"
    cli = subprocess.run([sys.executable, "-m", "prm_annotate", "judge", str(src), "-o", str(out), "--model", "m",
                          "--protocol", "processbench-official", *flags], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2, cli.stderr
    assert f"--protocol processbench-official sets {flags[0]} itself" in cli.stderr and not out.exists()
