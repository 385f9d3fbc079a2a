"""The lock-step baseline the scheduler is measured against (benchmarks and tests only).

`window` records at a time, every round of every job of that batch in one blocking `generate`
call, the next batch when the whole batch is done: every record waits for the slowest request
of its batch's round, and the engine waits while the whole batch grades. It drives a model
stage's job protocol (`stage.units`, `stage.job`) itself, as the scheduler does, and records the
same engine-time stats (`engine_busy_ms`, `scheduler_ms`, `requests_in_flight_ms`) into the
stage's stats, so the two compare on one table. A `Round`'s `ahead` and `spare` requests are
never started: the baseline does not speculate.

    for outcomes in stream(stage, records, window): ...

`LockStep(engine)` is the same idea one level down: any engine as one that runs whole batches,
for a driver of the engine protocol (benchmarks/bench_engines.py).
"""
from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator, Sequence

from prm_annotate.engines.base import BatchEngine, Engine, GenerationRequest, GenerationResult, check_keys
from prm_annotate.errors import InputError
from prm_annotate.pipeline.runner import Outcome
from prm_annotate.pipeline.scheduler import EngineClock, Job, Round


class LockStep(BatchEngine):
    """Any engine driven in lock-step rounds: `poll` runs everything submitted in one `generate`."""

    def __init__(self, engine: Engine):
        super().__init__()
        self.engine = engine
        self.model = engine.model

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        return self.engine.generate(requests)

    def close(self) -> None:
        self.engine.close()


def stream(stage: Any, records: Iterable[Any], window: int) -> Iterator[list[Outcome]]:
    """`stage.stream(records, window)` in lock-step."""
    if stage.grader is not None:
        stage.grader.start(wait=False)
    return run_lockstep(stage.engine, stage.units(records), stage.job, window=window, stats=stage.stats)


class _Batch:
    """One batch of jobs, by number; each job's requests go to the engine under `number\\x1fkey`."""

    def __init__(self, engine: Engine, clock: EngineClock):
        self.engine, self.clock = engine, clock
        self.jobs: dict[int, Job] = {}
        self.outcomes: dict[int, list[Outcome]] = {}
        self.rounds: dict[int, list[GenerationRequest]] = {}

    def add(self, number: int, job: Job) -> bool:
        """Start the job; False when it is done at once."""
        self.jobs[number] = job
        self.advance(number, None)
        return number not in self.outcomes

    def advance(self, number: int, results: dict[str, GenerationResult] | None) -> None:
        """Run the job to its next non-empty round (kept in `rounds`), or to its end."""
        job = self.jobs[number]
        while True:
            try:
                step = next(job) if results is None else job.send(results)
            except StopIteration as stop:
                self.outcomes[number] = list(stop.value)
                return
            requests = step.requests if isinstance(step, Round) else step
            check_keys(requests)
            if requests:
                self.rounds[number] = requests
                self.clock.set(sum(map(len, self.rounds.values())))
                return
            results = {}

    def run(self) -> list[Outcome]:
        while self.rounds:
            rounds, self.rounds = self.rounds, {}
            sent = {f"{n}\x1f{r.key}": (n, r) for n, requests in rounds.items() for r in requests}
            results = self.generate([replace(r, key=key) for key, (_, r) in sent.items()])
            by_job: dict[int, dict[str, GenerationResult]] = {n: {} for n in rounds}
            for key, (n, request) in sent.items():
                by_job[n][request.key] = _checked(results.get(key), request)
            for n, got in by_job.items():
                self.advance(n, got)
        return [o for n in sorted(self.outcomes) for o in self.outcomes[n]]

    def generate(self, requests: list[GenerationRequest]) -> dict[str, GenerationResult]:
        self.clock.set(len(requests), polling=True)
        try:
            return self.engine.generate(requests)
        except Exception as exc:  # the engine's own failure: the round's requests fail
            message = f"engine failed: {type(exc).__name__}: {exc}"
            return {r.key: GenerationResult(key=r.key, error=message) for r in requests}
        finally:
            self.clock.set(0)

    def close(self) -> None:
        for number, job in self.jobs.items():
            if number not in self.outcomes:
                job.close()


def _checked(result: GenerationResult | None, request: GenerationRequest) -> GenerationResult:
    if result is None:
        return GenerationResult(key=request.key, error="the engine returned no result")
    result = replace(result, key=request.key)
    if result.ok and len(result.texts) != request.n:
        return GenerationResult(key=request.key, error=f"the engine returned {len(result.texts)} of {request.n} texts")
    return result


def run_lockstep(engine: Engine, units: Iterable[Any], start: Callable[[Any], Job], *, window: int,
                 size: Callable[[Any], int] = len, stats: Counter | None = None) -> Iterator[list[Outcome]]:
    """`run_jobs` in lock-step: a batch takes units while fewer than `window` of its records are
    running (a job done at once does not count) and fewer than 4 x `window` are in it, as the
    scheduler admits them; a bad line in the input ends the input after the records before it."""
    clock = EngineClock(streams=False)
    pending, numbers = iter(units), itertools.count()
    bad_input: InputError | None = None
    try:
        while bad_input is None:
            batch, running, held = _Batch(engine, clock), 0, 0
            try:
                while running < window and held < 4 * window:
                    unit = next(pending)
                    held += size(unit)
                    running += size(unit) if batch.add(next(numbers), start(unit)) else 0
            except StopIteration:
                pending = iter(())
            except InputError as exc:
                bad_input = exc
            try:
                outcomes = batch.run()
            finally:
                batch.close()
            if not batch.jobs:
                break
            yield outcomes
        if bad_input is not None:
            raise bad_input
    finally:
        if stats is not None:
            clock.record(stats)
