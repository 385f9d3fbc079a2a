"""A new export format is three files: its module in prm_annotate/export/, one `register(...)`
line in prm_annotate/export/__init__.py, and its test. Shown on a copy of the package with exactly
those two changes (this file is the third): `export --help` lists the format, its option checks
come from the format object, and `export --format` writes its rows."""
from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import prm_annotate
from prm_annotate.export import EXPORT_FORMATS, register
from testing.labelled_fixtures import mixed_records, write_all

# The new format's whole module: one text per response, one 0/1 (or MC score) per step.
LINES_MODULE = '''"""`--format lines`: the problem and its steps as one text, one label per step."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.export.formats import ExportFormat


@dataclass(frozen=True)
class Lines(ExportFormat):
    def fields(self, problem, steps, values, opts, check) -> dict[str, Any]:
        return {"text": opts.sep.join([problem, *steps]), "labels": [float(v) if opts.soft else int(v) for v in values]}


FORMAT = Lines("lines", consumer="a line reader", soft=True)
'''
REGISTRATION = "register(lines.FORMAT)\n"


@pytest.fixture(scope="module")
def package_with_lines(tmp_path_factory) -> Path:
    """A copy of the package plus the new module and its registration line; nothing else differs."""
    root = tmp_path_factory.mktemp("pkg")
    original = Path(prm_annotate.__file__).parent
    shutil.copytree(original, root / "prm_annotate", ignore=shutil.ignore_patterns("__pycache__", "*.safetensors"))
    export = root / "prm_annotate" / "export"
    (export / "lines.py").write_text(LINES_MODULE)
    init = (export / "__init__.py").read_text()
    importing = "from prm_annotate.export import critic, hf, math_shepherd, openrlhf, qwen, tokens, trl\n"
    assert importing in init
    (export / "__init__.py").write_text(init.replace(importing, importing.replace(" hf,", " hf, lines,")) + REGISTRATION)
    changed = filecmp.dircmp(original / "export", export, ignore=["__pycache__"])
    assert (changed.left_only, changed.right_only, changed.diff_files) == ([], ["lines.py"], ["__init__.py"])
    return root


def cli(package: Path | None, *args: str) -> subprocess.CompletedProcess:
    """`prm-annotate` in a fresh interpreter, on the copied package when one is given."""
    env = {**os.environ, "COLUMNS": "200"}  # wide enough that the --format list is one line
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(package), env.get("PYTHONPATH", "")])
    code = "import sys, prm_annotate; print(prm_annotate.__file__, file=sys.stderr); from prm_annotate.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=package or Path.cwd(), timeout=120)


def test_a_registered_format_is_listed_checked_and_written(package_with_lines, tmp_path):
    before = cli(None, "export", "--help")
    assert before.returncode == 0 and "trl | openrlhf | qwen | math-shepherd | tokens | hf | critic | critic-hf" in before.stdout
    assert "lines" not in before.stdout  # the baseline: the repository's own package has no such format

    helped = cli(package_with_lines, "export", "--help")
    assert str(package_with_lines) in helped.stderr, helped.stderr  # ran on the copy
    assert "trl | openrlhf | qwen | math-shepherd | tokens | hf | critic | critic-hf | lines" in helped.stdout
    assert "(qwen, tokens, lines)" in helped.stdout  # --soft names the formats that take soft labels

    files = write_all(tmp_path, mixed_records(8))
    out = tmp_path / "lines.jsonl"
    made = cli(package_with_lines, "export", str(files["consensus"]), "-o", str(out), "--format", "lines",
               "--step-sep", r"\n\n")
    assert made.returncode == 0, made.stderr
    consensus = [json.loads(line) for line in files["consensus"].read_text().splitlines()]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(consensus) > 0
    for row, rec in zip(rows, consensus):
        assert row == {"id": rec["id"], "text": "\n\n".join([rec["problem"], *rec["steps"]]),
                       "labels": [int(v) for v in rec["labels"]]}
    assert f"export: {len(rows)} lines rows from {len(consensus)} records to {out}" in made.stderr

    soft = cli(package_with_lines, "export", str(files["rollouts"]), "-o", str(tmp_path / "soft.jsonl"),
               "--format", "lines", "--soft")
    assert soft.returncode == 0, soft.stderr
    rollouts = [json.loads(line) for line in files["rollouts"].read_text().splitlines()]
    for line, rec in zip((tmp_path / "soft.jsonl").read_text().splitlines(), rollouts):
        labels = json.loads(line)["labels"]
        assert labels == rec["mc"]["scores"][: len(labels)] and all(isinstance(v, float) for v in labels)
    # what the format does not take is refused as for any other format: it has no step tag
    tagged = cli(package_with_lines, "export", str(files["consensus"]), "--format", "lines", "--placeholder", "x")
    assert tagged.returncode == 2 and "--placeholder: the lines format has no step tag" in tagged.stderr
    # and another format's soft-label refusal now names it too
    hard = cli(package_with_lines, "export", str(files["consensus"]), "--format", "trl", "--soft")
    assert hard.returncode == 2 and "soft labels go to qwen or tokens or lines" in hard.stderr


def test_a_format_without_a_length_check_refuses_max_length():
    """Only `fields` is required of a new format; --max-length then says it has no check (exit 2)."""
    from prm_annotate.errors import UsageError
    from prm_annotate.export import ExportFormat

    with pytest.raises(UsageError, match="--max-length: the bare format has no length check"):
        ExportFormat("bare", consumer="nobody").label_positions({"id": "a"}, None, None, None)  # type: ignore[arg-type]


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="registered already"):
        register(EXPORT_FORMATS["trl"])
    with pytest.raises(TypeError):
        register("csv")  # type: ignore[arg-type]


@pytest.mark.parametrize(("command", "names"), [("export", list(EXPORT_FORMATS)), ("sample", None),
                                                ("models", None)])
def test_every_listed_name_survives_a_narrow_terminal(command, names):
    """At 80 columns the lists of names wrap instead of being cut (`trl|openrlhf|qw…` was all a
    terminal showed of export's formats)."""
    from typer.testing import CliRunner

    from prm_annotate.cli import app
    from prm_annotate.io.inputs import format_names
    from prm_annotate.cli.models import KNOWN

    args = {"export": ["export", "--help"], "sample": ["sample", "--help"], "models": ["models", "prepare", "--help"]}
    names = names or (format_names() if command == "sample" else list(KNOWN))
    text = CliRunner().invoke(app, args[command], env={"COLUMNS": "80"}).output
    words = set(text.replace("|", " ").replace(",", " ").replace(".", " ").split())
    assert [n for n in names if n not in words] == []
