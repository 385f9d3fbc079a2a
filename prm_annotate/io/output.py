"""Crash-safe, resumable JSONL output.

Records are appended whole and flushed in small batches. A process killed mid-write leaves at
most one torn last line; the next run cuts it off, reads the ids already written and skips them,
so no finished record is lost or written twice. An exclusive OS lock (flock) on the output file
itself keeps a second process from writing the same file; the kernel drops it when the holder
dies, so it never goes stale. A write that fails (disk full, I/O error) is cut back to the last
whole record before the error is raised, so the output stays resumable.
"""
from __future__ import annotations

import base64
import fcntl
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import orjson

from prm_annotate.errors import EnvironmentFailure, UsageError
from prm_annotate.io.jsonl import STDIO, dumps


class OutputLocked(UsageError):
    pass


def sidecar(path: str | Path, suffix: str) -> Path:
    """A file beside the output: `out.jsonl` -> `out.<suffix>`."""
    p = Path(path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(f"{stem}.{suffix}")


def same_file(a: str | Path, b: str | Path) -> bool:
    """Two names of one file: the same path after symlinks, or the same inode (hard links)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output(output: str | Path, inputs: Iterable[str | Path | None] = (), *, directory: bool = False) -> None:
    """Before any work: refuse an output that is an input (it would be read as finished work, or
    overwritten) or a directory (exit 2), and one that cannot be created or written (exit 3).
    `directory`: the output is a directory written whole beside its old self and swapped in (an
    `export --format hf` dataset), so an existing directory is allowed and its parent must be writable."""
    if str(output) == STDIO:
        return
    out = Path(output)
    for source in inputs:
        if source is not None and str(source) != STDIO and same_file(source, out):
            raise UsageError(f"{output}: the output is the input {source}; choose another -o")
    if out.is_dir() and not directory:
        raise UsageError(f"{output}: is a directory; -o takes a file name")
    if out.exists() and not out.is_dir():
        try:
            with open(out, "ab"):
                pass
        except OSError as exc:
            raise EnvironmentFailure(f"{output}: cannot write the output: {exc.strerror}") from None
        return
    folder = out.parent
    while not folder.exists():  # the writer makes missing folders; the first existing one decides
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{output}: {folder} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise EnvironmentFailure(f"{output}: cannot create the output in {folder}: {exc.strerror}") from None


def set_aside(path: Path, why: str) -> Path:
    """Rename an unreadable file out of the way (never delete history) and say so on stderr."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.unreadable-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.unreadable-{stamp}-{n}")
    os.replace(path, aside)
    print(f"{path}: {why}; kept it as {aside} and started a new one", file=sys.stderr)
    return aside


def _whole_lines_end(fh: BinaryIO, size: int) -> int:
    """The byte where the file's last whole line ends (0 when it has none), read from the end."""
    pos = size
    while pos > 0:
        start = max(0, pos - (1 << 16))
        fh.seek(start)
        at = fh.read(pos - start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        pos = start
    return 0


class ResumableWriter:
    def __init__(self, path: str | Path, *, flush_every: int = 32, flush_seconds: float = 2.0):
        self.path = str(path)
        self.flush_every, self.flush_seconds = flush_every, flush_seconds
        # The ids the output held when it was opened (a resume); not those written since, which the
        # caller knows: a set of every written id would grow with the output.
        self.done_ids: set[str] = set()
        self.torn_bytes = 0
        self._buffer: list[bytes] = []
        self._last_flush = self._last_sync = time.monotonic()
        self._unsynced = False
        self.written = 0
        self._broken = False
        self._fh: BinaryIO
        if self.path == STDIO:
            self._fh = sys.stdout.buffer
            return
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # Unbuffered: a failed write must not leave bytes in a buffer that a later flush or close
        # would write after the cut (a broken line in the middle of the file).
        self._fh = open(self.path, "a+b", buffering=0)
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
        """Cut a torn last line, then read the finished ids line by line (a resumed output of
        millions of records is never read whole)."""
        fd = self._fh.fileno()
        size = os.fstat(fd).st_size
        with open(self.path, "rb") as fh:
            end = _whole_lines_end(fh, size)
        if end < size:
            # A torn last line from a killed run: the record it held was never complete.
            self.torn_bytes = size - end
            os.ftruncate(fd, end)
            print(f"{self.path}: dropped a torn last line ({self.torn_bytes} bytes) left by an interrupted run",
                  file=sys.stderr)
        with open(self.path, "rb") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    self.done_ids.add(orjson.loads(line)["id"])
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    raise UsageError(f"{self.path}:{lineno}: the existing output has a line that is not a "
                                     "record with an id; refusing to append to it") from None
        self._fh.seek(0, os.SEEK_END)

    def write(self, record: dict[str, Any]) -> None:
        if self._broken:
            raise EnvironmentFailure(f"{self.path}: an earlier write failed; rerun to resume")
        self._buffer.append(dumps(record))
        self.written += 1
        if len(self._buffer) >= self.flush_every or time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()

    def flush(self, sync: bool = False) -> None:
        """Hand the buffered records to the OS (a process killed after it loses none of them), and
        to the disk (fsync) every `flush_seconds` or with `sync`: an fsync a batch would cost a fast
        stage more than its work, and only a machine that stops loses what the OS held."""
        if self.path == STDIO:
            if self._buffer:
                self._fh.write(b"".join(self._buffer))
                self._buffer.clear()
            self._fh.flush()
        elif self._buffer or (sync and self._unsynced):
            data = b"".join(self._buffer)
            self._buffer.clear()
            fd = self._fh.fileno()
            good = os.lseek(fd, 0, os.SEEK_END)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                self._unsynced = True
                if sync or time.monotonic() - self._last_sync >= self.flush_seconds:
                    os.fsync(fd)
                    self._last_sync, self._unsynced = time.monotonic(), False
            except OSError:
                # Disk full or an I/O error: cut back to the last whole record (truncating frees
                # space, so this works on a full disk) and stop writing; a rerun resumes from there.
                self._broken = True
                try:
                    os.ftruncate(fd, good)
                except OSError:
                    pass  # a torn last line is still dropped by the next run
                raise
        self._last_flush = time.monotonic()

    def close(self) -> None:
        try:
            if not self._broken:
                self.flush(sync=True)
        finally:
            if self.path != STDIO:
                self._fh.close()

    def __enter__(self) -> "ResumableWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RejectsWriter:
    """`--skip-invalid`: bad input lines set aside beside the output, with where and why.

    A rerun meets the same bad lines again; each is set aside once (the ones already in the file
    are not appended again). A line that is not UTF-8 is kept byte for byte, as `record_base64`.
    """

    def __init__(self, output: str | Path):
        self.path = sidecar(output, "rejects.jsonl") if str(output) != STDIO else Path("prm-annotate.rejects.jsonl")
        self.count = 0
        self._fh: BinaryIO | None = None
        self._kept: set[bytes] = set()

    def write(self, source: str, where: str, error: str, record: Any = None) -> None:
        if self._fh is None:
            self._fh = open(self.path, "a+b")
            self._fh.seek(0)
            self._kept = {line for line in self._fh.read().splitlines(keepends=True)}
        entry: dict[str, Any] = {"file": source, "where": where, "error": error, "record": record}
        if isinstance(record, bytes):
            try:
                entry["record"] = record.decode("utf-8")
            except UnicodeDecodeError:
                entry["record"] = None
                entry["record_base64"] = base64.b64encode(record).decode("ascii")
        line = dumps(entry)
        self.count += 1
        if line in self._kept:
            return
        self._fh.write(line)
        self._fh.flush()
        self._kept.add(line)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
