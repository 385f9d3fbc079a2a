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
"""
from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.inputs import AUTO, FieldMap, read_records
from prm_annotate.io.jsonl import STDIO, check_input, open_input
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


@dataclass
class _Line:
    raw: bytes
    id: str
    owner: str  # the input id it belongs to
    source: str  # "file:line", for messages
    position: tuple[int, int]  # (file index, line number): the order without an input


def _owner(record: dict[str, Any], input_ids: dict[str, int] | None) -> str:
    rid = record["id"]
    if input_ids is not None and rid in input_ids:
        return rid
    problem_id = record.get("problem_id")
    if isinstance(problem_id, str) and problem_id:
        return problem_id
    return rid.rsplit("/", 1)[0] if "/" in rid else rid


def read_shard(path: str, index: int, input_ids: dict[str, int] | None) -> list[_Line]:
    """The records of one shard output as raw lines (written back byte for byte)."""
    lines: list[_Line] = []
    fh = open_input(path)
    try:
        data = fh.read()
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    if data and not data.endswith(b"\n"):
        last = data.count(b"\n") + 1
        raise InputError(path, f"line {last}", "torn last line (the run writing it was interrupted); "
                         "rerun that shard's command to repair and finish it, then merge")
    for lineno, raw in enumerate(data.splitlines(keepends=True), start=1):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InputError(path, f"line {lineno}", f"invalid JSON: {exc}") from None
        if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not record["id"]:
            raise InputError(path, f"line {lineno}", "not a record with a string id")
        lines.append(_Line(raw, record["id"], _owner(record, input_ids), f"{path}:{lineno}", (index, lineno)))
    return lines


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
    (its `missing` lists input ids without complete output)."""
    if not shards:
        raise UsageError("merge needs at least one shard output")
    if expect_per_input is not None and input is None:
        raise UsageError("--expect-per-input needs --input")
    for path in [*shards, *([input] if input is not None else [])]:
        check_input(path)
    check_output(output, [*shards, input])
    input_ids = read_input_ids(input, input_format, fields) if input is not None else None

    report = MergeReport(files=len(shards))
    seen: dict[str, str] = {}
    lines: list[_Line] = []
    for index, path in enumerate(shards):
        shard_lines = read_shard(path, index, input_ids)
        for line in shard_lines:
            if line.id in seen:
                raise UsageError(f"duplicate id {line.id!r}: in {seen[line.id]} and {line.source} "
                                 "(do the shards overlap? each I/N must be run once, into its own file)")
            seen[line.id] = line.source
        report.per_file[path] = len(shard_lines)
        lines.extend(shard_lines)
    report.records = len(lines)

    if input_ids is not None:
        stray = [ln for ln in lines if ln.owner not in input_ids]
        if stray:
            raise UsageError(f"{stray[0].source}: record {stray[0].id!r} belongs to no id of {input} "
                             f"({len(stray)} such records); is --input the file these shards were made from?")
        report.inputs = len(input_ids)
        found = Counter(ln.owner for ln in lines)
        if expect_per_input is not None:
            for rid in input_ids:
                have = sum(f"{rid}/{i}" in seen for i in range(expect_per_input))
                if have < expect_per_input:
                    report.missing.append(rid)
                    if have:
                        report.incomplete[rid] = have
        else:
            report.missing = [rid for rid in input_ids if rid not in found]
            counts = Counter(found.values())
            if len(counts) > 1:
                report.uneven = dict(sorted(counts.items()))
        # The input's order, as one unsharded run would write it.
        lines.sort(key=lambda ln: (input_ids[ln.owner], ln.position))

    _write(output, lines)
    return report


def _write(output: str, lines: list[_Line]) -> None:
    data = b"".join(ln.raw if ln.raw.endswith(b"\n") else ln.raw + b"\n" for ln in lines)
    if output == STDIO:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: a merge killed halfway must not leave a file that looks complete.
    tmp = path.with_name(f".{path.name}.merge-tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
