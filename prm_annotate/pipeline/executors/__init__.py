"""Where a stage's batches run: in this process (`local`, the runner's default) or on a Ray
cluster (`ray`). The stage code is the same either way; an executor only decides where
`stage.process(batch)` is called, and where the engine starts. See docs/scaling.md.

One object runs a stage: `make_executor(name, ...)` (the only place that chooses) gives a
`LocalExecutor` or a `RayExecutor` (each a `StageExecutor`), and `executor.run(build, config, opts,
start)` runs the stage with it.

A model stage is described to an executor as a *factory*, `build(engine) -> Stage`, plus the
`EngineConfig` to start that engine with, so a remote worker can build its own stage around its
own engine. The driver still needs a stage of its own (its name, input and output models, output
ids, settings and stats): it calls `build(None)`, so a factory's stage must build without an
engine (a model stage then takes its model's name from `engine_info`, as the CLI passes it).
"""
from __future__ import annotations

import importlib.util
from typing import Any

from prm_annotate.errors import UsageError
from prm_annotate.registry import Named, Registry
from prm_annotate.settings import Setting
from prm_annotate.pipeline.executors.base import (PANEL, EngineStarter, LocalExecutor, RayOptions, StageExecutor,
                                                  StageFactory)

__all__ = ["EXECUTOR", "EXECUTORS", "EngineStarter", "LocalExecutor", "RayOptions", "StageExecutor", "StageFactory",
           "make_executor"]


def _ray(**resources: Any) -> StageExecutor:
    if importlib.util.find_spec("ray") is None:
        raise UsageError("--executor ray needs the Python package 'ray', which is not installed: "
                         "pip install -e '.[ray]' in the repository")
    from prm_annotate.pipeline.executors.ray_executor import RayExecutor

    return RayExecutor(RayOptions(**resources))


EXECUTORS: Registry[Named] = Registry("--executor", "Where the stage runs", "docs/scaling.md", (
    Named("local", "here, in this process", lambda **resources: LocalExecutor()),
    Named("ray", "on a Ray cluster, batches spread over actors: RAY_ADDRESS, else a local Ray", _ray),
))


EXECUTOR = Setting(flags=("--executor",), panel=PANEL, help=EXECUTORS.help)


def make_executor(name: str = "local", **resources: Any) -> StageExecutor:
    """The executor called `name`, with Ray's resources (`RayOptions` fields; the local one takes
    none of them); UsageError (exit 2) for an unknown one or a missing Ray."""
    if name not in EXECUTORS:
        raise UsageError(f"--executor {name!r}: choose from {', '.join(EXECUTORS)}")
    return EXECUTORS[name](**resources)
