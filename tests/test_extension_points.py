"""The extension points and routine changes, each made in a copy of the package exactly as
docs/architecture.md lists it. A registry extension is three files: one new module, its
registration (one line in the registry), and its test; no other code file changes, and the docs'
tables of names see the new kind (docs/names.md is made again by `python -m testing.registries`;
a table written by hand names the rows it lacks). A sampling parameter, an engine option and
a new stage command touch the files their row of "the files to touch" names, and nothing else (the
test reads the row). Each test then finds the new piece in the command line's help and running
through what uses it, in a fresh process. (Export formats: tests/export/.)"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from testing.paths import REPO


class PackageCopy:
    """A copy of prm_annotate to change, and a way to run Python against it."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.root = tmp_path / "copy"
        shutil.copytree(REPO / "prm_annotate", self.root / "prm_annotate", symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__", "models"))
        # The world models are not needed here; the prompts are (a link in the repository, copied whole).
        self.changed: set[str] = set()  # package files written or edited

    def add(self, module: str, text: str, registry: str, lines: dict[str, str]) -> None:
        """Write the new module; in the registry, insert each line after its anchor (the import and
        the entry)."""
        (self.root / "prm_annotate" / module).write_text(textwrap.dedent(text))
        self.changed.add(module)
        self.edit({registry: lines})

    def edit(self, files: dict[str, dict[str, str]]) -> None:
        """In each file, insert each text after its anchor (which must occur once)."""
        for name, lines in files.items():
            path = self.root / "prm_annotate" / name
            source = path.read_text()
            for after, line in lines.items():
                assert source.count(after) == 1, f"{name}: the anchor {after!r} moved"
                source = source.replace(after, after + line)
            path.write_text(source)
            self.changed.add(name)

    def replace(self, files: dict[str, dict[str, str]]) -> None:
        """In each file, replace each text (which must occur once)."""
        for name, changes in files.items():
            path = self.root / "prm_annotate" / name
            source = path.read_text()
            for old, new in changes.items():
                assert source.count(old) == 1, f"{name}: {old!r} moved"
                source = source.replace(old, new)
            path.write_text(source)
            self.changed.add(name)

    def docs_check(self) -> tuple[list[str], list[str]]:
        """(what the docs' tables of names say against the copy's registries, the same once the
        generated tables are made again), on a copy of the docs."""
        docs = self.tmp_path / "docs"
        docs.mkdir(exist_ok=True)
        for doc in (REPO / "README.md", *(REPO / "docs").glob("*.md")):
            shutil.copy(doc, docs / doc.name)
        out = self.run(code=textwrap.dedent(f'''
            import json
            from pathlib import Path
            from testing.registries import rewrite, stale

            docs = sorted(Path({str(docs)!r}).glob("*.md"))
            before = stale(docs)
            rewrite(docs)
            print(json.dumps([before, stale(docs)]))
            '''))
        assert out.returncode == 0, out.stderr
        before, after = json.loads(out.stdout)
        return before, after

    def run(self, *args: str, code: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(self.root), str(REPO)]), "COLUMNS": "200"}
        cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "prm_annotate", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd or self.tmp_path, timeout=120)


@pytest.fixture
def copy(tmp_path) -> PackageCopy:
    return PackageCopy(tmp_path)


@pytest.fixture
def package_copy(copy):
    """(add, run) of a `PackageCopy`."""
    return copy.add, copy.run


LAST_ONLY = '''
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
        '''
LAST_ONLY_REGISTRATION = ("strategies/__init__.py", {"from prm_annotate.strategies.scan import Scan\n":
                                                    "from prm_annotate.strategies.last_only import LastOnly\n",
                                                    "    Scan,\n": "    LastOnly,\n"})


def test_a_new_rollout_strategy_is_one_module_and_its_registration(package_copy):
    add, run = package_copy
    add("strategies/last_only.py", LAST_ONLY, *LAST_ONLY_REGISTRATION)
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
    assert "auto | aqua | deltabench | generic | gsm8k | hard2verify | math | prmbench | processbench" in run("sample", "--help").stdout
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


