"""`evaluate` on ProcessBench's four splits as users download them (the Hugging Face repo's JSON
arrays, the Hub's Parquet files), the paper's average F1, and a PRM's step scores cut at a
threshold given or tuned on one split and applied to the others. Every number is checked against
a plain restatement of run_eval.py's metric and of SCAN-PRM's threshold rule, written here."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.evaluation.metrics import mean_f1
from prm_annotate.evaluation.labels import split_of_file
from prm_annotate.stages.score import first_below as score_stage_rule
from testing.labelled_fixtures import reference_metric, write_jsonl
from testing.processbench_files import HF_PROCESSBENCH, SPLITS, hf_form, hf_split, step_scores, write_parquet_layout

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["evaluate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def scan_prm_prediction(scores: list[float], threshold: float) -> int:
    """SCAN-PRM src/eval_prm/main_pb.py, as it is written there."""
    pred = -1
    for idx, step_reward in enumerate(scores):
        if step_reward < threshold:
            pred = idx
            break
    return pred


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [r for s in SPLITS for r in hf_split(s)]


@pytest.fixture(scope="module")
def scored(rows, tmp_path_factory) -> Path:
    """`score` output for every row: the response, its step scores and the score stage's own first
    error at 0.5 (the PRM itself is not what is under test)."""
    records = [{"id": r["id"], "problem": r["problem"], "steps": r["steps"],
                "prm": {"scores": step_scores(r), "first_error": score_stage_rule(step_scores(r), 0.5),
                        "threshold": 0.5, "model": "fixture-prm"}} for r in rows]
    return write_jsonl(tmp_path_factory.mktemp("scored") / "scored.jsonl", records)


def test_the_shipped_splits_are_in_their_downloaded_form(rows):
    """The fixture is what a download holds (the form, the card), and `datasets` reads it through
    the card's data_files as run_eval.py's load_dataset('Qwen/ProcessBench', split=...) does."""
    from datasets import load_dataset

    for split in SPLITS:
        data = (HF_PROCESSBENCH / f"{split}.json").read_bytes()
        split_rows = json.loads(data)
        assert hf_form(split_rows) == data
        assert [list(r) for r in split_rows[:1]] == [["id", "generator", "problem", "steps", "final_answer_correct", "label"]]
        assert sum(r["label"] == -1 for r in split_rows) == sum(r["label"] != -1 for r in split_rows) == 12
        official = load_dataset(str(HF_PROCESSBENCH), split=split)
        assert official.to_list() == split_rows
    assert "path: \"omnimath.json\"" in (HF_PROCESSBENCH / "README.md").read_text()


@pytest.mark.parametrize("name, split", [
    ("gsm8k.json", "gsm8k"), ("math.jsonl", "math"), ("default/olympiadbench/0000.parquet", "olympiadbench"),
    ("data/omnimath-00000-of-00001.parquet", "omnimath"), ("snapshots/abc123/gsm8k.json", "gsm8k"),
])
def test_split_names_from_file_names(name, split):
    assert split_of_file(Path(name)) == split


def gold_inputs(tmp: Path, rows_by_split: dict[str, list[dict]]) -> dict[str, list[str]]:
    """The same gold in every form a user may have it: --gold arguments per form."""
    json_dir = tmp / "json"
    json_dir.mkdir()
    shutil.copy(HF_PROCESSBENCH / "README.md", json_dir)
    for split, split_rows in rows_by_split.items():
        (json_dir / f"{split}.json").write_bytes(hf_form(split_rows))
    forms = {"json folder": [str(json_dir)],
             "json files": [str(json_dir / f"{s}.json") for s in rows_by_split]}
    for layout in ("converted", "push_to_hub"):
        files = write_parquet_layout(tmp / layout, layout, rows_by_split, shards=2 if layout == "converted" else 1)
        forms[f"{layout} folder"] = [str(tmp / layout)]
        forms[f"{layout} files"] = [str(p) for p in files]
    return forms


def test_every_downloaded_form_gives_run_eval_metric_and_the_unweighted_average(rows, tmp_path):
    """One split cut to half its rows, so the splits differ in size: the paper's average (the plain
    mean of split F1s) then differs from a mean weighted by responses, and only the first passes."""
    by_split = {s: hf_split(s) for s in SPLITS}
    by_split["gsm8k"] = [r for r in by_split["gsm8k"] if int(r["id"].split("-")[1]) % 2 == 0]
    kept = [r for s in SPLITS for r in by_split[s]]
    assert len(by_split["gsm8k"]) < len(by_split["math"])
    # Predictions a little off the gold: exact, one step late, or "no error", in turn (on gsm8k,
    # the small split, only every fourth is "no error").
    preds = {r["id"]: ([r["label"], r["label"], r["label"], -1][i % 4] if r["id"].startswith("gsm8k-") else
                       [r["label"], min(r["label"] + 1, len(r["steps"]) - 1), -1][i % 3]) for i, r in enumerate(kept)}
    path = write_jsonl(tmp_path / "preds.jsonl", [{"id": k, "first_error": v} for k, v in preds.items()])
    expected, expected_avg = reference_metric(kept, preds)
    weighted = sum(v[2] * v[3] for v in expected.values()) / sum(v[3] for v in expected.values())
    assert abs(weighted - expected_avg) > 0.5  # the data tells the two averages apart
    for form, args in gold_inputs(tmp_path, by_split).items():
        out = run_json(str(path), *[a for g in args for a in ("--gold", g)])
        assert list(out["splits"]) == list(SPLITS), form
        for split, (acc1, acc2, f1, n) in expected.items():
            m = out["splits"][split]
            assert (m["error_acc"], m["correct_acc"], m["n"]) == (pytest.approx(acc1), pytest.approx(acc2), n), form
            assert m["f1"] == pytest.approx(f1), form
        assert out["average_f1"] == pytest.approx(expected_avg), form
        assert out["processbench"]["absent"] == [] and out["processbench"]["complete"] is False


def test_table7_average_is_the_plain_mean():
    """arXiv 2501.07301 Table 7: Qwen2.5-Math-PRM-7B's split F1s and its reported Avg. F1 73.5."""
    f1s = [82.4, 77.6, 67.5, 66.3]  # gsm8k, math, olympiadbench, omnimath
    assert round(mean_f1(f1s), 1) == 73.5
    weighted = sum(f * n for f, n in zip(f1s, [400, 1000, 1000, 1000])) / 3400
    assert round(weighted, 1) != 73.5
    assert round(mean_f1([87.3, 80.6, 74.3, 71.1]), 1) == 78.3  # the 72B row (78.325)


