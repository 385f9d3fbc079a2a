"""The core install alone (`pip install -e .`, no extras) runs every command the README says needs
no vLLM, and a command that needs an optional package ends in one line naming it (exit 2).

A fresh virtual environment, the repository installed into it, the installed `prm-annotate`
command run as a user would (nothing of the test venv on its path). pip may use the machine's
cache or registry; nothing else is downloaded.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing.labelled_fixtures import DATA, mixed_records, write_all

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """The `prm-annotate` command of a fresh venv holding the core install only."""
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-e", str(REPO)],
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return venv / "bin" / "prm-annotate"


def run(exe: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def test_core_install_runs_the_commands_without_an_engine(core, tmp_path):
    files = write_all(tmp_path, mixed_records(8))
    ok = lambda *args: run(core, *args, cwd=tmp_path)  # noqa: E731
    # The venv really lacks the optional parts (else the checks below would prove nothing).
    python = core.with_name("python")
    missing = subprocess.run([str(python), "-c", "import importlib.util as u; "
                              "print([m for m in ('vllm', 'transformers', 'ray', 'torch') if u.find_spec(m)])"],
                             capture_output=True, text=True, timeout=60)
    assert missing.stdout.strip() == "[]", missing.stdout

    cons = ok("consensus", "rollouts.jsonl", "judged.jsonl", "-o", "consensus.jsonl")
    assert cons.returncode == 0, cons.stderr
    exported = ok("export", "consensus.jsonl", "-o", "train.parquet", "--format", "trl")
    assert exported.returncode == 0, exported.stderr
    stats = ok("stats", "train.parquet", "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["records"] == len((tmp_path / "consensus.jsonl").read_text().splitlines())
    evaluated = ok("evaluate", "judged.jsonl", "--gold", str(files["gold"]), "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["pred_field"] == "judge.first_error"
    compared = ok("compare", "rollouts.jsonl", "judged.jsonl", "consensus.jsonl", "--gold", str(files["gold"]))
    assert compared.returncode == 0 and "consensus" in compared.stdout, compared.stderr
    # The report's script and style ship as package data: a page made without them would be empty.
    reported = ok("report", "rollouts.jsonl", "judged.jsonl", "consensus.jsonl", "--gold", str(files["gold"]),
                  "-o", "report.html")
    assert reported.returncode == 0 and reported.stderr.startswith("report: wrote report.html"), reported.stderr
    assert "__overviewPainted" in (tmp_path / "report.html").read_text()
    grading = DATA / "grading" / "processbench-gsm8k-gold.jsonl"
    for shard in ("0/2", "1/2"):
        graded = ok("grade", str(grading), "--limit", "24", "--shard", shard, "-o", f"graded-{shard[0]}.jsonl",
                    "--quiet")
        assert graded.returncode == 0, graded.stderr
        assert "agrees with final_answer_correct" in graded.stderr
    merged = ok("merge", "graded-0.jsonl", "graded-1.jsonl", "-o", "graded.jsonl")
    assert merged.returncode == 0, merged.stderr
    assert len((tmp_path / "graded.jsonl").read_text().splitlines()) == 24


@pytest.mark.parametrize("args, package", [
    (["export", "consensus.jsonl", "--format", "trl", "--tokenizer", "tok", "--max-length", "64"], "transformers"),
    (["sample", "problems.jsonl", "--model", "model", "-o", "responses.jsonl"], "vllm"),
    (["grade", "problems.jsonl", "--executor", "ray"], "ray"),
    (["world", "report"], "vllm"),
])
def test_core_install_names_a_missing_package_in_one_line(core, tmp_path, args, package):
    write_all(tmp_path, mixed_records(4))
    (tmp_path / "problems.jsonl").write_text('{"id": "p", "problem": "3 + 5?", "answer": "8"}\n')
    (tmp_path / "model").mkdir()
    result = run(core, *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"'{package}'" in line and "pip install" in line
    assert not (tmp_path / "responses.jsonl").exists()
