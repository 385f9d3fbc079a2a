"""Keeps one engine busy across records: many records in flight, each advancing on its own.

A model stage describes the work for one *unit* of its input (a record, or the responses of one
problem that share completions) as a *job*: a generator that yields a round of requests,
receives that round's results (a dict by request key), yields its next round, and at the end
returns the unit's outcomes:

    def job(unit):
        results = yield [request, ...]      # first round
        results = yield [next_request, ...]  # a round built from what came back
        return [Outcome(...), ...]

The scheduler keeps up to `window` records' jobs in flight. As soon as the last request of a
job's round comes back, that job runs (it grades, decides its next round) and its next requests
join the engine while the other jobs' requests are still generating; a finished job's place is
taken by the next unit of the input. So the engine never waits for the slowest request of a
round, nor for grading (an engine that streams, such as vLLM's engine loop or the HTTP engine,
keeps generating the other jobs' requests meanwhile), and later rounds are not smaller batches.

Outcomes come out in input order (a unit finished early waits for the ones before it), so an
output file is the same whatever the timing; at most `4 * window` records wait that way, so
memory stays flat on any input size. Each job sees only its own requests, under its own keys:
the scheduler prefixes keys with the job's number on the way to the engine.

`lockstep=True` is the behaviour before this scheduler, kept as the baseline the benchmarks
measure against: `window` records at a time, every round of every job of that batch in one
blocking `generate` call, the next batch when the whole batch is done.
"""
from __future__ import annotations

import itertools
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generator, Iterable, Iterator, TypeVar

from prm_annotate.engines.base import BatchEngine, Engine, GenerationRequest, GenerationResult, LockStep, check_keys
from prm_annotate.errors import InputError
from prm_annotate.runner import Outcome

Job = Generator[list[GenerationRequest], dict[str, GenerationResult], list[Outcome]]
Unit = TypeVar("Unit")

# Finished units waiting for an earlier one, as a multiple of the window.
_WAITING = 4


@dataclass
class _Slot:
    job: Job
    size: int  # records in the unit
    number: int
    waiting: dict[str, GenerationRequest] = field(default_factory=dict)
    results: dict[str, GenerationResult] = field(default_factory=dict)
    outcomes: list[Outcome] | None = None


class EngineClock:
    """The engine's busy time: time with requests in flight (a batch-only engine: time inside
    its `generate` call), against the wall time of the run."""

    def __init__(self, streams: bool):
        self.streams = streams
        self.started = time.perf_counter()
        self.busy = 0.0
        self._since: float | None = None

    def set(self, busy: bool) -> None:
        now = time.perf_counter()
        if busy and self._since is None:
            self._since = now
        elif not busy and self._since is not None:
            self.busy += now - self._since
            self._since = None

    def record(self, stats: Counter) -> None:
        self.set(False)
        stats["engine_busy_ms"] += round(self.busy * 1000)
        stats["scheduler_ms"] += round((time.perf_counter() - self.started) * 1000)


def run_jobs(engine: Engine, units: Iterable[Unit], start: Callable[[Unit], Job], *, window: int,
             size: Callable[[Unit], int] = len, lockstep: bool = False,
             stats: Counter | None = None) -> Iterator[list[Outcome]]:
    """Run `start(unit)` for every unit on `engine`; yield finished outcomes in input order, as
    soon as they are next in line. `stats` receives the engine's busy and the run's wall time."""
    if window < 1:
        raise ValueError("window must be at least 1")
    if lockstep:
        engine = LockStep(engine)
    clock = EngineClock(streams=not isinstance(engine, BatchEngine))
    pending = iter(units)
    exhausted = False
    queue: deque[_Slot] = deque()
    active = 0  # records whose jobs are running
    outstanding: dict[str, tuple[_Slot, GenerationRequest]] = {}
    numbers = itertools.count()
    bad_input: InputError | None = None

    def admit() -> None:
        nonlocal exhausted, active, bad_input
        if lockstep and queue:
            return
        while not exhausted and active < window and sum(s.size for s in queue) < _WAITING * window:
            try:
                unit = next(pending)
            except StopIteration:
                exhausted = True
                return
            except InputError as exc:  # a bad line in a stream: finish the records before it, then say so
                exhausted, bad_input = True, exc
                return
            slot = _Slot(start(unit), size(unit), next(numbers))
            queue.append(slot)
            active += slot.size
            advance(slot, None)

    def advance(slot: _Slot, results: dict[str, GenerationResult] | None) -> None:
        nonlocal active
        while True:
            try:
                requests = next(slot.job) if results is None else slot.job.send(results)
            except StopIteration as stop:
                slot.outcomes = list(stop.value)
                active -= slot.size
                return
            if requests:
                submit(slot, requests)
                return
            results = {}  # an empty round: the job goes on at once

    def submit(slot: _Slot, requests: list[GenerationRequest]) -> None:
        check_keys(requests)
        slot.waiting = {r.key: r for r in requests}
        slot.results = {}
        sent = [replace(r, key=f"{slot.number}\x1f{r.key}") for r in requests]
        for r, s in zip(requests, sent):
            outstanding[s.key] = (slot, r)
        try:
            engine.submit(sent)
        except Exception as exc:  # the engine's own failure: these requests fail, their records are left for a rerun
            for s in sent:
                deliver(GenerationResult(key=s.key, error=f"engine failed: {type(exc).__name__}: {exc}"))
        clock.set(clock.streams and engine.in_flight() > 0)

    def deliver(result: GenerationResult) -> None:
        got = outstanding.pop(result.key, None)
        if got is None:  # already failed (an engine that raised, then answered after all)
            return
        slot, request = got
        result = replace(result, key=request.key)
        if result.ok and len(result.texts) != request.n:
            result = GenerationResult(key=request.key, error=f"the engine returned {len(result.texts)} of {request.n} texts")
        slot.results[request.key] = result
        del slot.waiting[request.key]
        if not slot.waiting:
            advance(slot, slot.results)

    try:
        admit()
        while queue:
            done: list[Outcome] = []
            while queue and queue[0].outcomes is not None:
                done.extend(queue.popleft().outcomes or [])
            if done:
                yield done
                admit()
                continue
            if not outstanding:  # the front job has nothing in flight, yet is not finished
                raise RuntimeError("scheduler stalled: a job neither finished nor asked for anything")
            clock.set(True)
            try:
                results = engine.poll()
            except Exception as exc:
                message = f"engine failed: {type(exc).__name__}: {exc}"
                results = [GenerationResult(key=k, error=message) for k in list(outstanding)]
            # While the results are graded, the engine is busy only with what it still runs.
            clock.set(clock.streams and engine.in_flight() > 0)
            if not results and not engine.in_flight():
                results = [GenerationResult(key=k, error="the engine returned no result") for k in list(outstanding)]
            for result in results:
                deliver(result)
            admit()
        if bad_input is not None:
            raise bad_input
    finally:
        for slot in queue:
            slot.job.close()
        if stats is not None:
            clock.record(stats)


def one_unit_each(records: Iterable[Any]) -> Iterator[list[Any]]:
    """The default division of the input into units: every record alone."""
    for record in records:
        yield [record]