def reference_f1(rows: list[dict], scores: dict[str, list[float]], threshold: float) -> tuple[dict, float]:
    return reference_metric(rows, {r["id"]: scan_prm_prediction(scores[r["id"]], threshold) for r in rows})


def test_threshold_tuned_on_one_split_is_applied_to_the_others(rows, scored):
    scores = {r["id"]: step_scores(r) for r in rows}
    gsm8k = [r for r in rows if r["id"].startswith("gsm8k-")]
    out = run_json(str(scored), "--gold", str(HF_PROCESSBENCH), "--tune-threshold-on", "gsm8k")
    t = out["threshold"]
    assert (t["chosen"], t["tuned_on"]) == ("tuned on gsm8k", "gsm8k")

    # The choice: no threshold does better on gsm8k, and SCAN-PRM's own sweep (0, 0.05, ..., 0.95)
    # does no better either. The rule's outcome changes only at a score, so trying each score and
    # just above each tries every outcome there is.
    values = sorted({s for r in gsm8k for s in scores[r["id"]]})
    brute = max(reference_f1(gsm8k, scores, c)[1] for c in [0.0, *values, *(v + 1e-9 for v in values)])
    grid = max(reference_f1(gsm8k, scores, k * 0.05)[1] for k in range(20))
    assert t["tuning_f1"] == pytest.approx(brute) and brute >= grid
    assert reference_f1(gsm8k, scores, t["value"])[1] == pytest.approx(brute)

    # The tuned split stands apart; the others are scored at its threshold, by the plain rule.
    assert list(out["tuned_split"]) == ["gsm8k"] and list(out["splits"]) == ["math", "olympiadbench", "omnimath"]
    assert out["tuned_split"]["gsm8k"]["f1"] == pytest.approx(brute)
    held = [r for r in rows if not r["id"].startswith("gsm8k-")]
    expected, expected_avg = reference_f1(held, scores, t["value"])
    for split, (acc1, acc2, f1, n) in expected.items():
        assert (out["splits"][split]["error_acc"], out["splits"][split]["correct_acc"]) == (
            pytest.approx(acc1), pytest.approx(acc2))
        assert out["splits"][split]["f1"] == pytest.approx(f1)
    assert out["average_f1"] == pytest.approx(expected_avg) and out["average_over"] == list(expected)
    _, all_four = reference_f1(rows, scores, t["value"])
    assert out["average_f1_with_tuned_split"] == pytest.approx(all_four)

    # Tuned on a split, that split scores at least as well as when the threshold comes from another
    # (the appendix's per-split upper bound); here the PRM's harder-split shift makes it strictly better.
    own = run_json(str(scored), "--gold", str(HF_PROCESSBENCH), "--tune-threshold-on", "omnimath")
    assert own["threshold"]["value"] < t["value"]
    assert own["tuned_split"]["omnimath"]["f1"] > out["splits"]["omnimath"]["f1"]


def test_table_says_which_threshold_and_how(scored):
    tuned = runner.invoke(app, ["evaluate", str(scored), "--gold", str(HF_PROCESSBENCH), "--tune-threshold-on", "math"])
    assert tuned.exit_code == 0, tuned.output
    assert "tuned on math" in tuned.stdout and "math (tuned)" in tuned.stdout
    assert "average F1 over 3 held-out split(s)" in tuned.stdout
    assert "gsm8k 24 of 400" in tuned.stdout and "not comparable with published figures" in tuned.stdout
    given = runner.invoke(app, ["evaluate", str(scored), "--gold", str(HF_PROCESSBENCH), "--threshold", "0.5"])
    assert given.exit_code == 0 and "threshold 0.5 (given)" in given.stdout and "(tuned)" not in given.stdout


