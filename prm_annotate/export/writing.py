"""Rows to a file as they are made: JSONL, or Parquet for a `.parquet` path, or JSONL on standard output.

Nothing is put in place until every row is made: a bad input line, a misplaced label or an empty
set raises while the rows are still in a temporary file beside the output (or, for standard
output, in a temporary file elsewhere), which is then removed, so an earlier output stays as it
was. Memory holds a chunk of rows (a Parquet row group, a datasets batch), never the set.
"""
from __future__ import annotations

import os
import pickle
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

from prm_annotate.errors import require
from prm_annotate.io.jsonl import STDIO, dumps

# Rows converted to Arrow at a time (a Parquet row group; the types inferred): CHUNK rows, or fewer
# when they would be more than GROUP_BYTES pickled (long traces: ~500 of 30 KB), so the chunk, not
# the set, is what memory holds.
CHUNK = 10_000
GROUP_BYTES = 16 << 20
INFER = 1_000

# What runs once every row is made and before anything is put in place (given the row count): it
# may refuse the set (raise) and returns what a format describes the set with (its Provenance).
Finish = Callable[[int], Any]


def _public(path: str) -> None:
    """mkstemp makes a file private; give it the ordinary permissions a new file gets."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def replace_file(output: str, write: Callable[[str], None]) -> None:
    """`write` a temporary file beside `output`, then rename it into place: a reader never sees
    half a dataset, and a failure leaves the old one."""
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        _public(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Spool:
    """Rows kept in a temporary file (pickled: read back exactly, NaN and all) while they are made,
    with the Arrow schema `pa.Table.from_pylist` would infer over all of them, built a chunk at a
    time, and their Arrow size; `rows()` reads them again in order."""

    def __init__(self, directory: str | Path | None = None, arrow: bool = True):
        fd, self.path = tempfile.mkstemp(prefix=".export-rows.", suffix=".tmp", dir=directory)
        self._fh: BinaryIO = os.fdopen(fd, "wb")
        self._arrow = arrow
        self._chunk: list[dict[str, Any]] = []
        self._held = 0  # pickled bytes of the chunk
        self.count = 0
        self.schema: Any = None
        self.nbytes = 0  # the Arrow buffers' size, as datasets estimates a table's (its shard count)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()
        Path(self.path).unlink(missing_ok=True)

    def add(self, row: dict[str, Any]) -> None:
        data = pickle.dumps(row, protocol=pickle.HIGHEST_PROTOCOL)
        self._fh.write(data)
        self.count += 1
        if self._arrow:
            self._chunk.append(row)
            self._held += len(data)
            if len(self._chunk) == INFER or self._held >= GROUP_BYTES:
                self._infer()

    def _infer(self) -> None:
        import pyarrow as pa

        if self._chunk:
            table = pa.Table.from_pylist(self._chunk)
            self.nbytes += table.nbytes
            # A column's type over every row: null in one chunk, a list of floats in another -> the floats'.
            self.schema = table.schema if self.schema is None else pa.unify_schemas(
                [self.schema, table.schema], promote_options="permissive")
            self._chunk, self._held = [], 0

    def close(self) -> None:
        """Every row is in: the file is complete and the schema final."""
        if self._arrow:
            self._infer()
        self._fh.close()

    def rows(self) -> Iterator[dict[str, Any]]:
        for row, _ in self._sized():
            yield row

    def _sized(self) -> Iterator[tuple[dict[str, Any], int]]:
        """Each row with its pickled size."""
        with open(self.path, "rb") as fh:
            at = 0
            for _ in range(self.count):
                row = pickle.load(fh)
                yield row, fh.tell() - at
                at = fh.tell()

    def tables(self, size: int, keep: Callable[[dict[str, Any]], bool] | None = None) -> Iterator[Any]:
        """The rows (those `keep` keeps) as Arrow tables in the final schema, of `size` rows or
        fewer where `size` rows would be more than `GROUP_BYTES` (long traces)."""
        import pyarrow as pa

        chunk: list[dict[str, Any]] = []
        held = 0
        for row, nbytes in self._sized():
            if keep is None or keep(row):
                chunk.append(row)
                held += nbytes
                if len(chunk) == size or held >= GROUP_BYTES:
                    yield pa.Table.from_pylist(chunk, schema=self.schema)
                    chunk, held = [], 0
        if chunk:
            yield pa.Table.from_pylist(chunk, schema=self.schema)


def _jsonl(rows: Iterable[dict[str, Any]], fh: BinaryIO) -> int:
    count = 0
    for r in rows:
        fh.write(dumps(r))
        count += 1
    return count


def write_rows(rows: Iterable[dict[str, Any]], output: str, finish: Finish = lambda n: None) -> None:
    """JSONL, or Parquet for a `.parquet` path (row groups of `CHUNK` rows), as the rows come;
    `finish(count)` runs before the output is put in place."""
    if output == STDIO:
        with tempfile.TemporaryFile() as spool:
            finish(_jsonl(rows, spool))
            spool.seek(0)
            shutil.copyfileobj(spool, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    if output.endswith(".parquet"):
        require("pyarrow", "Parquet output", "pip install pyarrow")
        with Spool(Path(output).parent if Path(output).parent.is_dir() else None) as spool:
            for row in rows:
                spool.add(row)
            spool.close()
            finish(spool.count)

            def parquet(tmp: str) -> None:
                import pyarrow.parquet as pq

                with pq.ParquetWriter(tmp, spool.schema) as writer:
                    for table in spool.tables(CHUNK):
                        writer.write_table(table)
            replace_file(output, parquet)
        return

    def jsonl(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            finish(_jsonl(rows, fh))
            fh.flush()
            os.fsync(fh.fileno())
    replace_file(output, jsonl)
