"""The extension points are each a change of three files: one new module, its registration (one
line in the registry), and its test. Each test here makes exactly that change in a copy of the
package — writes the new module, adds the one line — and then finds the new piece in the command
line's help and running through the stage that uses it, in a fresh process. (Export formats:
tests/export/.)"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testing.paths import REPO


@pytest.fixture
def package_copy(tmp_path):
    """A copy of prm_annotate to change, and a way to run Python against it."""
    root = tmp_path / "copy"
    shutil.copytree(REPO / "prm_annotate", root / "prm_annotate", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "models"))
    # The world models are not needed here; the prompts are (a link in the repository, copied whole).

    def add(module: str, text: str, registry: str, lines: dict[str, str]) -> None:
        """Write the new module; in the registry, insert each line after its anchor (the import and
        the entry)."""
        (root / "prm_annotate" / module).write_text(textwrap.dedent(text))
        path = root / "prm_annotate" / registry
        source = path.read_text()
        for after, line in lines.items():
            assert source.count(after) == 1, f"{registry}: the registration anchor {after!r} moved"
            source = source.replace(after, after + line)
        path.write_text(source)

    def run(*args: str, code: str | None = None, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "COLUMNS": "200"}
        cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "prm_annotate", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)

    return add, run


def test_a_new_rollout_strategy_is_one_module_and_its_registration(package_copy):
    add, run = package_copy
    add("strategies/last_only.py", '''
        """last-only: only the step before the last, K completions (a throwaway for the test)."""
        from prm_annotate.strategies.base import Plan, PlanResult, Probe, Strategy, first_error_of, last_step_score


        class LastOnlyPlan(Plan):
            def __init__(self, n_steps, k, threshold, last_correct):
                self.n, self.k, self.threshold, self.last = n_steps, k, threshold, last_correct
                self.sent, self.right = False, 0

            def next_round(self):
                if self.sent or self.n < 2:
                    return []
                self.sent = True
                return [Probe(self.n - 2, j) for j in range(self.k)]

            def observe(self, results):
                self.right += sum(r.correct is True for r in results)

            def result(self):
                scores = [None] * max(0, self.n - 2) + ([self.right / self.k] if self.n >= 2 else [])
                scores.append(last_step_score(self.last))
                return PlanResult(scores, first_error_of(scores, self.threshold))


        class LastOnly(Strategy):
            name = "last-only"
            summary = "only the step before the last"

            def plan(self, n_steps, k, threshold, last_correct):
                return LastOnlyPlan(n_steps, k, threshold, last_correct)
        ''', "strategies/__init__.py", {"from prm_annotate.strategies.scan import Scan\n":
                                        "from prm_annotate.strategies.last_only import LastOnly\n",
                                        "    Scan,\n": "    LastOnly,\n"})
    help_text = run("rollout", "--help").stdout
    assert "last-only (only the step before the last)" in help_text
    out = run(code=textwrap.dedent('''
        from prm_annotate.records import Response
        from prm_annotate.stages.rollout import RolloutStage
        from testing.scripted_engine import ScriptedEngine

        stage = RolloutStage(ScriptedEngine(lambda r: "\\\\boxed{16}"), k=2, strategy="last-only", speculate=256)
        record = Response.model_validate({"id": "r", "problem": "p", "answer": "16", "steps": ["a", "b", "c"],
                                          "correct": False})
        [outcome] = stage.process([record])
        mc = outcome.records[0].dump()["mc"]
        print(mc["strategy"], mc["scores"], mc["first_error"], stage.settings()["strategy"])
        '''))
    # Speculation on (the in-process default) and a plan that names no guesses: the Plan base opts it out.
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["last-only", "[None,", "1.0,", "0.0]", "2", "last-only"]


def test_a_new_input_format_is_one_module_and_its_registration(package_copy, tmp_path):
    add, run = package_copy
    add("io/inputs/aqua.py", '''
        """AQuA-style rows: `question` and `correct` (a throwaway for the test)."""
        from prm_annotate.io.inputs.base import InputFormat


        def detect(obj):
            return "question" in obj and "correct" in obj and "options" in obj


        def normalise(obj, stem, index, fields):
            out = {k: v for k, v in obj.items() if k not in ("question", "correct")}
            out.setdefault("id", f"aqua-{stem}-{index}")
            return {**out, "problem": obj["question"], "answer": obj["correct"]}


        FORMAT = InputFormat("aqua", normalise, detect)
        ''', "io/inputs/__init__.py", {"from prm_annotate.io.inputs import generic, gsm8k, hard2verify, math, prmbench, processbench\n":
                                       "from prm_annotate.io.inputs import aqua\n",
                                       "    math.FORMAT,\n": "    aqua.FORMAT,\n"})
    assert "auto | aqua | generic | gsm8k | hard2verify | math | prmbench | processbench" in run("sample", "--help").stdout
    rows = tmp_path / "aqua.jsonl"
    rows.write_text('{"question": "2 + 3?", "options": ["A)5", "B)6"], "correct": "5", '
                    '"response": "2 + 3 = 5. The answer is \\\\boxed{5}."}\n')
    graded = run("grade", str(rows), "--no-baseline", "-q")  # detected as aqua: its id, problem and answer
    assert graded.returncode == 0, graded.stderr
    assert '"id":"aqua-aqua-0"' in graded.stdout and '"correct":true' in graded.stdout


def test_a_new_judge_style_is_one_module_and_its_registration(package_copy, tmp_path):
    add, run = package_copy
    add("judging/verdict_line.py", '''
        """`Verdict: k` on the last line, paragraphs from 1, 0 for no error (a throwaway for the test)."""
        import re

        from prm_annotate.judging.styles import JudgeStyle, ParseFailure


        def parse(text, n_steps):
            m = re.fullmatch(r"Verdict: (\\d+)", text.strip().splitlines()[-1])
            if m is None or int(m.group(1)) > n_steps:
                raise ParseFailure("no verdict line")
            return int(m.group(1)) - 1


        STYLE = JudgeStyle("verdict-line", "Verdict: k on the last line", 1, parse, "Verdict:",
                           lambda n: "Verdict: (" + "|".join(str(i) for i in range(n + 1)) + ")")
        ''', "judging/__init__.py", {"from prm_annotate.judging import paper, processbench\n":
                                     "from prm_annotate.judging import verdict_line\n",
                                     "    paper.STYLE,\n": "    verdict_line.STYLE,\n"})
    assert "verdict-line (Verdict: k on the last line)" in run("judge", "--help").stdout
    prompt = tmp_path / "mine.txt"
    prompt.write_text("---\nstyle: verdict-line\n---\n{problem}\n\n{paragraphs}\n\nEnd with `Verdict: k`.\n")
    out = run(code=textwrap.dedent(f'''
        from prm_annotate.records import Response
        from prm_annotate.stages.judge import JudgeStage
        from testing.scripted_engine import ScriptedEngine

        stage = JudgeStage(ScriptedEngine(lambda r: "step 2 is wrong\\nVerdict: 2"), prompt={str(prompt)!r})
        record = Response.model_validate({{"id": "r", "problem": "p", "steps": ["a", "b", "c"]}})
        [outcome] = stage.process([record])
        sent = stage.engine.requests[0].messages[0]["content"]
        print(outcome.records[0].dump()["judge"]["first_error"], stage.settings()["style"],
              sent.startswith("p"), "<paragraph_1>" in sent)
        '''))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "verdict-line", "True", "True"]  # the header is not sent
