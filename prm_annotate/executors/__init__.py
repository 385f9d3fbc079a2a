"""Where a stage's batches run: in this process (`local`, the runner's default) or on a Ray
cluster (`ray`). The stage code is the same either way; an executor only decides where
`stage.process(batch)` is called. See docs/scaling.md.

A model stage is described to an executor as a *factory*, `build(engine) -> Stage`, plus the
`EngineConfig` to start that engine with, so a remote worker can build its own stage around its
own engine. The driver still needs a stage of its own (its name, input model, output ids and
stats): it is built around `DriverEngine`, a stand-in that never starts a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult

# build(engine) -> Stage; engine is None for stages that use no model (grade).
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


class DriverEngine:
    """The driver-side stand-in for an engine that lives in remote workers.

    The driver's copy of a stage only answers questions about the stage (name, settings, ids);
    if it ever tried to generate, work meant for the workers would run here, so that is an error.
    """

    def __init__(self, model: str):
        self.model = model

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        raise RuntimeError("the driver's stage must not generate: its engine lives in the executor's workers")

    def close(self) -> None:
        pass
