"""`--executor local|ray` and the Ray resources, shared by every stage command.

A command takes them as one parameter (see option_groups; the model stages as part of
`model_stage.ModelStageOptions`) and turns that into `RayOptions` (None: local):

    def grade(..., *, executor_opts: GraderExecutorOptions):
        ray = executor_opts.ray()

and, when `ray` is set, runs the stage through `model_stage.run_model_stage(..., ray=ray)`
(model stages) or `prm_annotate.pipeline.executors.ray_executor.run_stage_on_ray(build, None, opts, ray)`
(stages without a model), and locally otherwise.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Annotated, Optional

import typer

from prm_annotate.errors import UsageError
from prm_annotate.pipeline.executors import EXECUTORS, RayOptions

_P = "Executor"  # help panel

ExecutorOpt = Annotated[str, typer.Option(
    "--executor", rich_help_panel=_P,
    help="local: run here; ray: on a Ray cluster (RAY_ADDRESS, else a local Ray), one engine per actor.")]
RayActorsOpt = Annotated[int, typer.Option(
    "--ray-actors", min=1, rich_help_panel=_P, help="Ray actors, each holding one engine (data-parallel replicas).")]
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

    def ray(self) -> RayOptions | None:
        """`ray_options` for these options: None for the local executor; raises UsageError."""
        return ray_options(self.executor, self.ray_actors, self.ray_cpus_per_actor, self.ray_gpus_per_actor)


GraderExecutorOpt = Annotated[str, typer.Option(
    "--executor", rich_help_panel=_P,
    help="local: run here; ray: on a Ray cluster (RAY_ADDRESS, else a local Ray), batches spread over actors.")]
GraderActorsOpt = Annotated[int, typer.Option(
    "--ray-actors", min=1, rich_help_panel=_P, help="Ray actors, each grading batches in its own process.")]


@dataclass(frozen=True)
class GraderExecutorOptions:
    """The executor options of a stage without a model (grade): no engines, so no GPUs per actor."""

    executor: GraderExecutorOpt = "local"
    ray_actors: GraderActorsOpt = 2
    ray_cpus_per_actor: RayCpusOpt = 1.0

    def ray(self) -> RayOptions | None:
        return ray_options(self.executor, self.ray_actors, self.ray_cpus_per_actor, 0.0)


def ray_options(executor: str, actors: int = 2, cpus_per_actor: float = 1.0,
                gpus_per_actor: float | None = None) -> RayOptions | None:
    """None for the local executor; raises UsageError (exit 2) for an unknown one or a missing Ray."""
    if executor not in EXECUTORS:
        raise UsageError(f"--executor {executor!r}: choose from {', '.join(EXECUTORS)}")
    if executor == "local":
        return None
    if importlib.util.find_spec("ray") is None:
        raise UsageError("--executor ray needs the Python package 'ray', which is not installed: pip install -e '.[ray]' in the repository")
    return RayOptions(actors=actors, cpus_per_actor=cpus_per_actor, gpus_per_actor=gpus_per_actor)

