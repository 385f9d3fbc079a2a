"""Crash-safe, resumable JSONL output.

Records are appended whole and flushed in small batches. A process killed mid-write leaves at
most one torn last line; the next run cuts it off, reads the ids already written and skips them,
so no finished record is lost or written twice. An exclusive OS lock (flock) on the output file
itself keeps a second process from writing the same file; the kernel drops it when the holder
dies, so it never goes stale.
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from prm_annotate.errors import UsageError
from prm_annotate.jsonl import STDIO, dumps


class OutputLocked(UsageError):
    pass


def sidecar(path: str | Path, suffix: str) -> Path:
    """A file beside the output: `out.jsonl` -> `out.<suffix>`."""
    p = Path(path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(f"{stem}.{suffix}")


class ResumableWriter:
    def __init__(self, path: str | Path, *, flush_every: int = 32, flush_seconds: float = 2.0):
        self.path = str(path)
        self.flush_every, self.flush_seconds = flush_every, flush_seconds
        self.done_ids: set[str] = set()
        self.torn_bytes = 0
        self._buffer: list[bytes] = []
        self._last_flush = time.monotonic()
        self.written = 0
        self._fh: BinaryIO
        if self.path == STDIO:
            self._fh = sys.stdout.buffer
            return
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+b")
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.close()
            raise OutputLocked(
                f"{self.path}: another process is writing this output (it holds the file lock); "
                "wait for it to finish or choose another -o"
            ) from None
        self._recover()

    def _recover(self) -> None:
        self._fh.seek(0)
        data = self._fh.read()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            # A torn last line from a killed run: the record it held was never complete.
            self.torn_bytes = len(data) - end
            os.ftruncate(self._fh.fileno(), end)
            print(f"{self.path}: dropped a torn last line ({self.torn_bytes} bytes) left by an interrupted run",
                  file=sys.stderr)
        for lineno, line in enumerate(data[:end].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                self.done_ids.add(orjson.loads(line)["id"])
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise UsageError(f"{self.path}:{lineno}: the existing output has a line that is not a "
                                 "record with an id; refusing to append to it") from None
        self._fh.seek(0, os.SEEK_END)

    def write(self, record: dict[str, Any]) -> None:
        self._buffer.append(dumps(record))
        self.done_ids.add(record["id"])
        self.written += 1
        if len(self._buffer) >= self.flush_every or time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self._fh.write(b"".join(self._buffer))
            self._buffer.clear()
        self._fh.flush()
        if self.path != STDIO:
            os.fsync(self._fh.fileno())
        self._last_flush = time.monotonic()

    def close(self) -> None:
        self.flush()
        if self.path != STDIO:
            self._fh.close()

    def __enter__(self) -> "ResumableWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RejectsWriter:
    """`--skip-invalid`: bad input lines set aside beside the output, with where and why."""

    def __init__(self, output: str | Path):
        self.path = sidecar(output, "rejects.jsonl") if str(output) != STDIO else Path("prm-annotate.rejects.jsonl")
        self.count = 0
        self._fh: BinaryIO | None = None

    def write(self, source: str, where: str, error: str, record: Any = None) -> None:
        if self._fh is None:
            self._fh = open(self.path, "ab")
        self._fh.write(dumps({"file": source, "where": where, "error": error, "record": record}))
        self._fh.flush()
        self.count += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
