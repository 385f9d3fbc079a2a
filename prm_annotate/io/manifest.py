"""The run manifest: `<output>.manifest.json`, one entry per run of a stage on that output."""
from __future__ import annotations

import os
from typing import Any

import orjson

from prm_annotate.io.jsonl import STDIO
from prm_annotate.io.output import set_aside, sidecar


def append_manifest(output: str, run: dict[str, Any]) -> None:
    """Each run of a stage on an output appends its record to `<output>.manifest.json`.

    A manifest that is not ours (torn, not JSON, JSON of another shape) is never overwritten: it is
    renamed aside with a note on stderr, and the run goes on (the records are what matters)."""
    if output == STDIO:
        return
    path = sidecar(output, "manifest.json")
    runs: list[Any] = []
    if path.exists():
        try:
            runs = orjson.loads(path.read_bytes())["runs"]
            if not isinstance(runs, list):
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            set_aside(path, "the run manifest is not one this program wrote (torn or another shape)")
            runs = []
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps({"runs": runs + [run]}, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)