def routine_files(change: str) -> set[str]:
    """The package files docs/architecture.md lists for a routine change (its row of "the files to
    touch"): every backticked path in the row that names a file of prm_annotate."""
    for line in (REPO / "docs" / "architecture.md").read_text().splitlines():
        if line.startswith(f"| {change} |"):
            named = re.findall(r"`([\w/]+\.py)`", line)
            return {name for name in named if (REPO / "prm_annotate" / name).is_file()}
    raise AssertionError(f"docs/architecture.md has no row for {change!r}")


class CapturingServer:
    """An OpenAI-shaped chat server on 127.0.0.1 that keeps every request body and answers a judge
    prompt (it shows tagged paragraphs) with a verdict, anything else with a two-step solution."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def send_json(self, obj):
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # the model list the engine checks before its first request
                self.send_json({"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                judge = "<paragraph_" in body["messages"][0]["content"]
                text = "\\boxed{-1}" if judge else "Two and three.\n\nSo \\boxed{5}"
                self.send_json({"choices": [{"index": i, "message": {"content": text}, "finish_reason": "stop"}
                                            for i in range(body["n"])],
                                "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_new_sampling_parameter_is_its_field_and_the_two_engine_mappings(copy, tmp_path):
    """`min_p` added as docs/architecture.md says, and nowhere else: it is an option of every model
    stage, reaches vLLM's SamplingParams and the OpenAI request body, and is recorded in each stage's
    records and manifest; the official judge protocol refuses it like the other sampling options."""
    copy.edit({
        "engines/sampling.py": {'''    seed: Optional[int] = setting(None, flags="--seed", help="Run seed; each {request}'s seed derives from it.")\n''':
                                '''    min_p: float = setting(0.0, flags="--min-p", min=0.0, max=1.0, help="Least probability, as a share of the likeliest token's.")\n'''},
        "engines/vllm_engine.py": {"seed=s.seed,": " min_p=s.min_p,"},
        "engines/openai_engine.py": {'        body["seed"] = s.seed\n': '    body["min_p"] = s.min_p\n'},
    })
    assert copy.changed == routine_files("a sampling parameter")
    run = copy.run
    for command in ("sample", "rollout", "judge"):
        assert "--min-p" in run(command, "--help").stdout, command

    problems = tmp_path / "problems.jsonl"
    problems.write_text('{"id": "p", "problem": "2 + 3?", "answer": "5"}\n')
    server = CapturingServer()
    try:
        common = ("--base-url", server.url, "--model", "m", "--min-p", "0.25", "-q")
        for command, args in (("sample", (str(problems), "-n", "1", "-o", "responses.jsonl")),
                              ("rollout", ("responses.jsonl", "-k", "1", "-o", "rollouts.jsonl")),
                              ("judge", ("responses.jsonl", "--prompt", "processbench", "-o", "judged.jsonl"))):
            done = run(command, *args, *common)
            assert done.returncode == 0, done.stderr
    finally:
        server.close()
    assert server.bodies and all(body["min_p"] == 0.25 for body in server.bodies)
    for name, where in (("responses", "generator"), ("rollouts", "mc"), ("judged", "judge")):
        record = json.loads((tmp_path / f"{name}.jsonl").read_text().splitlines()[0])
        assert record[where]["min_p"] == 0.25, name
        manifest = json.loads((tmp_path / f"{name}.manifest.json").read_text())
        assert manifest["runs"][-1]["settings"]["min_p"] == 0.25, name
    refused = run("judge", "responses.jsonl", "--protocol", "processbench-official", "-o", "official.jsonl", *common)
    assert refused.returncode == 2 and "--min-p" in refused.stderr

    pytest.importorskip("vllm")
    out = run(code=textwrap.dedent('''
        from prm_annotate.engines import GenerationRequest, Sampling
        from prm_annotate.engines.vllm_engine import sampling_params

        params = sampling_params(GenerationRequest("a", ({"role": "user", "content": "hi"},),
                                                   sampling=Sampling(min_p=0.25, seed=3)), room=100)
        print(type(params).__module__, type(params).__name__, params.min_p, params.seed)
        '''))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["vllm.sampling_params", "SamplingParams", "0.25", "3"]


def test_a_new_engine_option_is_its_vllm_setting(copy):
    """A vLLM setting (`max_num_seqs`) added as docs/architecture.md says: every model stage takes
    --max-num-seqs, `EngineConfig` has the field, and vLLM's engine arguments get it (each one a
    field of vLLM's own EngineArgs)."""
    copy.edit({
        "engines/defaults.py": {
            "    load_progress: bool = True\n": '    max_num_seqs: Optional[int] = setting(None, flags="--max-num-seqs", min=1, '
                                              'panel=PANEL, help="Requests vLLM runs at once.")\n',
            '            args["use_tqdm_on_load"] = False\n':
                '        if self.max_num_seqs is not None:\n            args["max_num_seqs"] = self.max_num_seqs\n'},
    })
    assert copy.changed == routine_files("an engine option (a vLLM setting)")
    for command in ("sample", "rollout", "judge", "score"):
        assert "--max-num-seqs" in copy.run(command, "--help").stdout, command
    pytest.importorskip("vllm")
    out = copy.run(code=textwrap.dedent('''
        import typer
        from typer.testing import CliRunner
        from prm_annotate.cli.app import app
        from prm_annotate.cli import model_stage

        seen = []
        model_stage.run_model_stage = lambda config, *args, **kw: seen.append(config)
        CliRunner().invoke(app, ["sample", "p.jsonl", "--model", "m", "--max-num-seqs", "8"])
        [config] = seen
        from prm_annotate.engines.defaults import VLLMSettings
        args = VLLMSettings(**config.vllm_settings()).args("/m", cpu=True)
        import dataclasses
        from vllm.engine.arg_utils import EngineArgs
        assert set(args) <= {f.name for f in dataclasses.fields(EngineArgs)}, args  # vLLM takes every one
        print(config.max_num_seqs, args["max_num_seqs"])
        '''))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["8", "8"]


