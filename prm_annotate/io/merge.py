"""Join the outputs of `--shard I/N` runs into one file, and check that nothing is lost or doubled.

Every id must appear exactly once across the shard outputs: a duplicate is an error naming the
id and both places (shards are a partition, so a duplicate means two runs overlapped — the wrong
`--shard` values or the same shard written to two files). With the original stage input, the
merge also says which input ids have no output yet (a shard still running, crashed, or with
failed records left for a rerun); the merged file is written anyway, so partial results are usable.

Which input id an output record belongs to: its own id when that is an input id (rollout, judge,
grade keep ids), else its `problem_id`, else the part of its id before the last `/` (sample writes
`<problem id>/<i>`). Sample writes n records per problem and a crashed run can leave a problem
with only some of them, so `expect_per_input=n` checks for exactly the ids `<problem id>/0..n-1`.

Memory: the input's ids, and per output record an 8-byte hash of its id and a 16-byte sort key (the
input position and shard, the byte offset; sorted with numpy, 8 bytes more while the file is
written); the records are read again from their offsets as the merged file is written, never held.
"""
from __future__ import annotations

import os
import sys
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.id_keys import IdHashes, id_hash
from prm_annotate.io.inputs import AUTO, FieldMap, read_records
from prm_annotate.io.jsonl import STDIO, _closing, check_input, is_stream, open_input
from prm_annotate.io.output import check_output


@dataclass
class MergeReport:
    files: int = 0
    records: int = 0
    inputs: int | None = None  # ids in the original input, when given
    missing: list[str] = field(default_factory=list)  # input ids without (all their) output
    incomplete: dict[str, int] = field(default_factory=dict)  # input id -> outputs found, with expect_per_input
    uneven: dict[int, int] = field(default_factory=dict)  # outputs per input -> how many inputs, when they differ
    per_file: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.missing else 0

    def line(self) -> str:
        text = f"merge: {self.records} records from {self.files} files"
        if self.inputs is not None:
            text += f"; {self.inputs - len(self.missing)} of {self.inputs} input ids complete"
            if self.missing:
                text += f", {len(self.missing)} missing"
        return text


def _owner(record: dict[str, Any], input_ids: dict[str, int] | None) -> str:
    rid = record["id"]
    if input_ids is not None and rid in input_ids:
        return rid
    problem_id = record.get("problem_id")
    if isinstance(problem_id, str) and problem_id:
        return problem_id
    return rid.rsplit("/", 1)[0] if "/" in rid else rid


