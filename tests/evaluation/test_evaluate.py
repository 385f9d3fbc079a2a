"""`evaluate`: the ProcessBench metric on the real ProcessBench splits, checked against a plain
independent computation, plus the diagnostics and the CLI's JSON and error handling."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.evaluation.evaluate import evaluate
from prm_annotate.evaluation.label_sets import read_gold, read_predictions
from testing.labelled_fixtures import (
    PROCESSBENCH,
    processbench,
    reference_metric,
    write_jsonl,
)

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["evaluate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def both_splits(tmp_path_factory) -> tuple[list[dict], Path]:
    rows = processbench("gsm8k") + processbench("math")
    path = tmp_path_factory.mktemp("gold") / "processbench.json"
    path.write_text(json.dumps(rows))
    return rows, path


@pytest.mark.parametrize("split", ["gsm8k", "math"])
def test_gold_as_predictions_scores_100(split, tmp_path):
    gold = PROCESSBENCH / f"{split}.json"
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": r["id"], "first_error": r["label"]} for r in processbench(split)])
    out = run_json(str(preds), "--gold", str(gold))
    assert list(out["splits"]) == [split]
    m = out["splits"][split]
    assert (m["error_acc"], m["correct_acc"], m["f1"], out["average_f1"]) == (100.0, 100.0, 100.0, 100.0)
    assert m["n"] == len(processbench(split))
    assert m["step_precision"] == m["step_recall"] == 100.0


def test_gold_file_as_its_own_predictions(both_splits):
    _, path = both_splits
    out = run_json(str(path), "--gold", str(path), "--pred-field", "label")
    assert set(out["splits"]) == {"gsm8k", "math"}
    assert all(m["f1"] == 100.0 for m in out["splits"].values()) and out["average_f1"] == 100.0


def test_hand_built_predictions_match_independent_computation(both_splits, tmp_path):
    rows, gold_path = both_splits
    rng = random.Random(7)
    preds: dict[str, int | None] = {}
    records = []
    for r in rows:
        x = rng.random()
        if x < 0.05:
            continue  # no record at all
        if x < 0.10:
            value = None  # a record with a null prediction
        elif x < 0.55:
            value = r["label"]
        else:
            value = rng.randint(-1, len(r["steps"]) - 1)
        preds[r["id"]] = value
        records.append({"id": r["id"], "judge": {"first_error": value}})
    records.append({"id": "olympiad-0", "judge": {"first_error": 3}})  # not in the gold
    path = write_jsonl(tmp_path / "judged.jsonl", records)

    expected, expected_avg = reference_metric(rows, preds)
    out = run_json(str(path), "--gold", str(gold_path), "--pred-field", "judge.first_error")
    assert set(out["splits"]) == set(expected)
    for split, (acc1, acc2, f1, n) in expected.items():
        m = out["splits"][split]
        assert m["error_acc"] == pytest.approx(acc1)
        assert m["correct_acc"] == pytest.approx(acc2)
        assert m["f1"] == pytest.approx(f1)
        assert m["n"] == n
    assert out["average_f1"] == pytest.approx(expected_avg)
    assert 0 < out["average_f1"] < 100
    assert out["missing_predictions"] == len(rows) - len(preds)
    assert out["extra_ids"] == ["olympiad-0"]


def test_missing_and_null_predictions_count_as_wrong(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", [
        {"id": "a-1", "steps": ["x", "y", "z"], "label": 1},
        {"id": "a-2", "steps": ["x", "y", "z"], "label": 2},
        {"id": "a-3", "steps": ["x", "y"], "label": -1},
        {"id": "a-4", "steps": ["x", "y"], "label": -1},
    ])
    preds = write_jsonl(tmp_path / "preds.jsonl", [
        {"id": "a-1", "first_error": 1},
        {"id": "a-2", "first_error": None},  # null: wrong
        {"id": "a-3", "first_error": -1},
        # a-4 has no prediction: wrong
    ])
    out = run_json(str(preds), "--gold", str(gold))
    m = out["splits"]["a"]
    assert (m["error_acc"], m["correct_acc"], m["f1"]) == (50.0, 50.0, 50.0)
    assert m["missing"] == 2
    assert out["missing_ids"] == ["a-4"]


def test_diagnostics_early_late_missed_and_step_labels(tmp_path):
    # gold first errors 2, 2, 2, 2, -1; predictions exact, early, late, missed, false alarm
    gold_rows = [{"id": f"s-{i}", "steps": ["a"] * 5, "label": lab} for i, lab in enumerate([2, 2, 2, 2, -1])]
    pred_values = [2, 0, 4, -1, 3]
    gold = read_gold([(str(write_jsonl(tmp_path / "gold.jsonl", gold_rows)), None)])
    preds = read_predictions([str(write_jsonl(tmp_path / "p.jsonl", [
        {"id": r["id"], "first_error": p} for r, p in zip(gold_rows, pred_values)]))], None, gold)
    m = evaluate(gold, preds).splits["s"]
    assert (m.error_hits, m.early, m.late, m.missed, m.false_alarms) == (1, 1, 1, 1, 1)
    assert m.detection_rate == 75.0
    # Step labels (wrong = positive), on steps both sides label:
    # exact: gold RRW / pred RRW          -> TP 1
    # early: gold RRW / pred W            -> step 0: FP
    # late:  gold RRW / pred RRRRW        -> step 2: FN (pred right, gold wrong)
    # missed: gold RRW / pred RRRRR       -> step 2: FN
    # false alarm: gold RRRRR / pred RRRW -> step 3: FP
    assert (m.step_tp, m.step_fp, m.step_fn) == (1, 2, 2)
    assert m.step_precision == pytest.approx(100 / 3) and m.step_recall == pytest.approx(100 / 3)
    assert m.steps_compared == 3 + 1 + 3 + 3 + 4


def test_split_field(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", [
        {"id": "x-1", "steps": ["a", "b"], "label": 0, "meta": {"src": "easy"}},
        {"id": "x-2", "steps": ["a", "b"], "label": -1, "meta": {"src": "hard"}},
    ])
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": "x-1", "first_error": 0}, {"id": "x-2", "first_error": -1}])
    out = run_json(str(preds), "--gold", str(gold), "--split-field", "meta.src")
    assert set(out["splits"]) == {"easy", "hard"}
    # each split has only one group: F1 is undefined there, and so is the average
    assert out["splits"]["easy"]["error_acc"] == 100.0 and out["splits"]["easy"]["correct_acc"] is None
    assert out["average_f1"] is None


def test_library_load_matches_cli(both_splits):
    rows, path = both_splits
    gold = read_gold([(str(path), None)])
    report = evaluate(gold, read_predictions([str(path)], "label", gold))
    assert report.average_f1 == 100.0
    assert sum(m.n for m in report.splits.values()) == len(rows)


def test_bad_prediction_is_exit_2_with_file_and_line(tmp_path):
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": "gsm8k-0", "first_error": 1}, {"id": "gsm8k-1", "first_error": "two"}])
    result = runner.invoke(app, ["evaluate", str(preds), "--gold", str(PROCESSBENCH / "gsm8k.json")])
    assert result.exit_code == 2
    assert f"{preds}:2:" in result.stderr and "first_error" in result.stderr


def test_cli_entry_point_prints_table_and_json(tmp_path):
    """The installed command in a real process: a table for people, JSON for machines."""
    gold = PROCESSBENCH / "gsm8k.json"
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": r["id"], "first_error": -1} for r in processbench("gsm8k")])
    exe = Path(sys.executable).with_name("prm-annotate")
    table = subprocess.run([str(exe), "evaluate", str(preds), "--gold", str(gold)],
                           capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    assert "gsm8k" in table.stdout and "average F1" in table.stdout
    js = subprocess.run([str(exe), "evaluate", str(preds), "--gold", str(gold), "--json"],
                        capture_output=True, text=True, timeout=120)
    out = json.loads(js.stdout)
    m = out["splits"]["gsm8k"]
    assert {"error_acc", "correct_acc", "f1", "n"} <= set(m) and "average_f1" in out
    # predicting "no error" everywhere: every correct response right, every erroneous one wrong
    assert (m["error_acc"], m["correct_acc"], m["f1"]) == (0.0, 100.0, 0.0)


def test_prediction_field_is_detected_as_compare_does(tmp_path):
    """A judged file with the default --pred-field scores its judge.first_error (it printed F1 0.0)."""
    rows = processbench("gsm8k")
    judged = write_jsonl(tmp_path / "judged.jsonl", [
        {"id": r["id"], "problem": r["problem"], "steps": r["steps"], "judge": {"first_error": r["label"]}}
        for r in rows])
    out = run_json(str(judged), "--gold", str(PROCESSBENCH / "gsm8k.json"))
    assert out["pred_field"] == "judge.first_error"
    assert out["splits"]["gsm8k"]["error_acc"] == 100.0 and out["missing_predictions"] == 0


def test_absent_field_and_disjoint_ids_are_exit_2(tmp_path):
    gold = str(PROCESSBENCH / "gsm8k.json")
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": r["id"], "first_error": -1} for r in processbench("gsm8k")])
    absent = runner.invoke(app, ["evaluate", str(preds), "--gold", gold, "--pred-field", "judge.first_error"])
    assert absent.exit_code == 2 and "no record has the field 'judge.first_error'" in absent.stderr
    other = write_jsonl(tmp_path / "other.jsonl", [{"id": f"x-{i}", "first_error": -1} for i in range(3)])
    disjoint = runner.invoke(app, ["evaluate", str(other), "--gold", gold])
    assert disjoint.exit_code == 2 and "no id of" in disjoint.stderr and "'x-0'" in disjoint.stderr


def test_gold_from_a_pipe_names_its_missing_ids_and_a_repeat(tmp_path):
    """A stream cannot be read again: its ids are held, so the missing ids are still listed and a
    repeated id still named with both lines."""
    rows = [{"id": f"a-{i}", "steps": ["x"] * 3, "label": i % 3 - 1} for i in range(6)]
    gold = "".join(json.dumps(r) + "\n" for r in rows)
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": r["id"], "first_error": r["label"]} for r in rows[:4]])
    run = [sys.executable, "-m", "prm_annotate", "evaluate", str(preds), "--gold", "-"]
    result = subprocess.run([*run, "--json"], input=gold, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["missing_ids"] == ["a-4", "a-5"]
    repeated = subprocess.run(run, input=gold + json.dumps(rows[1]) + "\n", capture_output=True, text=True, timeout=120)
    assert repeated.returncode == 2 and "-:7: duplicate id 'a-1' (first seen at line 2)" in repeated.stderr
