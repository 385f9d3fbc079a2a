"""The loop every stage shares: read and validate, skip finished work, process in batches, write
crash-safely, show progress (progress.py), summarise, and record a run manifest (manifest.py).

A stage says how to turn input records into output records of its `output_model`
(`Stage.process` for a batch, `Stage.stream` for a stream of records, at most `window` in flight);
where they run is a `Dispatch`'s business (`local_dispatch` here, or the Ray executor's), so the
same stage code runs locally or elsewhere. Outcomes are written as they come, in input order. A
stage with a second input (consensus) reads it itself, beside the runner's input. Commands, and
the world report, run a stage with `run_and_close`.
"""
from __future__ import annotations

import gc
import os
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Protocol

import orjson
from pydantic import ValidationError

from prm_annotate import __version__
from prm_annotate.errors import InputError, printable
from prm_annotate.io.id_keys import IdHashes, id_hash
from prm_annotate.io.inputs import AUTO, FieldMap, read_records
from prm_annotate.io.jsonl import STDIO, check_input, is_stream
from prm_annotate.io.manifest import append_manifest
from prm_annotate.io.output import RejectsWriter, ResumableWriter, check_output
from prm_annotate.pipeline.progress import Progress
from prm_annotate.pipeline.summary import FAILED, INVALID, NOTHING_MADE, OVER_CONTEXT, Account, Nouns, sentence
from prm_annotate.records import Record, describe_validation_error
from prm_annotate.settings import Setting, declare, setting
from prm_annotate.io.sharding import shard_of


# What kind of failure an `Outcome`'s error is. Transient: something on the way failed (a request,
# the engine, a server): the record is left for a rerun, which retries it. Permanent: the record
# itself cannot be done as asked (its prompt does not fit the model's context): a rerun would
# refuse it again, so it is never offered as a retry.
TRANSIENT, PERMANENT = "transient", "permanent"


@dataclass
class Outcome:
    """The result for one input record: its output records (usually one; `sample` makes n), or an
    error of a `kind` (TRANSIENT: left for a rerun; PERMANENT: refused, a rerun refuses it again).
    The records are the stage's `output_model`, validated when made. `reason` says in a few words
    why nothing was made (a failure, or a record the stage sets aside, as consensus does a
    disagreement), for the summary sentence (pipeline/summary.py)."""

    id: str
    records: list[Record] = field(default_factory=list)
    error: str | None = None
    reason: str | None = None
    kind: str = TRANSIENT

    @classmethod
    def one(cls, record: Record) -> "Outcome":
        return cls(record.id, [record])

    @classmethod
    def refused(cls, id: str, error: str, reason: str = OVER_CONTEXT) -> "Outcome":
        """A record refused for good, before any of its work was paid for."""
        return cls(id, error=error, reason=reason, kind=PERMANENT)


class Stage(Protocol):
    name: str
    input_model: type[Record]  # what it reads (validated by the runner)
    output_model: type[Record]  # what it writes (see docs/contract.md)
    stats: Counter  # token and call counts, summed into the summary and the manifest
    nouns: Nouns  # what the summary sentence calls its records

    def process(self, batch: list[Record]) -> Iterable[Outcome]: ...

    def stream(self, records: Iterator[Record], window: int) -> Iterator[list[Outcome]]: ...

    def settings(self) -> dict[str, Any]: ...

    def output_ids(self, record: Record) -> list[str]:
        """Ids a record turns into; it is finished when all are in the output."""
        ...

    def close(self) -> None:
        """Release what the stage holds (a grader's worker process, which an `os._exit` would orphan)."""
        ...

    def inputs(self) -> dict[str, str]:
        """Every input file by role, for a stage that reads more than its `input` (consensus)."""
        ...

    def check(self, record: Record) -> None:
        """Each record of an input file, in the pass that validates it whole before any work: raise
        to refuse the run (consensus checks its join here)."""
        ...

    def notes(self, summary: "RunSummary") -> list[str]:
        """Lines of the stage's own said before the summary sentence (what the judge's parse lost...)."""
        ...