def read_shard(path: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, byte offset, record) of one shard output, streaming; a torn last line is refused."""
    offset = 0
    with _closing(open_input(path)) as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                raise InputError(path, f"line {lineno}", "torn last line (the run writing it was interrupted); "
                                 "rerun that shard's command to repair and finish it, then merge")
            if raw.strip():
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise InputError(path, f"line {lineno}", f"invalid JSON: {exc}") from None
                if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not record["id"]:
                    raise InputError(path, f"line {lineno}", "not a record with a string id")
                yield lineno, offset, record
            offset += len(raw)


def read_input_ids(path: str, fmt: str = AUTO, fields: FieldMap = FieldMap()) -> dict[str, int]:
    """Ids of the original stage input, in order, read the way the stages read it."""
    ids: dict[str, int] = {}
    for where, record in read_records(path, fmt, fields):
        rid = record.get("id")
        if not isinstance(rid, str) or not rid:
            raise InputError(path, where, "record has no string id")
        if rid in ids:
            raise InputError(path, where, f"duplicate id {rid!r}")
        ids[rid] = len(ids)
    return ids


def merge(shards: list[str], output: str, *, input: str | None = None, input_format: str = AUTO,
          fields: FieldMap = FieldMap(), expect_per_input: int | None = None) -> MergeReport:
    """Merge `shards` into `output`. Raises UsageError (exit 2) on a duplicate id, a bad line, or
    output records that belong to no input id; otherwise writes `output` and returns the report
    (its `missing` lists input ids without complete output).

    Streaming: a first pass over the shards checks them and keeps, per record, its id and one sort
    key (its input id's position, its shard, its byte offset there); the output is then written by
    reading each record again at its offset, in the input's order (without --input: the shards'),
    into a file beside the output that replaces it whole."""
    if not shards:
        raise UsageError("merge needs at least one shard output")
    if expect_per_input is not None and input is None:
        raise UsageError("--expect-per-input needs --input")
    for path in [*shards, *([input] if input is not None else [])]:
        check_input(path)
    check_output(output, [*shards, input])
    input_ids = read_input_ids(input, input_format, fields) if input is not None else None

    for path in shards:
        if is_stream(path):
            raise UsageError(f"{path}: a shard must be a file (merge reads it twice: to check, then to write in order)")
    report = MergeReport(files=len(shards))
    # Ids, to check none is in two places: with --expect-per-input, which asks for ids by name, a
    # byte per expected id `<input id>/<i>` (any other id itself); else 8 bytes each (a hash),
    # checked once every shard is read.
    seen = Expected(input_ids or {}, expect_per_input or 0)
    hashes = IdHashes()
    found = array("I", bytes(4 * len(input_ids))) if input_ids is not None else array("I")  # by input position
    # Each kept record's sort key: its input position * shards + its shard, and its byte offset there.
    groups, offsets = array("q"), array("q")
    stray: tuple[str, str] | None = None
    strays = 0
    for index, path in enumerate(shards):
        count = 0
        for lineno, offset, record in read_shard(path):
            rid = record["id"]
            if expect_per_input is not None:
                if not seen.add(rid):
                    _duplicate(shards, {rid})
            else:
                hashes.add(rid)
            count += 1
            if input_ids is None:
                continue
            owner = _owner(record, input_ids)
            position = input_ids.get(owner)
            if position is None:
                strays += 1
                stray = stray or (f"{path}:{lineno}", rid)
                continue
            found[position] += 1
            groups.append(position * len(shards) + index)
            offsets.append(offset)
        report.per_file[path] = count
        report.records += count
    clashes = hashes.clashes()
    del hashes
    if clashes:
        _duplicate(shards, clashes)

    if input_ids is not None:
        if stray is not None:
            raise UsageError(f"{stray[0]}: record {stray[1]!r} belongs to no id of {input} "
                             f"({strays} such records); is --input the file these shards were made from?")
        _completeness(report, input_ids, seen, found, expect_per_input)
        input_ids = {}  # the ids are not needed to write: their memory goes before the sort's
        del seen, found
        # The input's order, as one unsharded run would write it (a shard's records in its order).
        import numpy as np

        order = array("q", np.lexsort((np.frombuffer(offsets, np.int64), np.frombuffer(groups, np.int64))).tobytes())

    _write(output, _in_order(shards, groups, offsets, order) if input is not None else _concatenated(shards))
    return report


class Expected:
    """The output ids seen, for --expect-per-input n: a byte for each id `<input id>/<i>` (i < n, as
    sample writes them), any other id itself (few: they belong to no expected place)."""

    def __init__(self, input_ids: dict[str, int], n: int) -> None:
        self.input_ids, self.n = input_ids, n
        self.slots = bytearray(len(input_ids) * n)
        self.others: set[str] = set()

    def _slot(self, rid: str) -> int | None:
        head, sep, tail = rid.rpartition("/")
        # str(i) of an i < n: ASCII digits, no leading zero ("x/03" is not "x/3")
        if not (sep and tail.isascii() and tail.isdigit() and (tail == "0" or tail[0] != "0")):
            return None
        position = self.input_ids.get(head)
        return None if position is None or int(tail) >= self.n else position * self.n + int(tail)

    def add(self, rid: str) -> bool:
        """False when `rid` was seen before."""
        slot = self._slot(rid)
        if slot is None:
            new = rid not in self.others
            self.others.add(rid)
            return new
        new = not self.slots[slot]
        self.slots[slot] = 1
        return new

    def found(self, position: int) -> int:
        """How many of input `position`'s expected ids were seen."""
        return sum(self.slots[position * self.n:(position + 1) * self.n])


def _completeness(report: MergeReport, input_ids: dict[str, int], seen: Expected, found: array,
                  expect_per_input: int | None) -> None:
    """The input ids without (all their) output, and uneven counts per input id."""
    report.inputs = len(input_ids)
    if expect_per_input is not None:
        for rid, position in input_ids.items():
            have = seen.found(position)
            if have < expect_per_input:
                report.missing.append(rid)
                if have:
                    report.incomplete[rid] = have
    else:
        report.missing = [rid for rid, position in input_ids.items() if not found[position]]
        counts = Counter(n for n in found if n)
        if len(counts) > 1:
            report.uneven = dict(sorted(counts.items()))


def _duplicate(shards: list[str], suspects: set) -> None:
    """Raise on the first id found twice among those whose hash (or id) is in `suspects` (two ids
    of one hash that differ are no duplicate), naming both places: read again, as it is rare."""
    places: dict[str, str] = {}
    for path in shards:
        for lineno, _, record in read_shard(path):
            rid = record["id"]
            if rid in suspects or id_hash(rid) in suspects:
                if rid in places:
                    raise UsageError(f"duplicate id {rid!r}: in {places[rid]} and {path}:{lineno} (do the shards "
                                     "overlap? each I/N must be run once, into its own file)")
                places[rid] = f"{path}:{lineno}"


def _in_order(shards: list[str], groups: array, offsets: array, order: array) -> Iterator[bytes]:
    handles = [open(path, "rb") for path in shards]
    try:
        for k in order:
            fh = handles[groups[k] % len(shards)]
            fh.seek(offsets[k])
            yield fh.readline()
    finally:
        for fh in handles:
            fh.close()


def _concatenated(shards: list[str]) -> Iterator[bytes]:
    for path in shards:
        with open(path, "rb") as fh:
            for raw in fh:
                if raw.strip():
                    yield raw


def _write(output: str, lines: Iterable[bytes]) -> None:
    if output == STDIO:
        for raw in lines:
            sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        return
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: a merge killed halfway must not leave a file that looks complete.
    tmp = path.with_name(f".{path.name}.merge-tmp")
    try:
        with open(tmp, "wb") as fh:
            for raw in lines:
                fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
