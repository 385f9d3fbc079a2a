"""`--executor local|ray` and the Ray resources, shared by every stage command.

A command takes them as one parameter (see option_groups; the model stages as part of
`model_stage.ModelStageOptions`) and makes the one executor object from them, which runs the stage:

    def grade(..., *, executor_opts: GraderExecutorOptions):
        stage, summary = executor_opts.make().run(build, None, opts, start=None)

(`pipeline.executors.make_executor` is the only place that chooses.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import typer

from prm_annotate.pipeline.executors import StageExecutor, make_executor

_P = "Executor"  # help panel

ExecutorOpt = Annotated[str, typer.Option(
    "--executor", rich_help_panel=_P,
    help="local: run here; ray: on a Ray cluster (RAY_ADDRESS, else a local Ray), batches spread over actors.")]
RayActorsOpt = Annotated[int, typer.Option(
    "--ray-actors", min=1, rich_help_panel=_P,
    help="Ray actors, each in its own process with its own engine (data-parallel replicas) or grader.")]
RayCpusOpt = Annotated[float, typer.Option(
    "--ray-cpus-per-actor", min=0.0, rich_help_panel=_P, help="CPUs Ray reserves for each actor.")]
RayGpusOpt = Annotated[Optional[float], typer.Option(
    "--ray-gpus-per-actor", min=0.0, rich_help_panel=_P,
    help="GPUs per actor (default: 1 if the cluster has GPUs, else 0; use --tensor-parallel-size's value).")]


@dataclass(frozen=True)
class ExecutorOptions:
    """The executor options as one command parameter; the field order is the --help order."""

    executor: ExecutorOpt = "local"
    ray_actors: RayActorsOpt = 2
    ray_cpus_per_actor: RayCpusOpt = 1.0
    ray_gpus_per_actor: RayGpusOpt = None

    def make(self) -> StageExecutor:
        """The executor these options name; raises UsageError."""
        return make_executor(self.executor, actors=self.ray_actors, cpus_per_actor=self.ray_cpus_per_actor,
                             gpus_per_actor=self.ray_gpus_per_actor)



@dataclass(frozen=True)
class GraderExecutorOptions:
    """The executor options of a stage without a model (grade): no engines, so no GPUs per actor."""

    executor: ExecutorOpt = "local"
    ray_actors: RayActorsOpt = 2
    ray_cpus_per_actor: RayCpusOpt = 1.0

    def make(self) -> StageExecutor:
        return make_executor(self.executor, actors=self.ray_actors, cpus_per_actor=self.ray_cpus_per_actor,
                             gpus_per_actor=0.0)
