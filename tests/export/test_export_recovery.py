"""export --labels recovery: every step labelled by its slips and corrections, in every step-label
format, from the thinking world's generated traces with their truth as the records' recovery."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.world.thinking import trace_for
from prm_annotate.world.trace_truth import read_trace
from testing.labelled_fixtures import write_jsonl

runner = CliRunner()


def rollouts(n: int) -> list[dict]:
    out = []
    for i in range(n):
        problem, t = trace_for("test", i, 11)
        truth = read_trace(problem, t.text)
        steps = t.steps
        hard = truth.first_error
        out.append({"id": f"w/{i}", "problem": problem["problem"], "answer": problem["answer"], "steps": steps,
                    "mc": {"k": 8, "label": "soft", "strategy": "exhaustive", "first_error": hard,
                           "scores": [0.5] * len(steps), "completions": 8, "generated_tokens": 8, "model": "m",
                           "recovery": truth.recovery().to_json()}})
    return out


def labels_of(fmt: str, row: dict) -> list[bool]:
    if fmt == "trl":
        return row["labels"]
    if fmt == "openrlhf":
        return [v == "+" for v in row["label"]]
    return [bool(v) for v in row["labels"]]  # qwen


@pytest.mark.parametrize("fmt", ["trl", "openrlhf", "qwen"])
def test_recovery_labels_are_the_truths_and_first_error_the_papers_cut(fmt, tmp_path):
    from prm_annotate.recovery.labels import Recovery

    records = rollouts(60)
    src = write_jsonl(tmp_path / "r.jsonl", records)
    for choice in ("recovery", "first-error"):
        result = runner.invoke(app, ["export", str(src), "-o", str(tmp_path / f"{choice}.jsonl"), "--format", fmt,
                                     "--labels", choice])
        assert result.exit_code == 0, result.output
    rec_rows = [json.loads(x) for x in (tmp_path / "recovery.jsonl").read_text().splitlines()]
    cut_rows = [json.loads(x) for x in (tmp_path / "first-error.jsonl").read_text().splitlines()]
    corrected_after = 0
    for rec, row, cut in zip(records, rec_rows, cut_rows):
        r = Recovery.from_json(rec["mc"]["recovery"], len(rec["steps"]))
        assert labels_of(fmt, row) == r.step_labels(len(rec["steps"]))
        fe = rec["mc"]["first_error"]
        assert labels_of(fmt, cut) == ([True] * len(rec["steps"]) if fe == -1 else [True] * fe + [False])
        # Where the trace corrected its slip, the recovery labels say right after the paper's cut.
        corrected_after += any(labels_of(fmt, row)[fe + 1:]) if fe != -1 else 0
    assert corrected_after > 10


def test_records_without_recovery_are_skipped_and_soft_is_refused(tmp_path):
    records = rollouts(4)
    del records[0]["mc"]["recovery"]
    src = write_jsonl(tmp_path / "r.jsonl", records)
    result = runner.invoke(app, ["export", str(src), "-o", str(tmp_path / "o.jsonl"), "--format", "trl",
                                 "--labels", "recovery"])
    assert result.exit_code == 0 and len((tmp_path / "o.jsonl").read_text().splitlines()) == 3
    assert "no recovery labels" in result.output
    for extra in (["--soft"], ["--labels", "both"]):
        result = runner.invoke(app, ["export", str(src), "-o", str(tmp_path / "s.jsonl"), "--format", "qwen",
                                     *(["--labels", "recovery"] if extra == ["--soft"] else []), *extra])
        assert result.exit_code == 2, result.output


def test_train_reads_recovery_rows_as_exported(tmp_path):
    from prm_annotate.prm.data import read_examples

    records = rollouts(30)
    src = write_jsonl(tmp_path / "r.jsonl", records)
    out = tmp_path / "trl.jsonl"
    assert runner.invoke(app, ["export", str(src), "-o", str(out), "--format", "trl", "--labels", "recovery"]).exit_code == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    examples = read_examples(str(out), "auto", soft=False)["train"]
    assert [e.hard for e in examples] == [[int(v) for v in r["labels"]] for r in rows]
    # Labels right again after a wrong step: the pattern first-error labels never have, read as is.
    assert any(0 in e.hard and 1 in e.hard[e.hard.index(0):] for e in examples)
