"""stats and compare read labels beyond the first error: counts of slips and corrections, and each
source against the gold's (the thinking world's truth) on slips, corrections and step labels."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.recovery.labels import Recovery, Slip
from prm_annotate.recovery.report import agreement, read_recoveries
from prm_annotate.reports.stats import file_stats
from prm_annotate.world.thinking import trace_for
from prm_annotate.world.trace_truth import read_trace
from testing.labelled_fixtures import write_jsonl

runner = CliRunner()


def world(n: int) -> list[tuple[dict, object]]:
    out = []
    for i in range(n):
        problem, t = trace_for("test", i, 21)
        truth = read_trace(problem, t.text)
        out.append(({"id": f"w/{i}", "problem": problem["problem"], "steps": t.steps, "answer": problem["answer"]},
                    truth))
    return out


def files(tmp_path, n=120):
    rows = world(n)
    gold = [{**r, "label": t.first_error, "recovery": t.recovery().to_json()} for r, t in rows]
    mc = lambda rec, fe: {"k": 8, "label": "soft", "strategy": "exhaustive", "scores": [0.5] * len(rec["steps"]),  # noqa: E731
                          "first_error": fe, "completions": 1, "generated_tokens": 1, "model": "m"}
    exact = [{**r, "mc": {**mc(r, t.first_error), "recovery": t.recovery().to_json()}} for r, t in rows]
    # The baseline: the paper's label as a reading, one uncaught slip at the first error.
    blind = [{**r, "mc": {**mc(r, t.first_error), "recovery": (
        Recovery((Slip(t.first_error, None),)) if t.first_error != -1 else Recovery()).to_json()}} for r, t in rows]
    paths = {name: write_jsonl(tmp_path / f"{name}.jsonl", data)
             for name, data in (("gold", gold), ("exact", exact), ("blind", blind))}
    return rows, paths


def test_agreement_is_perfect_for_the_truth_and_misses_corrections_for_the_first_error_alone(tmp_path):
    rows, paths = files(tmp_path)
    _, gold = read_recoveries(str(paths["gold"]))
    _, exact = read_recoveries(str(paths["exact"]))
    field, blind = read_recoveries(str(paths["blind"]))
    assert field == "mc.recovery" and len(gold) == len(exact) == len(blind) == len(rows)
    perfect = agreement(exact, gold)
    assert perfect["slip_f1"] == perfect["correction_recall"] == perfect["exact"] == 100.0
    first_only = agreement(blind, gold)
    assert first_only["slip_precision"] == 100.0 and first_only["slip_recall"] < 100.0
    assert first_only["correction_recall"] == 0.0 and first_only["exact"] < 100.0
    assert first_only["step_label_agreement"] < perfect["step_label_agreement"]


def test_stats_counts_slips_and_compare_reports_each_source(tmp_path):
    rows, paths = files(tmp_path)
    section = file_stats(str(paths["gold"]))["recovery"]["recovery"]
    truths = [t for _, t in rows]
    assert section["traces"] == len(rows)
    assert section["corrected"] == sum(len(t.recovery().corrected) for t in truths) > 0
    assert section["uncaught"] == sum(len(t.recovery().uncaught) for t in truths) > 0
    assert "recovery" not in file_stats(str(write_jsonl(tmp_path / "plain.jsonl", [rows[0][0]])))
    result = runner.invoke(app, ["compare", str(paths["exact"]), str(paths["blind"]), "--gold", str(paths["gold"]),
                                 "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["recovery"]
    assert report["sources"]["exact"]["against_gold"]["exact"] == 100.0
    assert report["sources"]["blind"]["against_gold"]["correction_recall"] == 0.0
    assert report["agreement"]["exact"]["exact"] == 100.0 > report["agreement"]["exact"]["blind"]
    text = runner.invoke(app, ["compare", str(paths["exact"]), str(paths["blind"]), "--gold", str(paths["gold"])])
    assert text.exit_code == 0 and "slips and corrections" in text.output
    shown = runner.invoke(app, ["stats", str(paths["gold"])])
    assert shown.exit_code == 0 and "corrected" in shown.output


def test_evaluate_adds_slips_and_corrections_where_both_sides_have_them(tmp_path):
    _, paths = files(tmp_path, n=60)
    both = runner.invoke(app, ["evaluate", str(paths["blind"]), "--gold", str(paths["gold"]), "--json"])
    assert both.exit_code == 0, both.output
    report = json.loads(both.output)
    assert report["recovery"]["correction_recall"] == 0.0 and report["recovery"]["slip_precision"] == 100.0
    exact = json.loads(runner.invoke(app, ["evaluate", str(paths["exact"]), "--gold", str(paths["gold"]),
                                           "--json"]).output)
    assert exact["recovery"]["exact"] == 100.0
    # The paper's metric is the same either way; without a gold recovery there is no section.
    assert exact["overall"] == report["overall"]
    plain = tmp_path / "plain-gold.jsonl"
    plain.write_text("".join(json.dumps({k: v for k, v in json.loads(x).items() if k != "recovery"}) + "\n"
                             for x in paths["gold"].read_text().splitlines()))
    assert "recovery" not in json.loads(runner.invoke(app, ["evaluate", str(paths["exact"]), "--gold", str(plain),
                                                            "--json"]).output)
    text = runner.invoke(app, ["evaluate", str(paths["blind"]), "--gold", str(paths["gold"])])
    assert text.exit_code == 0 and "Slips and corrections" in text.output
