"""The README and --help say what the code does: export's defaults and empty results, stats on
Parquet and token counts, boolean flags, grade's options, rollout's strategy text, no system
prompt, and one-line errors for missing optional packages (each met by trying the README)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from testing.labelled_fixtures import mixed_records, write_all, write_jsonl
from testing.scripted_engine import ScriptedEngine

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("labelled"), mixed_records(8))


def help_text(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_export_writes_standard_output_by_default(files):
    result = runner.invoke(app, ["export", str(files["consensus"]), "--format", "trl"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows and all({"prompt", "completions", "labels"} <= set(r) for r in rows)
    assert "to -" in result.stderr


def test_an_empty_export_is_refused_and_leaves_the_output_alone(files, tmp_path):
    out = tmp_path / "train.parquet"
    out.write_bytes(b"an earlier export")
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    result = runner.invoke(app, ["export", str(empty), "--format", "trl", "-o", str(out)])
    assert result.exit_code == 2 and "no trl rows from 0 records" in result.stderr
    # Records that are all skipped (no parsed judgement) say so too.
    judged = [json.loads(line) for line in files["judged"].read_text().splitlines()]
    unparsed = write_jsonl(tmp_path / "unparsed.jsonl", [{**r, "judge": {**r["judge"], "first_error": None}}
                                                          for r in judged])
    skipped = runner.invoke(app, ["export", str(unparsed), "--format", "trl", "-o", str(out)])
    assert skipped.exit_code == 2
    assert f"no trl rows from {len(judged)} records" in skipped.stderr and "no parsed judgement" in skipped.stderr
    assert out.read_bytes() == b"an earlier export"


def test_boolean_flags_take_no_value_and_have_a_negative_form(files, tmp_path):
    text = help_text("export")
    assert "<bool>" not in re.sub(r"--help.*", "", text)
    assert "--no-soft" in text and "--no-keep-scores" in text
    out = tmp_path / "x.jsonl"
    on = runner.invoke(app, ["export", str(files["rollouts"]), "--format", "qwen", "--soft", "-o", str(out)])
    assert on.exit_code == 0, on.output
    off = runner.invoke(app, ["export", str(files["rollouts"]), "--format", "qwen", "--no-soft", "-o", str(out)])
    assert off.exit_code == 0, off.output
    assert "<bool>" not in re.sub(r"--help.*", "", help_text("sample"))


def test_grade_help_lists_no_engine_options():
    text = help_text("grade")
    for absent in ("--model", "--dtype", "--ray-gpus-per-actor", "one engine per actor", "holding one engine"):
        assert absent not in text, absent
    assert "--executor" in text and "--ray-actors" in text


def test_rollout_help_says_scan_makes_no_monotonic_assumption():
    text = " ".join(help_text("rollout").split())
    text = re.sub(r"[│ ]+", " ", text)
    assert "scan (first error only, steps in order: no such assumption)" in text
    assert "export takes MC scores as labels with its own --soft" in text


def test_stats_reads_the_parquet_export_writes(files, tmp_path):
    out = tmp_path / "train.parquet"
    assert runner.invoke(app, ["export", str(files["consensus"]), "--format", "trl", "-o", str(out)]).exit_code == 0
    result = runner.invoke(app, ["stats", str(out), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    rows = [json.loads(line) for line in files["consensus"].read_text().splitlines()]
    assert stats["records"] == len(rows)
    assert sum(stats["step_labels"].values()) == sum(len(r["labels"]) for r in rows)


def test_stats_counts_tokens_spent_not_max_tokens_settings(tmp_path):
    rows = [{"id": f"r{i}", "problem": "p", "steps": ["a"],
             "generator": {"max_tokens": 1024, "prompt_tokens": 10, "generated_tokens": 5 + i}} for i in range(3)]
    path = write_jsonl(tmp_path / "responses.jsonl", rows)
    tokens = json.loads(runner.invoke(app, ["stats", str(path), "--json"]).stdout)["tokens"]
    assert tokens == {"generator.prompt_tokens": 30, "generator.generated_tokens": 18}


def test_system_prompt_none_sends_no_system_message():
    from prm_annotate.errors import UsageError
    from prm_annotate.io.prompt_files import SYSTEM_PROMPTS, load_prompt
    from prm_annotate.records import Problem
    from prm_annotate.stages.sample import SampleStage

    engine = ScriptedEngine(lambda r: "\\boxed{8}")
    stage = SampleStage(engine, n=1, system_prompt="none")
    list(stage.process([Problem(id="p", problem="3 + 5?", answer="8")]))
    assert [m["role"] for m in engine.requests[0].messages] == ["user"]
    assert stage.settings()["system_prompt"] == "none"
    with pytest.raises(UsageError, match="no such prompt file"):
        load_prompt("none", SYSTEM_PROMPTS)  # only where a command allows it


@pytest.mark.parametrize("module, argv, says", [
    ("transformers", ["--tokenizer", "tok", "--max-length", "64"], "pip install"),
    ("pyarrow", ["-o", "{tmp}/train.parquet"], "pip install pyarrow"),
])
def test_a_missing_optional_package_is_one_line_and_exit_2(module, argv, says, files, tmp_path, monkeypatch):
    # find_spec reports a module whose sys.modules entry is None as not installed.
    monkeypatch.setitem(sys.modules, module, None)
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    result = runner.invoke(app, ["export", str(files["consensus"]), "--format", "trl", *args])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    [line] = result.stderr.strip().splitlines()
    assert f"'{module}'" in line and says in line and "Traceback" not in result.output


def test_a_missing_vllm_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    problems = write_jsonl(tmp_path / "p.jsonl", [{"id": "p", "problem": "3 + 5?", "answer": "8"}])
    model = tmp_path / "model"
    model.mkdir()
    result = runner.invoke(app, ["sample", str(problems), "--model", str(model), "-o", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert "'vllm'" in line and "pip install -e '.[cpu]'" in line
    assert not (tmp_path / "r.jsonl").exists()