def test_a_given_threshold_is_the_score_stage_rule(rows, scored, tmp_path):
    """At the score run's own threshold, cutting `prm.scores` gives its `prm.first_error`, and the
    first-error path still reads that field; scores may also come as Parquet, one file per split."""
    at_scores = run_json(str(scored), "--gold", str(HF_PROCESSBENCH), "--threshold", "0.5")
    at_first_error = run_json(str(scored), "--gold", str(HF_PROCESSBENCH), "--pred-field", "prm.first_error")
    assert at_scores["threshold"] == {"value": 0.5, "chosen": "given", "tuned_on": None, "tuning_f1": None,
                                      "candidates": 0}
    assert at_first_error["threshold"] is None and at_first_error["pred_field"] == "prm.first_error"
    assert at_scores["splits"] == at_first_error["splits"] and at_scores["average_f1"] == at_first_error["average_f1"]
    expected, _ = reference_f1(rows, {r["id"]: step_scores(r) for r in rows}, 0.5)
    assert {s: m["f1"] for s, m in at_scores["splits"].items()} == pytest.approx({s: v[2] for s, v in expected.items()})

    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [json.loads(line) for line in scored.read_text().splitlines()]
    parts = []
    for split in SPLITS:
        parts.append(tmp_path / f"{split}.scored.parquet")
        pq.write_table(pa.Table.from_pylist([r for r in records if r["id"].startswith(f"{split}-")]), parts[-1])
    from_parquet = run_json(*map(str, parts), "--gold", str(HF_PROCESSBENCH), "--threshold", "0.5")
    assert from_parquet["splits"] == at_scores["splits"]


def test_bad_split_inputs_are_exit_2(tmp_path, scored):
    gold = str(HF_PROCESSBENCH)
    # a split file under another split's name: named by file and row
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    (swapped / "math.json").write_bytes(hf_form(hf_split("olympiadbench")))
    bad = runner.invoke(app, ["evaluate", str(scored), "--gold", str(swapped), "--threshold", "0.5"])
    assert bad.exit_code == 2 and "math.json" in bad.stderr and "olympiadbench record in a file of split math" in bad.stderr
    # two copies of one split in a folder
    twice = tmp_path / "twice"
    write_parquet_layout(twice, "push_to_hub", {"gsm8k": hf_split("gsm8k")})
    (twice / "gsm8k.json").write_bytes(hf_form(hf_split("gsm8k")))
    bad = runner.invoke(app, ["evaluate", str(scored), "--gold", str(twice)])
    assert bad.exit_code == 2 and "more than one copy of split gsm8k" in bad.stderr
    # a folder without split files; an id given twice across files
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = runner.invoke(app, ["evaluate", str(scored), "--gold", str(empty)])
    assert bad.exit_code == 2 and "no ProcessBench split files" in bad.stderr
    bad = runner.invoke(app, ["evaluate", str(scored), "--gold", gold, "--gold", str(HF_PROCESSBENCH / "math.json")])
    assert bad.exit_code == 2 and "duplicate id 'math-0'" in bad.stderr
    # threshold options
    both = runner.invoke(app, ["evaluate", str(scored), "--gold", gold, "--threshold", "0.5", "--tune-threshold-on", "math"])
    assert both.exit_code == 2 and "give one" in both.stderr
    nosuch = runner.invoke(app, ["evaluate", str(scored), "--gold", gold, "--tune-threshold-on", "aime"])
    assert nosuch.exit_code == 2 and "no such split" in nosuch.stderr and "omnimath" in nosuch.stderr
    unscored = write_jsonl(tmp_path / "fe.jsonl", [{"id": "gsm8k-0", "first_error": 1}])
    absent = runner.invoke(app, ["evaluate", str(unscored), "--gold", gold, "--threshold", "0.5"])
    assert absent.exit_code == 2 and "no record has the field 'prm.scores'" in absent.stderr
    short = write_jsonl(tmp_path / "short.jsonl", [{"id": "gsm8k-0", "prm": {"scores": [0.5]}}])
    mismatch = runner.invoke(app, ["evaluate", str(short), "--gold", gold, "--threshold", "0.5"])
    assert mismatch.exit_code == 2 and "gsm8k-0: 1 step scores for the gold's" in mismatch.stderr
    high = write_jsonl(tmp_path / "high.jsonl", [{"id": "gsm8k-0", "steps": ["a", "b"], "prm": {"scores": [0.5, 1.5]}}])
    outside = runner.invoke(app, ["evaluate", str(high), "--gold", gold, "--threshold", "0.5"])
    assert outside.exit_code == 2 and f"{high}:1:" in outside.stderr and "outside [0, 1]" in outside.stderr
