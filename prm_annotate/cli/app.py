"""The Typer app and what every command shares: options, error handling, exit codes.

Commands are thin: they parse options, call the library, and map outcomes to exit statuses
(0 done, 1 some records failed: left for a rerun, or refused for good and said so, 2 bad usage or
input, 3 the environment failed: an output that cannot be written, a full disk; 130 interrupted by SIGINT (Ctrl-C), 143 by
SIGTERM, 129 by SIGHUP). An interrupted stage drops the batch in flight, keeps every record already
written, records the run in the manifest and ends its child processes; a rerun resumes.
"""
from __future__ import annotations

import dataclasses
import errno
import inspect
import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Iterator, Optional

import typer

from prm_annotate.errors import EnvironmentFailure, UsageError, printable
from prm_annotate.io.inputs import AUTO, INPUT_FORMAT, FieldMap
from prm_annotate.cli.declared import typer_option
from prm_annotate.pipeline.runner import QUIET, RunOptions
from prm_annotate.evaluation.labels import LABEL_FIELD, SPLIT_FIELD
from prm_annotate.settings import borrow, setting_of
from prm_annotate.steps import STEP_SEP
from prm_annotate.io.sharding import parse_shard

def as_paragraphs(text: str | None) -> str | None:
    """A docstring as the help shows it: paragraphs (split at blank lines) whose lines are joined, so
    the terminal wraps them at its width; a line of a list (`- `) or an indented line keeps its break."""
    if text is None:
        return None
    paragraphs = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        lines = paragraph.split("\n")
        joined = [lines[0]]
        for line in lines[1:]:
            if line.startswith(("- ", "* ", " ")):
                joined.append(line)
            else:
                joined[-1] += " " + line
        paragraphs.append("\n".join(joined))
    return "\n\n".join(paragraphs)


class App(typer.Typer):
    """The Typer app of prm-annotate and its sub-commands: a command's docstring is its help, as
    paragraphs (`as_paragraphs`)."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        register = super().command(*args, **kwargs)

        def decorator(f: Any) -> Any:
            registered = register(f)
            info = self.registered_commands[-1]
            info.help = as_paragraphs(info.help if info.help is not None else inspect.getdoc(f))
            return registered
        return decorator


app = App(
    name="prm-annotate",
    help="Step-level training data for Process Reward Models: sample, MC rollout, judge, consensus.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# The --help panels of the commands, in the order --help shows them (a command names its own:
# `@app.command(rich_help_panel=PANEL_LABEL)`).
PANEL_LABEL, PANEL_TRAIN, PANEL_EVALUATE, PANEL_INSPECT, PANEL_TOOLS = PANELS = (
    "Label", "Train and score", "Evaluate", "Inspect", "Tools")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where SIGINT raises KeyboardInterrupt, so a stage stops the same
    way whoever stops it (SLURM, `timeout`, systemd and container runtimes send SIGTERM)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def fail(message: str, code: int = EXIT_USAGE) -> "typer.Exit":
    print(f"prm-annotate: error: {printable(message)}", file=sys.stderr, flush=True)
    return typer.Exit(code)


def _describe_os_error(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        reason += " (finished records are kept; free space and rerun to resume)"
    return f"{where}{reason}"


@contextmanager
def handled() -> Iterator[None]:
    """Bad input -> exit 2 with file:line; an environment failure (OSError) -> one line, exit 3;
    SIGINT -> 130, SIGTERM -> 143, SIGHUP -> 129."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            previous[signum] = signal.signal(signum, _stop)
    try:
        yield
    except UsageError as exc:
        raise fail(str(exc)) from None
    except EnvironmentFailure as exc:
        raise fail(str(exc), EXIT_ENVIRONMENT) from None
    except OSError as exc:
        raise fail(_describe_os_error(exc), EXIT_ENVIRONMENT) from None
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        print(f"prm-annotate: interrupted by {signal.Signals(signum).name}; finished records are kept, "
              "rerun to resume", file=sys.stderr)
        raise typer.Exit(128 + signum) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# Options shared by the single-input stages.
InputArg = Annotated[str, typer.Argument(help="Input file, or - for standard input.")]
OutputOpt = Annotated[str, typer.Option("-o", "--output", help="Output JSONL, or - for standard output.")]
FormatOpt = typer_option(INPUT_FORMAT, str)
IdFieldOpt = typer_option(setting_of(FieldMap, "id"), str)
ProblemFieldOpt = typer_option(setting_of(FieldMap, "problem"), str)
AnswerFieldOpt = typer_option(setting_of(FieldMap, "answer"), str)
QuietOpt = typer_option(QUIET, bool)
LimitOpt = typer_option(setting_of(RunOptions, "limit"), Optional[int])
SkipInvalidOpt = typer_option(setting_of(RunOptions, "skip_invalid"), bool)
StepSepOpt = typer_option(STEP_SEP, str)
# Said the same on every command that prints a result: --json, and the gold file's label field.
JsonOpt = Annotated[bool, typer.Option("--json/--no-json", metavar="", help="Print the result as one JSON object instead of text.")]
LabelFieldOpt = typer_option(LABEL_FIELD, str)
SplitFieldOpt = typer_option(SPLIT_FIELD, Optional[str])
# One gold file (bon, compare); `evaluate --gold` takes many, its own declaration.
GoldFileOpt = Annotated[Optional[str], typer.Option("--gold", help=(
    "Gold file (a ProcessBench JSON array, or JSONL with --label-field): the true first errors by id."))]


def run_options(input: str, output: str, *, format: str = AUTO, id_field: str = FieldMap.id,
                problem_field: str = FieldMap.problem, answer_field: str = FieldMap.answer, shard: str | None = None,
                **run: Any) -> RunOptions:
    """`RunOptions` from the command line's values: `run` are CommonRunOptions' fields but the shard,
    given as text."""
    return RunOptions(input=input, output=output, format=format,
                      fields=FieldMap(id=id_field, problem=problem_field, answer=answer_field),
                      shard=parse_shard(shard), **run)


@dataclass(frozen=True)
class CommonRunOptions:
    """How a stage goes through its input, as one command parameter (see option_groups): RunOptions'
    settings; a command gives its own --batch-size default with a default instance, e.g.
    CommonRunOptions(batch_size=8)."""

    limit: Optional[int] = borrow(RunOptions, "limit")
    batch_size: int = borrow(RunOptions, "batch_size")
    skip_invalid: bool = borrow(RunOptions, "skip_invalid")
    quiet: bool = borrow(RunOptions, "quiet")
    shard: Optional[str] = borrow(RunOptions, "shard")

    def run_options(self, input: str, output: str, **fields: str) -> RunOptions:
        """`run_options` with these options; `fields` are format, id_field, problem_field, answer_field."""
        return run_options(input, output, **fields, **dataclasses.asdict(self))


@app.callback()
def _root() -> None:
    """Step-level training data for Process Reward Models (arXiv 2501.07301): sample, MC rollout,
    judge, consensus; then evaluate and export."""
