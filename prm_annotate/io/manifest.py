"""The run manifest: `<output>.manifest.json`, one entry per run of a stage on that output."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from prm_annotate.errors import UsageError
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


def own_runs(path: str) -> list[dict[str, Any]]:
    """The runs recorded in `path`'s own manifest (none without one); UsageError for a manifest
    that is not one."""
    manifest = sidecar(path, "manifest.json")
    if path == STDIO or not manifest.is_file():
        return []
    try:
        runs = orjson.loads(manifest.read_bytes()).get("runs", [])
    except (orjson.JSONDecodeError, AttributeError):
        raise UsageError(f"{manifest}: not a run manifest (JSON with a `runs` list)") from None
    return [run for run in runs if isinstance(run, dict)]


def source_runs(path: str) -> list[tuple[str, dict[str, Any] | None]]:
    """(file, run) for every run recorded in the manifests reachable from `path`; (file, None)
    for a file without a manifest."""
    out: list[tuple[str, dict[str, Any] | None]] = []
    seen: set[str] = set()
    todo = [path]
    while todo:
        file = todo.pop(0)
        if file in seen or file == "-":
            continue
        seen.add(file)
        if not sidecar(file, "manifest.json").is_file():
            out.append((file, None))
            continue
        for run in own_runs(file):
            out.append((file, run))
            inputs = run.get("inputs") or {}
            named = [run["input"]] if isinstance(run.get("input"), str) else []
            for other in named + [v for v in inputs.values() if isinstance(v, str)]:
                # Paths are as the run was given them: try them as they are, then beside this file.
                beside = str(Path(file).parent / other)
                todo.append(other if Path(other).exists() or not Path(beside).exists() else beside)
    return out
