"""`evaluate --min-f1`: a first judge checked against the big judge's verdicts as gold. The F1 is
the one `evaluate`'s own table computes on the same files; the Wilson interval is checked against
Newcombe's published intervals (Stat. Med. 1998, 17:857-872, Table II, method 3)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.evaluation.metrics import wilson_interval
from testing.jsonl_files import write_jsonl

runner = CliRunner()


@pytest.mark.parametrize("hits, n, low, high", [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605),
                                                (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)])
def test_wilson_interval_is_newcombe_s(hits, n, low, high):
    lo, hi = wilson_interval(hits, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


def _files(tmp_path, wrong: int):
    """60 responses the big judge labelled (20 error-free); the first judge names the same first
    error on all but `wrong` of them (the first `wrong` erroneous ones: a later step), and one
    response it never judged."""
    gold, preds = [], []
    for i in range(60):
        label = -1 if i % 3 == 0 else i % 4
        gold.append({"id": f"check-{i}/0", "steps": ["a", "b", "c", "d", "e"], "judge": {"first_error": label}})
        if i == 59:
            continue
        errors_before = sum(1 for g in gold[:-1] if g["judge"]["first_error"] != -1)
        said = label + 1 if label != -1 and errors_before < wrong else label
        preds.append({"id": f"check-{i}/0", "steps": ["a", "b", "c", "d", "e"], "judge": {"first_error": said}})
    return write_jsonl(tmp_path / "big.jsonl", gold), write_jsonl(tmp_path / "critic.jsonl", preds)


def _evaluate(gold, preds, *extra):
    return runner.invoke(app, ["evaluate", str(preds), "--gold", str(gold), "--label-field", "judge.first_error",
                               *extra])


@pytest.mark.parametrize("wrong", [2, 12])
def test_the_check_agrees_with_evaluate_and_says_plainly_below_the_bar(tmp_path, wrong):
    gold, preds = _files(tmp_path, wrong)
    plain = json.loads(_evaluate(gold, preds, "--json").stdout)
    result = _evaluate(gold, preds, "--json", "--min-f1", "90")
    check = json.loads(result.stdout)["check"]
    assert check["f1"] == pytest.approx(plain["average_f1"]) and check["responses"] == 60
    assert check["agreement"] == pytest.approx(100 * (60 - wrong - 1) / 60)
    lo, hi = wilson_interval(60 - wrong - 1, 60)
    assert check["agreement_ci"] == pytest.approx([100 * lo, 100 * hi])
    assert check["f1_ci"][0] <= check["f1"] <= check["f1_ci"][1] and check["f1_ci"][1] - check["f1_ci"][0] > 1
    assert check["passed"] == (check["f1"] >= 90) and result.exit_code == (0 if check["passed"] else 1)
    text = _evaluate(gold, preds, "--min-f1", "90")
    assert text.exit_code == result.exit_code
    assert ("do not use this judge" in text.stdout) == (not check["passed"])
    assert f"F1 {check['f1']:.1f} [{check['f1_ci'][0]:.1f}, {check['f1_ci'][1]:.1f}]" in text.stdout
    assert json.loads(_evaluate(gold, preds, "--json", "--min-f1", "90").stdout)["check"] == check  # seeded


def test_min_f1_is_for_first_error_predictions(tmp_path):
    gold, preds = _files(tmp_path, 0)
    result = _evaluate(gold, preds, "--min-f1", "90", "--threshold", "0.5")
    assert result.exit_code == 2 and "--min-f1 checks first-error predictions" in result.output