def test_a_new_training_option_is_its_field_and_its_use(copy, tmp_path):
    """A training setting (`max_grad_norm`, fixed at 1.0 until now) added as docs/architecture.md
    says: `train --help` shows it, the command hands it to `TrainConfig`, the checkpoint's record of
    the run (`_settings`, what --resume compares) holds it, and transformers' TrainingArguments get it."""
    copy.edit({"prm/train.py": {
        '    weight_decay: float = setting(0.0, flags="--weight-decay", min=0.0, panel=RUN, help="AdamW weight decay.")\n':
            '    max_grad_norm: float = setting(1.0, flags="--max-grad-norm", min=0.0, panel=RUN, '
            'help="Gradient clipping: the largest gradient norm.")\n'}})
    copy.replace({"prm/train.py": {"max_grad_norm=1.0,": "max_grad_norm=cfg.max_grad_norm,"}})
    assert copy.changed == routine_files("a training option")
    assert "--max-grad-norm" in copy.run("train", "--help").stdout
    out = copy.run(code=textwrap.dedent('''
        from typer.testing import CliRunner
        from prm_annotate.cli.app import app
        from prm_annotate.prm import train as training

        seen = []
        training.train = lambda config: seen.append(config) or exit(0)
        CliRunner().invoke(app, ["train", "d.jsonl", "--base", "b", "-o", "out", "--max-grad-norm", "0.25"])
        [config] = seen
        args = training.training_arguments(config, training.Paths.of("out"), has_eval=False)
        print(config.max_grad_norm, training._settings(config)["max_grad_norm"], args.max_grad_norm)
        '''), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["0.25", "0.25", "0.25"]


def test_a_new_stage_is_its_module_its_command_and_one_import(copy, tmp_path):
    """A stage without a model (`reverse`: each response's steps in reverse order) with its command:
    the stage module, the command module and its import in cli/__init__.py, as docs/architecture.md
    says; the command is listed, runs through the runner (resumable output, manifest) and exits 0."""
    copy.add("stages/reverse.py", '''
        """reverse: responses -> responses with their steps in reverse order (a throwaway for the test)."""
        from collections import Counter
        from dataclasses import asdict, dataclass

        from prm_annotate.pipeline.runner import Outcome, StageBase
        from prm_annotate.records import Response
        from prm_annotate.settings import setting


        @dataclass(frozen=True)
        class ReverseConfig:
            """Attributes:
                keep_first: leave the first step where it is.
            """

            keep_first: bool = setting(False, flags="--keep-first/--no-keep-first", help="Leave the first step in place.")


        class ReverseStage(StageBase):
            name = "reverse"
            input_model = Response
            output_model = Response

            def __init__(self, config=ReverseConfig()):
                self.config, self.stats = config, Counter()

            def settings(self):
                return asdict(self.config)

            def process(self, batch):
                self.stats["reversed"] += len(batch)
                keep = 1 if self.config.keep_first else 0
                return [Outcome.one(Response.make({**r.dump(), "steps": r.steps[:keep] + r.steps[keep:][::-1]}))
                        for r in batch]
        ''', "cli/__init__.py", {"from prm_annotate.cli import world  # noqa: E402,F401\n":
                                 "from prm_annotate.cli import reverse  # noqa: E402,F401\n"})
    copy.add("cli/reverse.py", '''
        import typer

        from prm_annotate.cli.app import CommonRunOptions, InputArg, OutputOpt, app, handled
        from prm_annotate.cli.option_groups import option_groups
        from prm_annotate.pipeline.runner import run_and_close
        from prm_annotate.stages.reverse import ReverseConfig, ReverseStage


        @app.command()
        @option_groups
        def reverse(input: InputArg, output: OutputOpt = "-", *, config: ReverseConfig, run_opts: CommonRunOptions) -> None:
            """Reverse each response's steps."""
            with handled():
                summary = run_and_close(ReverseStage(config), run_opts.run_options(input, output))
            raise typer.Exit(summary.exit_code)
        ''', "cli/__init__.py", {})
    allowed = routine_files("a stage") | {"stages/reverse.py", "cli/reverse.py"}
    assert copy.changed <= allowed and "cli/__init__.py" in copy.changed
    assert "Reverse each response's steps." in copy.run("--help").stdout
    assert "Leave the first step in place." in copy.run("reverse", "--help").stdout
    src = tmp_path / "responses.jsonl"
    src.write_text('{"id": "r", "problem": "p", "steps": ["a", "b", "c"]}\n')
    done = copy.run("reverse", str(src), "-o", "out.jsonl", "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["steps"] == ["c", "b", "a"]
    assert json.loads((tmp_path / "out.manifest.json").read_text())["runs"][-1]["stage"] == "reverse"
    done = copy.run("reverse", str(src), "-o", "kept.jsonl", "-q", "--keep-first")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "kept.jsonl").read_text())["steps"] == ["a", "c", "b"]
    assert json.loads((tmp_path / "kept.manifest.json").read_text())["runs"][-1]["settings"]["keep_first"] is True


