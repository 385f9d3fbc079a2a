"""JSON Lines in and out with orjson. `-` is standard input / output.

Readers yield `(where, obj)` pairs so every later error can name its file and line.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import orjson

from prm_annotate.errors import InputError

STDIO = "-"
OnError = Callable[[InputError, Any], None]


def is_stream(path: str | Path) -> bool:
    """Standard input, a pipe or a FIFO: read once, in order, without knowing the end."""
    if str(path) == STDIO:
        return True
    p = Path(path)
    return p.exists() and not p.is_file() and not p.is_dir()


def check_input(path: str | Path) -> None:
    """Before any work (and before an engine starts): the input exists and is not a directory."""
    if str(path) == STDIO or is_stream(path):
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(str(path), "line 0", "is a directory, not a file")
    if not p.exists():
        raise InputError(str(path), "line 0", "no such file")


def open_input(path: str | Path) -> BinaryIO:
    if str(path) == STDIO:
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise InputError(str(path), "line 0", "no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), "line 0", "is a directory, not a file") from None


def parse_line(raw: bytes, path: str, lineno: int) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)  # refuses bytes that are not UTF-8, anywhere in the line
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")  # which byte, said before any JSON error, as the reader always has
        except UnicodeDecodeError as bad:
            raise InputError(path, f"line {lineno}", f"not valid UTF-8 (byte {bad.start})") from None
        raise InputError(path, f"line {lineno}", f"invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InputError(path, f"line {lineno}", f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _blank(raw: bytes) -> bool:
    return raw.isspace() or not raw  # as `not raw.strip()`, without copying the line


def iter_jsonl(path: str | Path, on_error: OnError | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ("line N", object) for each non-blank line.

    A bad line raises InputError, or, with `on_error`, is handed to it and skipped.
    """
    name = str(path)
    with _closing(open_input(path)) as fh:
        for lineno, raw in enumerate(fh, start=1):
            if _blank(raw):
                continue
            try:
                yield f"line {lineno}", parse_line(raw, name, lineno)
            except InputError as exc:
                if on_error is None:
                    raise
                on_error(exc, raw.rstrip(b"\r\n"))  # bytes: the rejects file keeps them exactly


def iter_jsonl_at(path: str | Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """As `iter_jsonl` (a bad line raises), with each line's byte offset: `line_at` reads it again."""
    name = str(path)
    offset = 0
    with _closing(open_input(path)) as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not _blank(raw):
                yield f"line {lineno}", offset, parse_line(raw, name, lineno)
            offset += len(raw)


Stamp = tuple[int, int, int, int]


def file_stamp(fh: BinaryIO | int | str) -> Stamp:
    """What changes when a file is written, replaced or cut: device, inode, size, modification time."""
    st = os.stat(fh) if isinstance(fh, str) else os.fstat(fh if isinstance(fh, int) else fh.fileno())
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def line_at(fh: BinaryIO, path: str, offset: int, stamp: Stamp | None = None) -> dict[str, Any]:
    """The object of the line at `offset` of a file `iter_jsonl_at` read (named by its offset in an
    error: the file changed since). With the file's `stamp` from that read, a file written since is
    refused: the object is then the one that read validated."""
    try:
        if stamp is not None and file_stamp(fh) != stamp:
            raise InputError(path, f"byte {offset}", "written since it was validated")
        fh.seek(offset)
        return parse_line(fh.readline(), path, 0)
    except InputError as exc:
        raise InputError(path, f"byte {offset}", f"{exc.message} (the file changed while it was read)") from None


def iter_json_array(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A JSON array of objects (ProcessBench's format): yield ("record N", object), 0-based."""
    name = str(path)
    with _closing(open_input(path)) as fh:
        data = fh.read()
    try:
        items = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(name, "line 1", f"invalid JSON: {exc}") from None
    if not isinstance(items, list):
        raise InputError(name, "line 1", "expected a JSON array of objects")
    for index, obj in enumerate(items):
        if not isinstance(obj, dict):
            raise InputError(name, f"record {index}", f"expected a JSON object, got {type(obj).__name__}")
        yield f"record {index}", obj


def dumps(obj: Any) -> bytes:
    """One JSONL line, newline included."""
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


class _closing:
    """Close files we opened, but never standard input."""

    def __init__(self, fh: BinaryIO):
        self.fh = fh

    def __enter__(self) -> BinaryIO:
        return self.fh

    def __exit__(self, *exc: object) -> None:
        if self.fh is not sys.stdin.buffer:
            self.fh.close()
