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
import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Iterator, Optional

import typer

from prm_annotate.errors import EnvironmentFailure, UsageError, printable
from prm_annotate.io.inputs import FieldMap, format_names
from prm_annotate.cli.declared import typer_option
from prm_annotate.pipeline.runner import QUIET, RunOptions
from prm_annotate.reports.labels import LABEL_FIELD, SPLIT_FIELD
from prm_annotate.steps import STEP_SEP
from prm_annotate.io.sharding import parse_shard

app = typer.Typer(
    name="prm-annotate",
    help="Step-level training data for Process Reward Models: sample, MC rollout, judge, consensus.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

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
FormatOpt = Annotated[str, typer.Option("--format", help=f"Input format: {' | '.join(format_names())}.")]
IdFieldOpt = Annotated[str, typer.Option("--id-field", help="Field holding the id (generic format).")]
ProblemFieldOpt = Annotated[str, typer.Option("--problem-field", help="Field holding the problem text.")]
AnswerFieldOpt = Annotated[str, typer.Option("--answer-field", help="Field holding the gold answer.")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", min=1, help="Process at most the first N input records.")]
BatchOpt = Annotated[int, typer.Option("--batch-size", min=1, help="Records at a time: in flight on a model stage's engine, else per batch (and per Ray actor call).")]
SkipInvalidOpt = Annotated[bool, typer.Option("--skip-invalid/--no-skip-invalid", metavar="", help="Set bad input lines aside in <output>.rejects.jsonl and go on.")]
QuietOpt = typer_option(QUIET, bool)
ShardOpt = Annotated[Optional[str], typer.Option("--shard", help="Process only shard I/N (0-based), by a stable hash of the id.")]
StepSepOpt = typer_option(STEP_SEP, str)
# Said the same on every command that prints a result: --json, and the gold file's label field.
JsonOpt = Annotated[bool, typer.Option("--json/--no-json", metavar="", help="Print the result as one JSON object instead of text.")]
LabelFieldOpt = typer_option(LABEL_FIELD, str)
SplitFieldOpt = typer_option(SPLIT_FIELD, Optional[str])
# One gold file (bon, compare); `evaluate --gold` takes many, its own declaration.
GoldFileOpt = Annotated[Optional[str], typer.Option("--gold", help=(
    "Gold file (a ProcessBench JSON array, or JSONL with --label-field): the true first errors by id."))]


def run_options(input: str, output: str, *, format: str = "auto", id_field: str = "id",
                problem_field: str = "problem", answer_field: str = "answer", limit: int | None = None,
                batch_size: int = 64, skip_invalid: bool = False, quiet: bool = False,
                shard: str | None = None) -> RunOptions:
    return RunOptions(input=input, output=output, format=format,
                      fields=FieldMap(id=id_field, problem=problem_field, answer=answer_field),
                      limit=limit, batch_size=batch_size, skip_invalid=skip_invalid, quiet=quiet,
                      shard=parse_shard(shard))


@dataclass(frozen=True)
class CommonRunOptions:
    """How a stage goes through its input, as one command parameter (see option_groups); a command
    gives its own --batch-size default with a default instance, e.g. CommonRunOptions(batch_size=8)."""

    limit: LimitOpt = None
    batch_size: BatchOpt = 64
    skip_invalid: SkipInvalidOpt = False
    quiet: QuietOpt = False
    shard: ShardOpt = None

    def run_options(self, input: str, output: str, **fields: str) -> RunOptions:
        """`run_options` with these options; `fields` are format, id_field, problem_field, answer_field."""
        return run_options(input, output, **fields, **dataclasses.asdict(self))


@app.callback()
def _root() -> None:
    """Step-level training data for Process Reward Models (arXiv 2501.07301): sample, MC rollout,
    judge, consensus; then evaluate and export."""