def test_a_new_strategy_changes_no_other_file_and_the_docs_see_it(copy):
    copy.add("strategies/last_only.py", LAST_ONLY, *LAST_ONLY_REGISTRATION)
    assert copy.changed == {"strategies/last_only.py", "strategies/__init__.py"}
    before, after = copy.docs_check()
    assert any("names.md" in line and "STRATEGIES" in line for line in before)
    # docs/names.md is made again; the hand table of docs/rollout-strategies.md names its missing row.
    assert after == [next(line for line in after if "rollout-strategies.md" in line)] and "last-only" in after[0]


def test_a_new_segmenter_is_one_module_and_its_registration(copy, tmp_path):
    copy.add("segmenting/lines.py", '''
        """lines: a step per line (a throwaway for the test)."""
        from dataclasses import dataclass

        from prm_annotate.segmenting.base import Segmenter, paragraph_spans


        @dataclass(frozen=True)
        class Lines(Segmenter):
            name = "lines"
            summary = "a step per line"
            sep: str = "\\n"

            def spans(self, text, tokens):
                return paragraph_spans(text, self.sep)
        ''', "segmenting/__init__.py", {"from prm_annotate.segmenting.reflection import Reflection\n":
                                        "from prm_annotate.segmenting.lines import Lines\n",
                                        "    Confidence,\n": "    Lines,\n"})
    assert copy.changed == {"segmenting/lines.py", "segmenting/__init__.py"}
    assert "lines (a step per line)" in copy.run("segment", "--help").stdout
    src = tmp_path / "responses.jsonl"
    src.write_text('{"id": "r", "problem": "p", "steps": ["a\\nb", "c"]}\n')
    done = copy.run("segment", str(src), "--segment", "lines", "-o", "cut.jsonl")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "cut.jsonl").read_text())
    assert record["steps"] == ["a", "b", "c"] and record["segmenter"]["name"] == "lines"
    before, after = copy.docs_check()
    assert any("names.md" in line and "SEGMENTERS" in line for line in before)
    assert len(after) == 1 and "pipeline.md" in after[0] and "lines" in after[0]  # its hand table's row