class StageBase:
    """What most stages share: one output record per input, under the input's id, nothing to
    release, and records handed to `process` in batches of `window`. A stage derives from it and
    overrides what differs (sample writes n ids per input; model stages stream on the scheduler,
    `stages.common.ModelStage`)."""

    name: str
    input_model: type[Record]
    output_model: type[Record]
    stats: Counter
    nouns: Nouns = Nouns()

    def output_ids(self, record: Record) -> list[str]:
        return [record.id]

    def notes(self, summary: "RunSummary") -> list[str]:
        return []

    def close(self) -> None:
        pass

    def inputs(self) -> dict[str, str]:
        return {}

    def check(self, record: Record) -> None:
        pass

    def stream(self, records: Iterator[Record], window: int) -> Iterator[list[Outcome]]:
        """Outcomes of `records` in input order, in pieces as they are finished."""
        for batch in batches(records, window):
            yield list(self.process(batch))  # type: ignore[attr-defined]


# (stage, records, window) -> outcomes in pieces: where `run_stage` sends a stage's records to be
# processed, here or elsewhere (executors/ray_executor.py's actors), at most `window` (a batch) at
# a time. Not an executor (executors/: the object that runs a whole stage, engine included): an
# executor hands `run_stage` the dispatch of its kind.
Dispatch = Callable[["Stage", Iterator[Record], int], Iterator[list[Outcome]]]


def local_dispatch(stage: Stage, records: Iterator[Record], window: int) -> Iterator[list[Outcome]]:
    return stage.stream(records, window)


# `--quiet`, declared once for every command that shows progress (the stages, train).
QUIET = Setting(help="No progress output (the summary line stays).", flags=("--quiet/--no-quiet", "-q"))


@dataclass
class RunOptions:
    """How a stage goes through its input; cli/app.py's `CommonRunOptions` passes on the settings."""

    input: str
    output: str = STDIO
    format: str = AUTO
    fields: FieldMap = field(default_factory=FieldMap)
    limit: int | None = setting(None, flags="--limit", min=1, help="Process at most the first N input records.")
    batch_size: int = setting(64, flags="--batch-size", min=1, help=(
        "Records at a time: in flight on a model stage's engine, else per batch (and per Ray actor call)."))
    skip_invalid: bool = setting(False, flags="--skip-invalid/--no-skip-invalid", metavar="", help=(
        "Set bad input lines aside in <output>.rejects.jsonl and go on."))
    quiet: bool = declare(QUIET, False)
    # (index, count), 0-based index; the command line's text is read by io.sharding.parse_shard.
    shard: tuple[int, int] | None = setting(None, flags="--shard", help=(
        "Process only shard I/N (0-based), by a stable hash of the id."))


class DropRejects:
    """Rejects of a pass that only repeats one already done: the first pass set them aside."""

    def write(self, *args: Any) -> None:
        pass


def read_validated(path: str, model: type[Record], opts: RunOptions,
                   rejects: RejectsWriter | DropRejects | None, *, unique: bool = True) -> Iterator[Record]:
    """Validated records of `path`; with `unique`, duplicate ids are bad input. Stops at
    `opts.limit` records. A file read whole holds 8 bytes an id (a hash of it) and checks them once
    it is read (a duplicate named by its line and its first's, found by reading the file again); a
    stream, or a file whose bad lines are set aside, holds the ids themselves and meets a duplicate
    where it is."""
    stream = is_stream(path)
    inline = stream or rejects is not None
    seen: set[str] = set()
    places: dict[str, str] = {}
    hashes = IdHashes()

    count = 0
    for where, obj in read_records(path, opts.format, opts.fields, _on_error(path, rejects)):
        if opts.limit is not None and count >= opts.limit:
            break
        try:
            record = model.model_validate(obj)
            if unique and inline and record.id in seen:
                first = places[record.id] if stream else _first_place(path, model, opts, record.id)
                raise InputError(path, where, f"duplicate id {record.id!r} (first seen at {first})")
        except (ValidationError, InputError) as exc:
            error = exc if isinstance(exc, InputError) else InputError(path, where, describe_validation_error(exc))
            if rejects is None:
                raise error from None
            rejects.write(path, where, error.message, obj)
            continue
        if unique and inline:
            seen.add(record.id)
            if stream:
                places[record.id] = where
        elif unique:
            hashes.add(record.id)
        count += 1
        yield record
    if unique and not inline:
        _check_unique(path, opts, hashes)


