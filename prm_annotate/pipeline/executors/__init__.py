"""Where a stage's batches run: in this process (`local`, the runner's default) or on a Ray
cluster (`ray`). The stage code is the same either way; an executor only decides where
`stage.process(batch)` is called. See docs/scaling.md.

A model stage is described to an executor as a *factory*, `build(engine) -> Stage`, plus the
`EngineConfig` to start that engine with, so a remote worker can build its own stage around its
own engine. The driver still needs a stage of its own (its name, input and output models, output
ids, settings and stats): it calls `build(None)`, so a factory's stage must build without an
engine (a model stage then takes its model's name from `engine_info`, as the CLI passes it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from prm_annotate.engines.base import Engine

# build(engine) -> Stage; engine is None for stages that use no model (grade) and for the driver's copy.
StageFactory = Callable[[Optional[Engine]], Any]

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class RayOptions:
    """`--executor ray` and its resources. Each actor holds one stage and one engine."""

    actors: int = 2
    cpus_per_actor: float = 1.0
    # None: one GPU per actor when the cluster has GPUs, else none. With --tensor-parallel-size T,
    # pass T: the actor's engine needs all T GPUs of its replica.
    gpus_per_actor: float | None = None
    # Optional overrides; by default RAY_ADDRESS decides (set: that cluster; unset: a local Ray).
    address: str | None = None
