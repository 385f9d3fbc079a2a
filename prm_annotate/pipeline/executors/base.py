"""What every executor shares: the stage factory, the executor protocol, the local executor and
Ray's options (see __init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from prm_annotate.engines.base import Engine
from prm_annotate.pipeline.runner import RunOptions, RunSummary, Stage, run_and_close
from prm_annotate.settings import setting

if TYPE_CHECKING:
    from prm_annotate.engines import EngineConfig

PANEL = "Executor"  # the --help panel of the executor's options

# build(engine) -> Stage; engine is None for stages that use no model (grade) and for the driver's copy.
StageFactory = Callable[[Optional[Engine]], Any]
# start(config) -> Engine: how a local run starts its engine (the CLI's `make_engine`, or score's PRM).
EngineStarter = Callable[["EngineConfig"], Engine]


class StageExecutor(Protocol):
    name: str

    def run(self, build: StageFactory, config: "EngineConfig | None", opts: RunOptions,
            start: EngineStarter | None = None) -> tuple[Stage, RunSummary]:
        """Run the stage `build` makes over `opts` (`config` None: a stage without a model); the
        stage and the summary, already reported."""
        ...


@dataclass(frozen=True)
class LocalExecutor:
    """The stage runs here, around one engine started here by `start` and closed at the end."""

    name = "local"

    def run(self, build: StageFactory, config: "EngineConfig | None", opts: RunOptions,
            start: EngineStarter | None = None) -> tuple[Stage, RunSummary]:
        engine = None if config is None or start is None else start(config)
        try:
            stage = build(engine)
            return stage, run_and_close(stage, opts)
        finally:
            if engine is not None:
                engine.close()


@dataclass(frozen=True)
class RayOptions:
    """`--executor ray` and its resources. Each actor holds one stage and one engine."""

    actors: int = setting(2, flags="--ray-actors", min=1, panel=PANEL, help=(
        "Ray actors, each in its own process with its own engine (data-parallel replicas) or grader."))
    cpus_per_actor: float = setting(1.0, flags="--ray-cpus-per-actor", min=0.0, panel=PANEL,
                                    help="CPUs Ray reserves for each actor.")
    # With --tensor-parallel-size T, pass T: the actor's engine needs all T GPUs of its replica.
    gpus_per_actor: float | None = setting(None, flags="--ray-gpus-per-actor", min=0.0, panel=PANEL, help=(
        "GPUs per actor (default: 1 if the cluster has GPUs, else 0; use --tensor-parallel-size's value)."))
    # Optional overrides; by default RAY_ADDRESS decides (set: that cluster; unset: a local Ray).
    address: str | None = None