def test_a_new_judge_protocol_is_one_module_and_its_registration(copy):
    copy.add("judging/earliest.py", '''
        """earliest: the earliest error any vote names (a throwaway for the test)."""
        from prm_annotate.judging.protocols import JudgeProtocol, Reading, read_each, strict_sampling


        def read_earliest(texts, n_steps, style, cut=(), refused=()):
            votes, errors = read_each(texts, n_steps, style.parse, cut, refused)
            wrong = [v for v in votes if v is not None and v >= 0]
            return Reading(min(wrong) if wrong else (-1 if -1 in votes else None), votes, errors)


        PROTOCOL = JudgeProtocol("earliest", "the earliest error any vote names", "processbench", strict_sampling,
                                 read_earliest)
        ''', "judging/__init__.py", {"from prm_annotate.judging import deltabench, slips\n":
                                     "from prm_annotate.judging import earliest\n",
                                     "    slips.PROTOCOL,\n": "    earliest.PROTOCOL,\n"})
    assert copy.changed == {"judging/earliest.py", "judging/__init__.py"}
    assert "earliest (the earliest error any vote names)" in copy.run("judge", "--help").stdout
    out = copy.run(code=textwrap.dedent('''
        import itertools
        from prm_annotate.records import Response
        from prm_annotate.stages.judge import JudgeStage
        from testing.scripted_engine import ScriptedEngine

        answers = itertools.cycle(["\\\\boxed{2}", "\\\\boxed{1}", "\\\\boxed{-1}"])
        stage = JudgeStage(ScriptedEngine(lambda r: next(answers)), protocol="earliest", votes=3)
        record = Response.model_validate({"id": "r", "problem": "p", "steps": ["a", "b", "c"]})
        [outcome] = stage.process([record])
        judge = outcome.records[0].dump()["judge"]
        print(judge["first_error"], sorted(judge["votes"]), stage.settings()["protocol"])
        '''))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "[-1,", "1,", "2]", "earliest"]
    before, after = copy.docs_check()
    assert any("names.md" in line and "JUDGE_PROTOCOLS" in line for line in before)
    assert len(after) == 1 and "pipeline.md" in after[0] and "earliest" in after[0]  # its hand list's item


def test_a_new_export_format_is_one_module_and_its_registration(copy):
    copy.add("export/lines.py", '''
        """`--format lines`: the problem and its steps as one text, one label per step (a throwaway)."""
        from dataclasses import dataclass

        from prm_annotate.export.formats import ExportFormat


        @dataclass(frozen=True)
        class Lines(ExportFormat):
            def fields(self, problem, steps, values, opts, check):
                return {"text": "\\n".join([problem, *steps]), "labels": [int(v) for v in values]}


        FORMAT = Lines("lines", consumer="a line reader", summary="one text and a label per step")
        ''', "export/__init__.py", {"register(critic.HF_FORMAT)\n": "register(lines.FORMAT)\n",
                                    "from prm_annotate.export import critic, hf, math_shepherd, openrlhf, qwen, tokens, trl\n":
                                    "from prm_annotate.export import lines\n"})
    assert copy.changed == {"export/lines.py", "export/__init__.py"}
    assert "critic-hf | lines" in copy.run("export", "--help").stdout
    before, after = copy.docs_check()
    assert any("names.md" in line and "EXPORT_FORMATS" in line for line in before)
    assert len(after) == 1 and "usage.md" in after[0] and "lines" in after[0]  # its hand table's row