def _check_unique(path: str, opts: RunOptions, hashes: IdHashes) -> None:
    """Raise on the first duplicate id of a file whose ids' `hashes` were kept (two ids of one hash
    that differ are no duplicate)."""
    clashes = hashes.clashes()
    if not clashes:
        return
    places: dict[str, str] = {}
    for count, (where, obj) in enumerate(read_records(path, opts.format, opts.fields)):
        if opts.limit is not None and count >= opts.limit:
            return
        rid = obj.get("id")
        if isinstance(rid, str) and id_hash(rid) in clashes:
            if rid in places:
                raise InputError(path, where, f"duplicate id {rid!r} (first seen at {places[rid]})")
            places[rid] = where


def _on_error(path: str, rejects: RejectsWriter | DropRejects | None) -> Callable[[InputError, Any], None] | None:
    if rejects is None:
        return None

    def reject(exc: InputError, raw: Any) -> None:
        rejects.write(path, exc.where, exc.message, raw)
    return reject


def _first_place(path: str, model: type[Record], opts: RunOptions, rid: str) -> str:
    """Where the first valid record of id `rid` is in the file `path` (a duplicate's message)."""
    for where, obj in read_records(path, opts.format, opts.fields, lambda *_: None):
        if obj.get("id") == rid:
            try:
                model.model_validate(obj)
            except ValidationError:
                continue
            return where
    return "an earlier line"


def batches(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    # On a stream, records before a bad line are still processed and kept; then the error rises.
    batch: list[Record] = []
    try:
        for record in records:
            batch.append(record)
            if len(batch) >= size:
                yield batch
                batch = []
    except InputError:
        if batch:
            yield batch
        raise
    if batch:
        yield batch


@dataclass
class RunSummary:
    stage: str
    read: int = 0
    skipped: int = 0
    done: int = 0  # input records finished in this run
    made: int = 0  # of them, those that made output records
    written: int = 0  # output records written in this run
    failed: int = 0
    set_aside: Counter = field(default_factory=Counter)  # failed, or finished with no output: by reason
    out_of_shard: int = 0
    failures: dict[str, str] = field(default_factory=dict)
    permanent: list[str] = field(default_factory=list)  # ids of the failures a rerun would not mend
    rejects: int = 0
    interrupted: str | None = None  # the signal that stopped the run
    seconds: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)
    nouns: Nouns = Nouns()
    bill: dict[str, Any] | None = None  # a model stage's (engines/bill.py), as the manifest writes it

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def account(self) -> Account:
        """The run's figures as its sentence says them: the invalid lines count as read and set aside."""
        set_aside = Counter(self.set_aside)
        set_aside[INVALID] += self.rejects
        return Account(stage=self.stage, read=self.read + self.rejects, made=self.made, set_aside=+set_aside,
                       already_done=self.skipped, other_shards=self.out_of_shard, written=self.written,
                       stats=self.stats, seconds=self.seconds, bill=self.bill)

    def line(self) -> str:
        """The run's last line, a sentence (pipeline/summary.py)."""
        return sentence(self.account(), self.nouns)


def preflight(opts: RunOptions, model: type[Record] | None) -> None:
    """What `run_stage` checks before any work, for a caller with something slow to start first (an
    engine): the input exists and, as a file, validates whole (with `model`); the output is writable."""
    check_input(opts.input)
    check_output(opts.output, [opts.input])
    if model is not None and not opts.skip_invalid and not is_stream(opts.input):
        for _ in read_validated(opts.input, model, opts, None):
            pass


