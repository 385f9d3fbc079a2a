"""Running a stage that needs a model: the options every such command takes (`ModelStageOptions`),
start the engine, run, close it, and leave by `exit_process` (an in-process vLLM engine sometimes
aborts a normal interpreter exit)."""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Callable, NoReturn

import typer

from prm_annotate.cli.app import EXIT_USAGE, CommonRunOptions, handled
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.engines import EngineConfig, exit_process, make_engine
from prm_annotate.engines.base import Engine
from prm_annotate.errors import UsageError
from prm_annotate.pipeline.executors import LocalExecutor, StageExecutor
from prm_annotate.pipeline.runner import RunOptions, RunSummary, Stage, preflight
from prm_annotate.records import Record


@dataclass(frozen=True, kw_only=True)
class ModelStageOptions:
    """How a model stage reads its input, its engine and its executor, as one command parameter (see
    option_groups), in this --help order. A command with another --batch-size default gives `run`
    its own default in a subclass, as rollout does."""

    run: CommonRunOptions = CommonRunOptions(batch_size=256)
    engine: EngineConfig
    executor: ExecutorOptions = ExecutorOptions()

    def prepare(self, input: str, output: str, *, seed: int, **fields: str) -> "PreparedRun":
        """The run options, the executor and the engine config, all checked before an engine starts;
        raises UsageError. `fields` as in CommonRunOptions.run_options."""
        return PreparedRun(self.run.run_options(input, output, **fields), self.executor.make(),
                           replace(self.engine, seed=seed))


@dataclass(frozen=True)
class PreparedRun:
    """A model stage's run, checked and not yet started: `start` is `run_model_stage` with it."""

    opts: RunOptions
    executor: StageExecutor
    engine: EngineConfig

    def start(self, build: Callable[[Engine], Stage], after: Callable[[Stage, RunSummary], None] | None = None,
              input_model: type[Record] | None = None) -> NoReturn:
        run_model_stage(self.engine, build, self.opts, after, executor=self.executor, input_model=input_model)


def run_model_stage(config: EngineConfig, build: Callable[[Engine], Stage], opts: RunOptions,
                    after: Callable[[Stage, RunSummary], None] | None = None,
                    executor: StageExecutor = LocalExecutor(), input_model: type[Record] | None = None,
                    make: Callable[[EngineConfig], Engine] = make_engine) -> NoReturn:
    """Check everything that can be checked before calling this: starting an engine takes seconds.
    With `input_model`, a file input is validated whole before the engine starts. `make` starts the
    engine (`score` starts a pooling engine instead of a generating one). Exit status 0, 1 (failed
    records: a rerun retries the transient ones, not the permanent ones) or 2."""
    started = False

    def start(config: EngineConfig) -> Engine:
        nonlocal started
        try:
            engine = make(config)
        except UsageError:  # it says the cause and the fix itself (a server not up, a name it does not serve)
            raise
        except Exception as exc:  # a bad model path or an engine that did not come up
            print(f"prm-annotate: error: cannot start the engine for {config.model}: {exc}", file=sys.stderr)
            raise typer.Exit(EXIT_USAGE) from None
        started = True
        return engine

    code = EXIT_USAGE
    try:
        with handled():
            # Before the engine starts (seconds, and its own errors would hide these): a missing or
            # bad input and an output that cannot be written are said at once.
            preflight(opts, input_model)
            stage, summary = executor.run(build, config, opts, start)
            if after is not None:
                after(stage, summary)
            code = summary.exit_code
    except typer.Exit as exc:
        code = exc.exit_code
    if not started:  # no engine in this process (not started, or on Ray actors): leave normally
        raise typer.Exit(code)
    exit_process(code)
