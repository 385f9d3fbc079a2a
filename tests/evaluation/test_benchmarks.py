"""`evaluate --benchmark prmbench` and `--benchmark hard2verify`: the package's metric against each
benchmark's own evaluation restated in testing/ (prmbench_script.py, hard2verify_script.py), on
fixtures in the benchmarks' published record shapes (tests/data/prmbench, tests/data/hard2verify),
to the last printed digit; their readers (PRMBench's step numbers off, Hard2Verify's rows
decrypted); the threshold rules; bad input."""
from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.io.inputs import read_records
from prm_annotate.evaluation import hard2verify, prmbench
from prm_annotate.evaluation.metrics import cut_points
from prm_annotate.evaluation.labels import Prediction
from testing import hard2verify_script as h2v_script
from testing import prmbench_script
from testing.benchmark_files import HARD2VERIFY_FILE, PRMBENCH_FILE, step_scores
from testing.jsonl_files import write_jsonl

runner = CliRunner()


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["evaluate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def scored_records(path, fmt: str, scores: dict[str, list[float]]) -> list[dict]:
    """What `score` writes for a benchmark file: each response with prm.scores."""
    out = []
    for _, r in read_records(path, fmt):
        if r["id"] in scores:
            out.append({"id": r["id"], "problem": r["problem"], "steps": r["steps"], "prm": {"scores": scores[r["id"]]}})
    return out


# --- PRMBench -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prmbench_case(tmp_path_factory):
    published = rows(PRMBENCH_FILE)
    meta = prmbench_script.load_data(published)  # the script's samples, its correct_ ones included
    scores = step_scores({m["idx"]: len(m["steps"]) for m in meta}, seed=3)
    preds = write_jsonl(tmp_path_factory.mktemp("prmbench") / "scored.jsonl",
                        scored_records(PRMBENCH_FILE, "prmbench", scores))
    return published, meta, scores, preds


def script_prmscores(meta, scores, threshold):
    res = prmbench_script.evaluate([prmbench_script.prm_result(i, s, threshold) for i, s in scores.items()], meta)
    cats = {m["classification"] for m in meta} - {"correct"}
    return {c: prmbench_script.prmscore(res, c) for c in cats} | {None: prmbench_script.prmscore(res)}


@pytest.mark.parametrize("threshold", [None, 0.3, 0.75])
def test_prmbench_equals_its_script_per_category(prmbench_case, threshold):
    published, meta, scores, preds = prmbench_case
    args = [str(preds), "--gold", str(PRMBENCH_FILE), "--benchmark", "prmbench"]
    report = run_json(*args, *([] if threshold is None else ["--threshold", str(threshold)]))
    expected = script_prmscores(meta, scores, 0.5 if threshold is None else threshold)
    assert set(report["categories"]) == set(expected) - {None} == set(prmbench.SHORT)
    for name, got in report["categories"].items():
        assert got["prmscore"] == pytest.approx(expected[name], abs=1e-12), name
        assert prmbench_script.printed(got["prmscore"]) == prmbench_script.printed(expected[name]), name
    assert prmbench_script.printed(report["prmscore"]) == prmbench_script.printed(expected[None])
    assert report["prmscore"] == pytest.approx(expected[None], abs=1e-12)
    # The table prints the same digits.
    table = runner.invoke(app, ["evaluate", *args, *([] if threshold is None else ["--threshold", str(threshold)])])
    assert table.exit_code == 0, table.output
    cells = [ln.replace("│", " ").split() for ln in table.stdout.splitlines()]
    for name, score in expected.items():
        line = next(c for c in cells if c and c[0] == (name or "overall"))
        assert prmbench_script.printed(score) in line, (name, line)


def test_prmbench_rule_is_strictly_above_the_threshold(prmbench_case):
    """The fixture's scores hold ties at 0.5: `>=` would give other numbers (so the rule is tested)."""
    published, meta, scores, preds = prmbench_case
    assert sum(s == 0.5 for v in scores.values() for s in v) > 5
    strict = script_prmscores(meta, scores, 0.5)
    loose = prmbench_script.evaluate([dict(idx=i, scores=dict(step_level_validity_labels=[x >= 0.5 for x in s]))
                                      for i, s in scores.items()], meta)
    assert any(prmbench_script.printed(strict[c]) != prmbench_script.printed(prmbench_script.prmscore(loose, c))
               for c in strict if c is not None)


def test_prmbench_reader():
    """The task's ids; the modified question and process, each step's number taken off."""
    published = rows(PRMBENCH_FILE)
    got = [r for _, r in read_records(PRMBENCH_FILE)]  # detected
    assert [r["id"] for r in got] == [f"{p['classification']}_{p['idx']}" for p in published]
    for p, r in zip(published, got):
        assert r["problem"] == p["modified_question"]
        assert r["steps"] == [prmbench_script.remove_step_prefix(s) for s in p["modified_process"]]
    assert any(p["modified_process"][0].startswith("Step 1. ") for p in published)
    assert any(p["modified_process"][0].startswith("1. ") for p in published)
    assert not any(s.startswith(("Step 1.", "1. ")) for r in got for s in r["steps"])


def test_prmbench_missing_and_bad_rows(prmbench_case, tmp_path):
    published, meta, scores, preds = prmbench_case
    some = [r for r in (json.loads(x) for x in preds.read_text().splitlines())][5:]
    part = write_jsonl(tmp_path / "part.jsonl", some)
    report = run_json(str(part), "--gold", str(PRMBENCH_FILE), "--benchmark", "prmbench")
    assert report["missing_predictions"] == 5  # left out, as the script leaves out a missing result
    bad = [dict(r) for r in published]
    bad[3]["error_steps"] = [0]
    gold = write_jsonl(tmp_path / "bad.jsonl", bad)
    result = runner.invoke(app, ["evaluate", str(preds), "--gold", str(gold), "--benchmark", "prmbench"])
    assert result.exit_code == 2 and "bad.jsonl:4:" in result.output
    result = runner.invoke(app, ["evaluate", str(preds), "--gold", str(PRMBENCH_FILE), "--benchmark", "prmbench",
                                 "--tune-threshold-on", "gsm8k"])
    assert result.exit_code == 2 and "PRMBench's fixed validity threshold" in result.output


# --- Hard2Verify ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def h2v_case(tmp_path_factory):
    published = rows(HARD2VERIFY_FILE)
    plain = [h2v_script.decrypt_sample(r) for r in published]
    scores = step_scores({r["unique_id"]: len(r["model_response_by_step"]) for r in plain}, seed=4)
    scores.pop(plain[7]["unique_id"])  # one response the PRM could not score
    preds = write_jsonl(tmp_path_factory.mktemp("h2v") / "scored.jsonl",
                        scored_records(HARD2VERIFY_FILE, "hard2verify", scores))
    return plain, scores, preds


def script_numbers(plain, scores, threshold):
    error_id = h2v_script.calculate_error_id_metrics(
        [h2v_script.prm_first_error(scores.get(r["unique_id"]), threshold) for r in plain],
        [r["human_labels_first_error_idx"] for r in plain])
    verdicts = {rid: [1 if x >= threshold else 0 for x in s] for rid, s in scores.items()}
    return {"error_id": error_id, **h2v_script.grade_step_level(plain, verdicts)}


def test_hard2verify_reader_decrypts_as_the_release():
    published = rows(HARD2VERIFY_FILE)
    assert sum(isinstance(r["human_labels"], str) for r in published) > 20  # most rows encrypted
    got = [r for _, r in read_records(HARD2VERIFY_FILE)]
    for p, r in zip(published, got):
        plain = h2v_script.decrypt_sample(p)
        assert r["id"] == p["unique_id"] and r["problem"] == plain["question"]
        assert r["steps"] == plain["model_response_by_step"] and r["human_labels"] == plain["human_labels"]
        assert r["label"] == plain["human_labels_first_error_idx"]


@pytest.mark.parametrize("threshold", [0.5, 0.35])
def test_hard2verify_given_threshold_equals_its_script(h2v_case, threshold):
    plain, scores, preds = h2v_case
    report = run_json(str(preds), "--gold", str(HARD2VERIFY_FILE), "--benchmark", "hard2verify",
                      "--threshold", str(threshold))
    expected = script_numbers(plain, scores, threshold)
    got = report["reported"]
    assert got["responses"] == len(plain) and got["missing_predictions"] == 1
    assert got["error_id"] == expected["error_id"]
    assert got["step_level"] == expected["step_level"]
    assert got["response_level"] == expected["solution_level"]
    assert 0 < expected["error_id"]["balanced_f1_score"] < 100  # not a degenerate case


def test_hard2verify_tuned_threshold(h2v_case):
    """Tuned on a random 20 of the 40 (seeded): the best ErrorID balanced F1 there over every
    distinct cut, by the script's own metric; numbers on the other 20 equal the script's."""
    plain, scores, preds = h2v_case
    report = run_json(str(preds), "--gold", str(HARD2VERIFY_FILE), "--benchmark", "hard2verify",
                      "--tune-sample", "20", "--seed", "5")
    tuning = set(report["tuning_ids"])
    assert len(tuning) == 20 and tuning == set(random.Random(5).sample([r["unique_id"] for r in plain], 20))
    subset = [r for r in plain if r["unique_id"] in tuning]
    f1_at = {t: h2v_script.calculate_error_id_metrics(
        [h2v_script.prm_first_error(scores.get(r["unique_id"]), t) for r in subset],
        [r["human_labels_first_error_idx"] for r in subset])["balanced_f1_score"]
        for t in cut_points(x for r in subset for x in scores.get(r["unique_id"], []))}
    chosen = report["threshold"]["value"]
    assert f1_at[chosen] == max(f1_at.values())
    held = [r for r in plain if r["unique_id"] not in tuning]
    expected = script_numbers(held, scores, chosen)
    assert report["reported"]["error_id"] == expected["error_id"]
    assert report["reported"]["responses"] == 20
    assert report["all_responses"]["error_id"] == script_numbers(plain, scores, chosen)["error_id"]


def test_hard2verify_package_metric_directly():
    """The module's own numbers, without the CLI: a perfect predictor is 100 everywhere."""
    gold = hard2verify.load_gold([str(HARD2VERIFY_FILE)])
    perfect = {rid: Prediction(rid, None, len(g.labels), None, {}, [0.9 if lab else 0.1 for lab in g.labels])
               for rid, g in gold.items()}
    report = hard2verify.evaluate(gold, perfect, threshold=0.5)
    assert report.reported.error_id == {"tpr": 100.0, "tnr": 100.0, "balanced_acc": 100.0, "balanced_f1_score": 100.0}
    assert report.reported.step_level["balanced_acc"] == 100.0
