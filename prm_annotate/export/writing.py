"""Rows to a file: JSONL, or Parquet for a `.parquet` path, or JSONL on standard output."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from prm_annotate.errors import require
from prm_annotate.io.jsonl import STDIO, dumps


def write_rows(rows: list[dict[str, Any]], output: str) -> None:
    """JSONL, or Parquet for a `.parquet` path; written to a temporary file, then renamed into place,
    so a reader never sees half a dataset."""
    parquet = output.endswith(".parquet")
    if output == STDIO:
        import sys

        sys.stdout.buffer.write(b"".join(dumps(r) for r in rows))
        sys.stdout.buffer.flush()
        return
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if parquet:
            require("pyarrow", "Parquet output", "pip install pyarrow")
            import pyarrow as pa
            import pyarrow.parquet as pq

            os.close(fd)
            pq.write_table(pa.Table.from_pylist(rows), tmp)
        else:
            with os.fdopen(fd, "wb") as fh:
                for r in rows:
                    fh.write(dumps(r))
                fh.flush()
                os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; give it ordinary permissions
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
