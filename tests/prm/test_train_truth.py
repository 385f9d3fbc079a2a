"""`train` and `score` checked against the truth: a likelihood PRM (`train --head likelihood`) trained
on the true labels of arithmetic-world responses, scored by `score` in process, must order an
error-free response above an erroneous one of the same held-out problem (by the lowest step score)
far more often than chance; the same
pipeline with every first error moved one step later must not. A label one step off, a scorer
reading the wrong token, a head that ignores the response: each fails the first half, and the
second half shows the bar is one that a misaligned pipeline does not clear.

The responses are each problem's reference solution and corrupted copies of it
(testing/prm_fixtures.py: lab/world/corrupt.py's mistakes, labelled by the world's truth)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.world import POLICY_DIR
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.prm_fixtures import trl_rows, world_responses

runner = CliRunner()
BAR = 75.0  # held-out error-free > erroneous, percent: 50 is chance


def moved(responses: list[dict], shift: int) -> list[dict]:
    """Each first error `shift` steps later (past the last step: no error)."""
    out = []
    for r in responses:
        label = r["label"]
        if label != -1 and shift:
            label = label + shift if label + shift < len(r["steps"]) else -1
        out.append({**r, "label": label})
    return out


def error_free_over_erroneous(scored: list[dict], truth: dict[str, dict]) -> tuple[float, int]:
    """Percent of (error-free, erroneous) response pairs of one problem whose lowest step score
    orders them right (ties half), and the number of pairs."""
    by_problem: dict[str, list[tuple[bool, float]]] = {}
    for r in scored:
        t = truth[r["id"]]
        by_problem.setdefault(t["problem_id"], []).append((t["label"] == -1, min(r["prm"]["scores"])))
    wins = pairs = 0.0
    for items in by_problem.values():
        for ok, s in items:
            for ok2, s2 in items:
                if ok and not ok2:
                    pairs += 1
                    wins += 1.0 if s > s2 else 0.5 if s == s2 else 0.0
    return 100 * wins / pairs, int(pairs)


def train_and_score(tmp, name: str, train: list[dict], val: list[dict], held: list[dict]) -> list[dict]:
    data = write_jsonl(tmp / f"{name}.train.jsonl", trl_rows(train))
    evals = write_jsonl(tmp / f"{name}.val.jsonl", trl_rows(val))
    out = tmp / name
    result = runner.invoke(app, ["train", str(data), "--head", "likelihood", "--base", str(POLICY_DIR), "-o", str(out),
                                 "--eval", str(evals), "--system-prompt", "", "--steps", "150", "--batch-size", "16",
                                 "--lr", "3e-3", "--save-every", "50", "--save-total-limit", "1", "--seed", "0",
                                 "--max-length", "256", "--quiet"])
    assert result.exit_code == 0, result.output
    responses = write_jsonl(tmp / "held.jsonl", [{k: r[k] for k in ("id", "problem", "steps")} for r in held])
    scored = tmp / f"{name}.scored.jsonl"
    # A child process, as a user runs it: a model stage's command ends its process when done.
    run = subprocess.run([sys.executable, "-m", "prm_annotate", "score", str(responses), "--model", str(out), "-o",
                          str(scored), "--quiet"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return read_jsonl(scored)


def test_true_labels_verify_and_labels_one_step_late_do_not(tmp_path):
    train = world_responses(120, seed=21)
    val = world_responses(30, seed=22)
    held = world_responses(80, seed=23, split="test")
    truth = {r["id"]: r for r in held}
    measured = {}
    for name, shift in (("true", 0), ("one step late", 1)):
        scored = train_and_score(tmp_path, name.replace(" ", "-"), moved(train, shift), moved(val, shift), held)
        assert [r["id"] for r in scored] == [r["id"] for r in held]
        assert all(len(r["prm"]["scores"]) == len(truth[r["id"]]["steps"]) for r in scored)
        measured[name] = error_free_over_erroneous(scored, truth)
    assert list(measured) == ["true", "one step late"]  # both halves ran
    print(f"held-out error-free > erroneous (%, pairs): {measured}")
    assert measured["true"][0] >= BAR, measured
    assert measured["one step late"][0] < BAR, measured
