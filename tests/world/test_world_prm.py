"""`world prm`: the experiment's plumbing on a hand-built report folder (labels made from the
world's truth, with the judge wrong on a known set and MC wrong on another), so what each PRM is
trained on is known: the splits are disjoint, the consensus-sized MC set has consensus's size,
every PRM scores every held-out response. Slow: it trains four tiny PRMs for a few steps."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.reports.labels import step_labels
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.prm_fixtures import world_responses

runner = CliRunner()


def report_folder(tmp_path):
    responses = world_responses(8, seed=3, split="test")
    problems = sorted({r["problem_id"] for r in responses}, key=lambda p: int(p.rsplit("-", 1)[1]))
    write_jsonl(tmp_path / "problems.jsonl", [{"id": p} for p in problems])
    write_jsonl(tmp_path / "responses.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in responses])
    write_jsonl(tmp_path / "gold.jsonl", [{"id": r["id"], "label": r["label"]} for r in responses])
    rollouts, judged, consensus = [], [], []
    for i, r in enumerate(responses):
        n = len(r["steps"])
        mc_fe = -1 if i % 3 == 0 else r["label"]  # MC misses some errors
        judge_fe = r["label"] if i % 4 else 0  # the judge flags step 0 on others
        mc = {"k": 8, "label": "hard", "strategy": "every-step", "scores": [1.0] * n, "first_error": mc_fe,
              "completions": 0, "generated_tokens": 0, "model": "hand"}
        judge = {"first_error": judge_fe, "votes": [judge_fe], "parse_failures": 0, "model": "hand", "prompt": "hand"}
        base = {k: v for k, v in r.items() if k != "label"}
        rollouts.append({**base, "mc": mc})
        judged.append({**base, "judge": judge})
        if mc_fe == judge_fe:
            labels = step_labels(mc_fe, n)
            consensus.append({"id": r["id"], "problem": r["problem"], "steps": r["steps"][:len(labels)],
                              "labels": labels, "first_error": mc_fe, "mc": mc, "judge": judge})
    for name, rows in (("rollouts", rollouts), ("judged", judged), ("consensus", consensus)):
        write_jsonl(tmp_path / f"{name}.jsonl", rows)
    return problems, responses, consensus


@pytest.mark.slow
def test_experiment_plumbing(tmp_path, capsys):
    problems, responses, consensus = report_folder(tmp_path)
    result = runner.invoke(app, ["world", "prm", "--workdir", str(tmp_path), "--steps", "2", "--batch-size", "4",
                                 "--train-share", "0.75", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    train_ids, held_ids = set(problems[:6]), set(problems[6:])
    assert (out["train_problems"], out["heldout_problems"], out["heldout_responses"]) == (6, 2, 4)
    assert list(out["prms"]) == ["MC", "judge", "consensus", "MC (consensus-sized)"]
    run = tmp_path / "prm-seed0"
    sizes = {}
    for name in ("MC", "judge", "consensus", "MC-sub"):
        rows = read_jsonl(run / f"train-{name}.trl.jsonl")
        assert {r["id"].rsplit("/", 1)[0] for r in rows} <= train_ids
        sizes[name] = len(rows)
    assert sizes["consensus"] == sum(c["id"].rsplit("/", 1)[0] in train_ids for c in consensus) < sizes["MC"] == 12
    assert sizes["MC-sub"] == sizes["consensus"]
    assert out["prms"]["consensus"]["train_responses"] == sizes["consensus"]
    for name in ("MC", "judge", "consensus", "MC-sub"):
        scored = read_jsonl(run / f"scored-{name}.jsonl")
        assert {r["problem_id"] for r in scored} == held_ids and len(scored) == 4
        assert all(len(r["prm"]["scores"]) == len(r["steps"]) for r in scored)

    from prm_annotate.world.prm_experiment import print_experiment

    print_experiment(out)
    table = capsys.readouterr().out
    assert "MC (consensus-sized)" in table and "BoN@2 min" in table and "majority@2" in table


def test_needs_a_report(tmp_path):
    result = runner.invoke(app, ["world", "prm", "--workdir", str(tmp_path)])
    assert result.exit_code == 2 and "world report" in result.stderr
