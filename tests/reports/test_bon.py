"""`bon` on a hand-made scored file where every pick is worked out by hand (see the comments), and
the CLI's JSON, table and bad-input behaviour. Majority vote and pass@N are the baselines the PRM
selectors are measured against in the same run."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from testing.jsonl_files import write_jsonl

runner = CliRunner()


def scored(rid: str, pid: str, answer: str, steps: list[str], scores: list[float]) -> dict:
    return {"id": rid, "problem_id": pid, "problem": f"problem {pid}", "answer": answer, "steps": steps,
            "prm": {"scores": scores, "first_error": -1, "threshold": 0.5, "model": "hand-made"}}


# Aggregates per response: min / last / prod / mean.
RECORDS = [
    # Problem A, gold 7.
    scored("A/0", "A", "7", ["3 + 2 = 5", "\\boxed{5}"], [0.9, 0.2]),         # wrong .2 .2 .18 .55
    scored("A/1", "A", "7", ["3 + 4 = 7", "so", "\\boxed{7}"], [0.3, 0.9, 0.9]),  # right .3 .9 .243 .7
    scored("A/2", "A", "7", ["3 + 2 = 5", "\\boxed{5}"], [0.6, 0.95]),        # wrong .6 .95 .57 .775
    scored("A/3", "A", "7", ["3 + 4 = 7", "\\boxed{7.0}"], [0.65, 0.8]),      # right .65 .8 .52 .725
    # Problem B, gold 12.
    scored("B/0", "B", "12", ["\\boxed{12}"], [0.4]),                         # right .4 .4 .4 .4
    scored("B/1", "B", "12", ["1 + 2 = 3", "\\boxed{3}"], [0.1, 0.9]),        # wrong .1 .9 .09 .5
    scored("B/2", "B", "12", ["6 * 2 = 12", "\\boxed{12.0}"], [0.8, 0.3]),    # right .3 .3 .24 .55
    scored("B/3", "B", "12", ["1 + 2 = 3", "\\boxed{3}"], [0.7, 0.7]),        # wrong .7 .7 .49 .7
]

# % of the 2 problems, N = 1, 2, 4 (the first N responses of each problem).
EXPECTED = {
    # N=1: A/0 wrong, B/0 right everywhere.
    # N=2: A/1 wins every aggregation; B: min B/0, last B/1, prod B/0, mean B/1 (.5 > .4).
    # N=4: A: min A/3 (.65), last/prod/mean A/2; B: min/prod/mean B/3, last B/1.
    "prm-min": {"1": 50.0, "2": 100.0, "4": 50.0},
    "prm-last": {"1": 50.0, "2": 50.0, "4": 0.0},
    "prm-prod": {"1": 50.0, "2": 100.0, "4": 0.0},
    "prm-mean": {"1": 50.0, "2": 50.0, "4": 0.0},
    # N=2: A ties 5 vs 7 -> the answer seen first (5), wrong; B ties 12 vs 3 -> 12, right.
    # N=4: A ties 5 {A/0, A/2} vs 7 {A/1, A/3: 7.0 is 7} -> 5; B 12 {B/0, B/2: 12.0 is 12} vs 3 -> 12.
    # Were 12.0 not grouped with 12, B's vote at N=4 would go to 3 (2 votes to 1) and be wrong.
    "majority": {"1": 50.0, "2": 50.0, "4": 50.0},
    "pass@N": {"1": 50.0, "2": 100.0, "4": 100.0},
}


@pytest.fixture
def scored_file(tmp_path):
    return write_jsonl(tmp_path / "scored.jsonl", RECORDS)


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["bon", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_pick_and_accuracy(scored_file):
    out = run_json(str(scored_file))
    assert out["n"] == [1, 2, 4]
    assert (out["problems"], out["responses"], out["undecided"]) == (2, 8, 0)
    assert out["accuracy"] == EXPECTED
    # 2+ step responses: A/0 (min on its last step), A/1, A/2, A/3, B/1, B/2 (on its last), B/3 (a
    # tie: the first lowest counts, step 0).
    assert out["min_on_final_step"] == {"share": pytest.approx(100 * 2 / 7), "responses": 7, "on_final_step": 2}
    assert "right_answer_wrong_step" not in out


def test_right_answer_wrong_step_with_truth(scored_file, tmp_path):
    # A/3 has a right answer but its truth says step 0 is wrong; B/2 too (step 0: "6 * 2" is not
    # the problem's operation, say). Picks at N=4: min A/3, B/3; last A/2, B/1; prod/mean A/2, B/3.
    gold = write_jsonl(tmp_path / "gold.jsonl", [{"id": r["id"], "label": 0 if r["id"] in ("A/3", "B/2") else -1}
                                                 for r in RECORDS])
    flawed = run_json(str(scored_file), "--gold", str(gold))["right_answer_wrong_step"]
    assert flawed["n"] == 4
    assert flawed["prm-min"] == {"share": 100.0, "right_picks_with_truth": 1, "with_wrong_step": 1}
    for agg in ("prm-last", "prm-prod", "prm-mean"):
        assert flawed[agg] == {"share": None, "right_picks_with_truth": 0, "with_wrong_step": 0}


def test_only_prm_scores_are_needed(tmp_path):
    """Scores from another tool: `prm` holds `scores` alone (no first_error, threshold or model)."""
    bare = [{**r, "prm": {"scores": r["prm"]["scores"]}} for r in RECORDS]
    out = run_json(str(write_jsonl(tmp_path / "bare.jsonl", bare)))
    assert out["accuracy"] == EXPECTED and out["responses"] == 8
    unscored = [dict(r) for r in bare]
    del unscored[5]["prm"]
    result = runner.invoke(app, ["bon", str(write_jsonl(tmp_path / "unscored.jsonl", unscored))])
    assert result.exit_code == 2 and "unscored.jsonl:6:" in result.stderr and "no `prm.scores`" in result.stderr


def test_first_n_is_file_order(tmp_path):
    # The same responses of A with A/2 moved first: at N=1 every PRM selector now picks A/2.
    records = [RECORDS[2], RECORDS[0], RECORDS[1], RECORDS[3]]
    out = run_json(str(write_jsonl(tmp_path / "s.jsonl", records)))
    assert out["n"] == [1, 2, 4]
    assert out["accuracy"]["pass@N"] == {"1": 0.0, "2": 0.0, "4": 100.0}
    assert out["accuracy"]["prm-min"]["4"] == 100.0  # the pick does not depend on the order: A/3


def test_uneven_groups_stop_at_the_smallest(tmp_path):
    out = run_json(str(write_jsonl(tmp_path / "s.jsonl", RECORDS[:3] + RECORDS[4:])))
    assert out["n"] == [1, 2, 3]


def test_table(scored_file):
    result = runner.invoke(app, ["bon", str(scored_file)])
    assert result.exit_code == 0, result.output
    assert "prm-min" in result.stdout and "N=4" in result.stdout and "majority" in result.stdout


@pytest.mark.parametrize("bad, message", [
    ({"prm": {"scores": [0.5], "first_error": -1, "threshold": 0.5, "model": "m"}}, "prm.scores has 1 entries for 2 steps"),
    ({"answer": None}, "no gold `answer`"),
    ({"prm": {"scores": [0.5, 1.5], "first_error": -1, "threshold": 0.5, "model": "m"}}, "outside [0, 1]"),
])
def test_bad_record_is_exit_2_with_line(tmp_path, bad, message):
    records = [dict(r) for r in RECORDS]
    records[2].update(bad)
    path = write_jsonl(tmp_path / "s.jsonl", records)
    result = runner.invoke(app, ["bon", str(path)])
    assert result.exit_code == 2
    assert f"{path}:3:" in result.stderr and message in result.stderr
