"""`--executor local|ray` and the Ray resources, shared by every stage command.

A command takes them as one parameter (see option_groups; the model stages as part of
`model_stage.ModelStageOptions`) and makes the one executor object from them, which runs the stage:

    def grade(..., *, executor_opts: GraderExecutorOptions):
        stage, summary = executor_opts.make().run(build, None, opts, start=None)

(`pipeline.executors.make_executor` is the only place that chooses.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from prm_annotate.pipeline.executors import EXECUTOR, RayOptions, StageExecutor, make_executor
from prm_annotate.settings import borrow, declare



@dataclass(frozen=True)
class GraderExecutorOptions:
    """The executor options of a stage without a model (grade), as one command parameter
    (pipeline.executors' settings); the field order is the --help order."""

    executor: str = declare(EXECUTOR, "local")
    ray_actors: int = borrow(RayOptions, "actors")
    ray_cpus_per_actor: float = borrow(RayOptions, "cpus_per_actor")

    def make(self) -> StageExecutor:
        """The executor these options name; raises UsageError."""
        return make_executor(self.executor, actors=self.ray_actors, cpus_per_actor=self.ray_cpus_per_actor,
                             gpus_per_actor=self.gpus())

    def gpus(self) -> float | None:
        return 0.0  # no engines, so no GPUs per actor


@dataclass(frozen=True)
class ExecutorOptions(GraderExecutorOptions):
    """The executor options of a model stage: GPUs per actor too."""

    ray_gpus_per_actor: Optional[float] = borrow(RayOptions, "gpus_per_actor")

    def gpus(self) -> float | None:
        return self.ray_gpus_per_actor