def run_stage(stage: Stage, opts: RunOptions, dispatch: Dispatch = local_dispatch) -> RunSummary:
    """Run `stage` over `opts.input` into `opts.output`. Raises InputError on bad input (exit 2).

    A file is read twice, streaming: a first pass validates it whole before any work starts (a bad
    line changes nothing; the stage's `check` sees every record) and counts the work, holding ids
    only; the second reads the records again as the work takes them, a batch at a time. A stream
    is read once, validated as it is read."""
    with frozen_heap():
        return _run(stage, opts, dispatch)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """For a pass over a large file: what exists before it (modules, the stage, its engine, an index
    of a second input) holds no garbage worth looking for, so it is frozen out of the collector's
    full passes, which would walk it again and again while a million records stream by (a sixth of
    a fast stage's time)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run(stage: Stage, opts: RunOptions, dispatch: Dispatch) -> RunSummary:
    started = time.monotonic()
    summary = RunSummary(stage=stage.name, nouns=getattr(stage, "nouns", Nouns()))
    preflight(opts, None)  # the input is validated below, as it is read
    rejects = RejectsWriter(opts.output) if opts.skip_invalid else None
    total: int | None = None
    source: Iterable[Record]
    if is_stream(opts.input):
        source = read_validated(opts.input, stage.input_model, opts, rejects)
    else:
        total = _first_pass(stage, opts, rejects)
        # Checked whole above: only a file whose bad lines are set aside meets its duplicates again.
        source = read_validated(opts.input, stage.input_model, opts, DropRejects() if rejects is not None else None,
                                unique=rejects is not None)
    writer = ResumableWriter(opts.output)
    # Finished before this run (the writer does not add what this run writes): only those make a
    # record look done.
    done_before = writer.done_ids
    progress: Progress | None = None
    try:
        def todo() -> Iterator[Record]:
            for record in source:
                summary.read += 1
                if opts.shard and shard_of(record.id, opts.shard[1]) != opts.shard[0]:
                    summary.out_of_shard += 1
                elif all(i in done_before for i in stage.output_ids(record)):
                    summary.skipped += 1
                else:
                    yield record

        pending = todo()
        progress = Progress(stage.name, total, opts.quiet)
        for outcomes in dispatch(stage, pending, opts.batch_size):
            done = failed = 0
            for outcome in outcomes:
                if outcome.error is None:
                    for record in outcome.records:
                        if record.id not in done_before:  # a partly finished input after a crash
                            writer.write(record.plain())
                            summary.written += 1
                    done += 1
                    if outcome.records:
                        summary.made += 1
                    else:
                        summary.set_aside[outcome.reason or NOTHING_MADE] += 1
                else:
                    summary.failures[outcome.id] = outcome.error or "failed"
                    summary.set_aside[outcome.reason or FAILED] += 1
                    if outcome.kind == PERMANENT:
                        summary.permanent.append(outcome.id)
                    failed += 1
            writer.flush()
            summary.done += done
            summary.failed += failed
            progress.advance(done, failed)
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM/SIGHUP (cli.app.Stopped): records in flight are dropped
        summary.interrupted = str(exc) or "SIGINT"
        raise
    finally:
        if progress is not None:
            progress.close()
        writer.close()
        if rejects is not None:
            rejects.close()
            summary.rejects = rejects.count
        summary.seconds = time.monotonic() - started
        summary.stats = dict(stage.stats)
        billed = getattr(stage, "bill", None)  # model stages: what the run cost (engines/bill.py)
        summary.bill = billed().record() if billed is not None else None
        append_manifest(opts.output, manifest_run(stage, opts, summary))
    return summary


def manifest_run(stage: Stage, opts: RunOptions, summary: RunSummary) -> dict[str, Any]:
    return {
        "stage": stage.name,
        "version": __version__,
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
        "input": opts.input,
        **({"inputs": stage.inputs()} if stage.inputs() else {}),
        "settings": stage.settings(),
        "counts": {"read": summary.read, "done": summary.done, "written": summary.written, "skipped": summary.skipped,
                   "failed": summary.failed, "rejected": summary.rejects, "other_shards": summary.out_of_shard,
                   "made": summary.made, "set_aside": dict(summary.account().set_aside),
                   "failed_permanent": len(summary.permanent)},
        **({"interrupted": summary.interrupted} if summary.interrupted else {}),
        "failures": dict(list(summary.failures.items())[:100]),
        **({"permanent_failures": summary.permanent[:100]} if summary.permanent else {}),
        "stats": summary.stats,
        **({"bill": summary.bill} if summary.bill is not None else {}),
        "seconds": round(summary.seconds, 3),
    }


def run_and_close(stage: Stage, opts: RunOptions, dispatch: Dispatch = local_dispatch) -> RunSummary:
    """What every command does with the stage it built, and the world report too: run it, close it
    (also when a signal stops the run: the grader's worker), and say what it did: the stage's notes,
    the failures, and last the summary sentence."""
    try:
        summary = run_stage(stage, opts, dispatch)
    finally:
        stage.close()
    notes = getattr(stage, "notes", None)
    report(summary, notes(summary) if notes is not None else [])
    return summary


def report(summary: RunSummary, notes: Iterable[str] = ()) -> None:
    """The stage's `notes`, the failed records (up to 10), then the summary sentence: the last line."""
    err = sys.stderr
    for note in notes:
        print(note, file=err)
    if summary.failures:
        permanent = set(summary.permanent)
        shown = list(summary.failures.items())[:10]
        for rid, error in shown:
            said = "refused" if rid in permanent else "failed"
            print(f"  {said} {printable(rid)}: {printable(error)}", file=err)
        if len(summary.failures) > len(shown):
            print(f"  ... and {len(summary.failures) - len(shown)} more (see the manifest)", file=err)
        for line in failure_advice(summary.failed, len(permanent)):
            print(f"  {line}", file=err)
    print(summary.line(), file=err, flush=True)


def failure_advice(failed: int, permanent: int) -> list[str]:
    """What the summary says to do about failed records: the transient ones a rerun retries, the
    permanent ones it would refuse again (never offered as a retry)."""
    lines = []
    if permanent:
        lines.append(f"{permanent} refused for good: their input does not fit as asked (the reasons above and in the "
                     "manifest); a rerun refuses them again")
    if failed > permanent:
        them = "them" if not permanent else f"the other {failed - permanent}"
        lines.append(f"rerun the same command to retry {them}; finished records are kept")
    return lines


def finished_ids(output: str) -> set[str]:
    """Ids in an existing output, read without touching it (the writer cuts a torn line and locks
    the file later, once the input is known good): a line that is not a record is the writer's to refuse."""
    ids: set[str] = set()
    if output == STDIO or not os.path.isfile(output):
        return ids
    with open(output, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break  # a torn last line: never a finished record
            try:
                rid = orjson.loads(line).get("id")
            except (orjson.JSONDecodeError, AttributeError):
                continue
            if isinstance(rid, str):
                ids.add(rid)
    return ids


def _first_pass(stage: Stage, opts: RunOptions, rejects: RejectsWriter | None) -> int:
    """Validate the input file whole (bad lines raise, or go to `rejects`), show the stage each
    record (`check`: a join checked before anything is written) and count the records this run will
    send: in its shard and not finished before. Holds ids only."""
    done = finished_ids(opts.output)
    check = getattr(stage, "check", None)
    total = 0
    for record in read_validated(opts.input, stage.input_model, opts, rejects):
        if check is not None:
            check(record)
        if opts.shard and shard_of(record.id, opts.shard[1]) != opts.shard[0]:
            continue
        if not all(i in done for i in stage.output_ids(record)):
            total += 1
    return total
