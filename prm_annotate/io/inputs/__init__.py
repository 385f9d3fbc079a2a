"""Input formats: generic JSONL, GSM8K, MATH, ProcessBench, PRMBench, Hard2Verify and DeltaBench, read as they are published.

Each format (one module here) turns a source row into the generic shape (`id`, `problem`,
`answer` / `steps`) and keeps every other field. Ids that a format lacks are made from the
format, the file's stem and the 0-based row index: `gsm8k-test-7` is row 7 of GSM8K's test.jsonl.

Add a format: a module with its `FORMAT` (an `InputFormat`), one entry in `INPUT_FORMATS` below,
and its test; `--format` lists it and `--format auto` tries its `detect` in this order.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from prm_annotate.errors import InputError
from prm_annotate.io.inputs import generic, gsm8k, hard2verify, math, prmbench, processbench
from prm_annotate.io.inputs import deltabench
from prm_annotate.io.inputs.base import FieldMap, InputFormat
from prm_annotate.io.jsonl import STDIO, OnError, Stamp, iter_json_array, iter_jsonl, iter_jsonl_at, line_at
from prm_annotate.registry import Registry
from prm_annotate.settings import Setting

# Detection order: the first format whose rule claims the first row; generic when none does.
AUTO = "auto"
INPUT_FORMATS: Registry[InputFormat] = Registry("--format", "Input format", "docs/usage.md", (
    prmbench.FORMAT,
    hard2verify.FORMAT,
    deltabench.FORMAT,
    processbench.FORMAT,
    gsm8k.FORMAT,
    math.FORMAT,
    generic.FORMAT,
), listing="names", extra=(AUTO,), sort=True)


# `--format` of the commands that read an input file (the stages, merge).
INPUT_FORMAT = Setting(flags=("--format",), help=INPUT_FORMATS.help)


def format_names() -> list[str]:
    """What `--format` accepts, as its help lists them."""
    return INPUT_FORMATS.choices()


def detect(obj: dict[str, Any]) -> str:
    return next((f.name for f in INPUT_FORMATS.values() if f.detect is not None and f.detect(obj)), generic.FORMAT.name)


def is_json_array(path: str) -> bool:
    """The input is a JSON array (ProcessBench's files), not JSON Lines: its first character is `[`."""
    if path == STDIO:
        head = sys.stdin.buffer.peek(64)
    else:
        try:
            with open(path, "rb") as fh:
                head = fh.read(64)
        except OSError:
            return False  # open_input reports it properly
    return head.lstrip()[:1] == b"["


def read_records(path: str | Path, fmt: str = AUTO, fields: FieldMap = FieldMap(),
                 on_error: OnError | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (where, record in the generic shape). The format is detected from the first record.

    Unparseable lines raise InputError, or go to `on_error` and are skipped.
    """
    name = str(path)
    if fmt != AUTO and fmt not in INPUT_FORMATS:
        raise InputError(name, "line 0", f"unknown format {fmt!r}; choose from {', '.join(format_names())}")
    rows = iter_json_array(name) if is_json_array(name) else iter_jsonl(name, on_error)
    stem = "stdin" if name == STDIO else Path(name).stem
    chosen = None if fmt == AUTO else INPUT_FORMATS[fmt]
    for index, (where, obj) in enumerate(rows):
        if chosen is None:
            chosen = INPUT_FORMATS[detect(obj)]
        yield where, chosen.normalise(obj, stem, index, fields)


def read_records_at(path: str, fmt: str = AUTO, fields: FieldMap = FieldMap()
                    ) -> tuple[Iterator[tuple[str, int, dict[str, Any]]], "RecordAt"]:
    """As `read_records` for a JSONL file (a bad line raises), with each record's byte offset, and
    what reads a record again from its offset (`RecordAt`): an index keeps offsets, not records."""
    if fmt != AUTO and fmt not in INPUT_FORMATS:
        raise InputError(path, "line 0", f"unknown format {fmt!r}; choose from {', '.join(format_names())}")
    again = RecordAt(path, Path(path).stem, None if fmt == AUTO else fmt, fields)

    def rows() -> Iterator[tuple[str, int, dict[str, Any]]]:
        for index, (where, offset, obj) in enumerate(iter_jsonl_at(path)):
            if again.format is None:
                again.format = detect(obj)
            yield where, offset, INPUT_FORMATS[again.format].normalise(obj, again.stem, index, fields)

    return rows(), again


@dataclass
class RecordAt:
    """A record of a JSONL file read again from its byte offset, normalised as it was first read
    (`index`: its 0-based row, which a format without ids makes its id from)."""

    path: str
    stem: str
    format: str | None
    fields: FieldMap

    def read(self, fh: BinaryIO, offset: int, index: int, stamp: Stamp | None = None) -> dict[str, Any]:
        """`stamp`: the file's when it was first read (`io.jsonl.file_stamp`): a file written since is refused."""
        assert self.format is not None
        obj = line_at(fh, self.path, offset, stamp)
        return INPUT_FORMATS[self.format].normalise(obj, self.stem, index, self.fields)


__all__ = ["AUTO", "INPUT_FORMAT", "INPUT_FORMATS", "FieldMap", "InputFormat", "RecordAt", "detect", "format_names", "is_json_array", "read_records",
           "read_records_at"]
