"""Running a stage that needs a model: the options every such command takes (`ModelStageOptions`),
start the engine, run, close it, and leave by `exit_process` (an in-process vLLM engine sometimes
aborts a normal interpreter exit)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, NoReturn

import typer

from prm_annotate.cli.app import EXIT_USAGE, BatchOpt, CommonRunOptions, handled
from prm_annotate.cli.engine_options import EngineOptions
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.engines import EngineConfig, exit_process, make_engine
from prm_annotate.engines.base import Engine
from prm_annotate.records import Record
from prm_annotate.pipeline.executors import RayOptions, StageFactory
from prm_annotate.pipeline.runner import RunOptions, RunSummary, Stage, preflight, run_and_close


@dataclass(frozen=True)
class ModelStageOptions(ExecutorOptions, EngineOptions, CommonRunOptions):
    """How a model stage reads its input, its engine and its executor, as one command parameter (see
    option_groups); the --help order is CommonRunOptions', EngineOptions', ExecutorOptions'. A command
    with another --batch-size default declares the field again in a subclass (it keeps its place), as
    rollout does.
    """

    batch_size: BatchOpt = 256

    def prepare(self, input: str, output: str, *, seed: int, **fields: str) -> "PreparedRun":
        """The run options, the executor and the engine config, all checked before an engine starts;
        raises UsageError. `fields` as in CommonRunOptions.run_options."""
        return PreparedRun(self.run_options(input, output, **fields), self.ray(), self.config(seed=seed))


@dataclass(frozen=True)
class PreparedRun:
    """A model stage's run, checked and not yet started: `start` is `run_model_stage` with it."""

    opts: RunOptions
    ray: RayOptions | None
    engine: EngineConfig

    def start(self, build: Callable[[Engine], Stage], after: Callable[[Stage, RunSummary], None] | None = None,
              input_model: type[Record] | None = None) -> NoReturn:
        run_model_stage(self.engine, build, self.opts, after, ray=self.ray, input_model=input_model)


def run_model_stage(config: EngineConfig, build: Callable[[Engine], Stage], opts: RunOptions,
                    after: Callable[[Stage, RunSummary], None] | None = None,
                    ray: RayOptions | None = None, input_model: type[Record] | None = None,
                    make: Callable[[EngineConfig], Engine] = make_engine) -> NoReturn:
    """Check everything that can be checked before calling this: starting an engine takes seconds.
    With `input_model`, a file input is validated whole before the engine starts. `make` starts the
    engine (`score` starts a pooling engine instead of a generating one)."""
    if ray is not None:  # --executor ray: the engines start in Ray actors, none in this process
        run_model_stage_on_ray(config, build, opts, ray, after)
    engine: Engine | None = None
    code = EXIT_USAGE
    try:
        with handled():
            # Before the engine starts (seconds, and its own errors would hide these): a missing or
            # bad input and an output that cannot be written are said at once.
            preflight(opts, input_model)
            try:
                engine = make(config)
            except Exception as exc:  # a bad model path or an engine that did not come up
                print(f"prm-annotate: error: cannot start the engine for {config.model}: {exc}", file=sys.stderr)
                raise typer.Exit(EXIT_USAGE) from None
            try:
                stage = build(engine)
                summary = run_and_close(stage, opts)
            finally:
                engine.close()
            code = finish(stage, summary, after)
    except typer.Exit as exc:
        code = exc.exit_code
    if engine is None:
        raise typer.Exit(code)
    exit_process(code)


def finish(stage: Stage, summary: RunSummary, after: Callable[[Stage, RunSummary], None] | None) -> int:
    """After the run's summary line: the command's own epilogue (`after`), and the exit status."""
    if after is not None:
        after(stage, summary)
    return summary.exit_code


def run_model_stage_on_ray(config: EngineConfig, build: StageFactory, opts: RunOptions, ray: RayOptions,
                           after: Callable[[Stage, RunSummary], None] | None = None) -> NoReturn:
    """`run_model_stage` for `--executor ray`: the engines start in the actors, none here, so the
    driver leaves normally (no `exit_process`). Exit status as locally: 0, 1 (failed records), 2."""
    from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray

    code = EXIT_USAGE
    try:
        with handled():
            stage, summary = run_stage_on_ray(build, config, opts, ray)
            code = finish(stage, summary, after)
    except typer.Exit as exc:
        code = exc.exit_code
    raise typer.Exit(code)
