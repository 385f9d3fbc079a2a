"""Keeps one engine busy across records: many records in flight, each advancing on its own.

A model stage describes the work for one *unit* of its input (a record, or the responses of one
problem that share completions) as a *job*: a generator that yields a round of requests,
receives that round's results (a dict by request key), yields its next round, and at the end
returns the unit's outcomes:

    def job(unit):
        results = yield [request, ...]      # first round
        results = yield [next_request, ...]  # a round built from what came back
        return [Outcome(...), ...]

The scheduler keeps up to `window` records' jobs in flight (fewer while the engine already has
`max_requests` requests). As soon as the last request of a job's round comes back, that job runs
(it grades, decides its next round) and its next requests join the engine while the other jobs'
requests are still generating; a finished job's place is taken by the next unit of the input.
So the engine never waits for the slowest request of a round, nor for grading (an engine that
streams, such as vLLM's engine loop or the HTTP engine, keeps generating the other jobs'
requests meanwhile), and later rounds are not smaller batches.

Outcomes come out in input order (a unit finished early waits for the ones before it), so an
output file is the same whatever the timing; at most `4 * window` records wait that way, so
memory stays flat on any input size. Each job sees only its own requests, under its own keys:
the scheduler prefixes keys with the job's number on the way to the engine.

A round may also name requests the job may ask for later (`Round.ahead`, `Round.spare`): the
scheduler asks its `Speculation` (prm_annotate/pipeline/speculation.py) which of them to start,
and when.
"""
from __future__ import annotations

import itertools
import time
from collections import ChainMap, Counter, deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generator, Iterable, Iterator, TypeVar

from prm_annotate.engines.base import BatchEngine, Engine, GenerationRequest, GenerationResult, check_keys
from prm_annotate.errors import InputError, UsageError
from prm_annotate.pipeline.runner import Outcome
from prm_annotate.pipeline.speculation import Guesses, Speculation


@dataclass(frozen=True)
class Round:
    """A round with speculation: the job waits for `requests`; `ahead` are the requests it may
    still ask for in a later round (all of them, every round), `spare` ones it may ask for but
    less likely. Once no new unit can start, the scheduler starts some of them early
    (`run_jobs(speculate=N)`, see prm_annotate/pipeline/speculation.py), hands one over when the
    job asks for it and cancels one as soon as a round no longer names it."""

    requests: list[GenerationRequest]
    ahead: list[GenerationRequest] = field(default_factory=list)
    spare: list[GenerationRequest] = field(default_factory=list)


Job = Generator["list[GenerationRequest] | Round", dict[str, GenerationResult], list[Outcome]]
Unit = TypeVar("Unit")

# Finished units waiting for an earlier one, as a multiple of the window.
_WAITING = 4
# No new unit is admitted while this many requests are in flight: several times the batch any
# engine runs at once (vLLM's max_num_seqs: 256 on CPU, up to 1024 on large GPUs), so the engine
# stays full, yet the prompts waiting in its queue stay bounded when each record brings many
# requests (exhaustive: K per step).
MAX_REQUESTS = 4096


@dataclass
class _Slot:
    job: Job
    size: int  # records in the unit
    number: int
    waiting: dict[str, GenerationRequest] = field(default_factory=dict)
    results: dict[str, GenerationResult] = field(default_factory=dict)
    outcomes: list[Outcome] | None = None
    guesses: Guesses = field(default_factory=Guesses)

    def sent_key(self, key: str) -> str:
        return f"{self.number}\x1f{key}"


class EngineClock:
    """The engine's busy time: time with requests in flight (a batch-only engine: time inside
    its `generate` call), against the wall time of the run; and the requests in flight over
    time (a streaming engine), whose mean says how full the engine's batches were."""

    def __init__(self, streams: bool):
        self.streams = streams
        self.started = time.perf_counter()
        self.busy = 0.0
        self._since: float | None = None
        self.request_seconds = 0.0  # integral of requests in flight over time
        self._count, self._count_since = 0, self.started

    def set(self, in_flight: int, polling: bool = False) -> None:
        """`in_flight` requests from now on; busy while `polling` (a batch-only engine works only
        then) or, for a streaming engine, while any request is in flight."""
        now = time.perf_counter()
        busy = polling or (self.streams and in_flight > 0)
        if busy and self._since is None:
            self._since = now
        elif not busy and self._since is not None:
            self.busy += now - self._since
            self._since = None
        self.request_seconds += self._count * (now - self._count_since)
        self._count, self._count_since = in_flight, now

    def record(self, stats: Counter) -> None:
        self.set(0)
        stats["engine_busy_ms"] += round(self.busy * 1000)
        stats["scheduler_ms"] += round((time.perf_counter() - self.started) * 1000)
        stats["requests_in_flight_ms"] += round(self.request_seconds * 1000)


class Scheduler:
    """One run of jobs on one engine: the queue of units in input order, the records running and
    queued, and the requests outstanding on the engine (by the key the engine knows them by)."""

    def __init__(self, engine: Engine, start: Callable[[Unit], Job], *, window: int,
                 size: Callable[[Unit], int] = len, speculate: int = 0, max_requests: int = MAX_REQUESTS):
        if window < 1:
            raise ValueError("window must be at least 1")
        self.engine, self.start, self.size = engine, start, size
        self.window, self.max_requests = window, max_requests
        self.speculation = Speculation(engine, speculate, max_requests)
        self.clock = EngineClock(streams=not isinstance(engine, BatchEngine))
        self.queue: deque[_Slot] = deque()
        self.active = 0  # records whose jobs are running
        self.queued = 0  # records in the queue: running, or finished and waiting for an earlier one
        self.outstanding: dict[str, tuple[_Slot, GenerationRequest]] = {}
        self.numbers = itertools.count()
        self.pending: Iterator[Unit] = iter(())
        self.exhausted = False
        self.bad_input: InputError | None = None

    def run(self, units: Iterable[Unit]) -> Iterator[list[Outcome]]:
        """Outcomes in input order, as soon as they are next in line."""
        self.pending = iter(units)
        try:
            self.admit()
            while self.queue:
                done = self.finished_in_order()
                if done:
                    yield done
                else:
                    self.poll()
                self.admit()
            if self.bad_input is not None:
                raise self.bad_input
        finally:
            for slot in self.queue:
                slot.job.close()

    def record(self, stats: Counter) -> None:
        self.clock.record(stats)
        stats.update(self.speculation.counts)

    def room_for_a_record(self) -> bool:
        return (not self.exhausted and self.active < self.window and self.queued < _WAITING * self.window
                and (not self.queue or self.engine.in_flight() < self.max_requests))

    def admit(self) -> None:
        while self.room_for_a_record():
            try:
                unit = next(self.pending)
            except StopIteration:
                self.exhausted = True
                return
            except InputError as exc:  # a bad line in a stream: finish the records before it, then say so
                self.exhausted, self.bad_input = True, exc
                return
            slot = _Slot(self.start(unit), self.size(unit), next(self.numbers))
            self.queue.append(slot)
            self.queued += slot.size
            self.active += slot.size
            self.advance(slot, None)

    def finished_in_order(self) -> list[Outcome]:
        done: list[Outcome] = []
        while self.queue and self.queue[0].outcomes is not None:
            slot = self.queue.popleft()
            self.queued -= slot.size
            done.extend(slot.outcomes or [])
        return done

    def advance(self, slot: _Slot, results: dict[str, GenerationResult] | None) -> None:
        """Run the job until it waits for the engine or is done."""
        while True:
            try:
                step = next(slot.job) if results is None else slot.job.send(results)
            except StopIteration as stop:
                slot.outcomes = list(stop.value)
                self.active -= slot.size
                self.speculation.finish(slot.guesses, lambda keys: self.cancel(slot, keys))
                return
            if self.submit(slot, step if isinstance(step, Round) else Round(step)):
                return
            results = slot.results  # nothing to wait for (an empty round, or all started ahead and done)

    def submit(self, slot: _Slot, step: Round) -> bool:
        """Start the round; False when it has nothing to wait for."""
        check_keys(step.requests)
        slot.results, slot.waiting, send = self.speculation.hand_over(slot.guesses, step.requests)
        self.speculation.expect(slot.guesses, step.ahead, step.spare, lambda keys: self.cancel(slot, keys))
        self.send(slot, send)
        self.start_guesses(slot)
        return bool(slot.waiting)

    def start_guesses(self, slot: _Slot) -> None:
        if not self.room_for_a_record():
            self.speculation.start(slot.guesses, ChainMap(slot.waiting, slot.results),
                                   lambda requests: self.send(slot, requests))

    def send(self, slot: _Slot, requests: list[GenerationRequest]) -> None:
        if not requests:
            return
        sent = [replace(r, key=slot.sent_key(r.key)) for r in requests]
        for r, s in zip(requests, sent):
            self.outstanding[s.key] = (slot, r)
        try:
            self.engine.submit(sent)
        except UsageError:  # the engine's failure says its cause and fix (a server gone): the run stops there
            raise
        except Exception as exc:  # the engine's own failure: these requests fail, their records are left for a rerun
            for s in sent:
                self.deliver(GenerationResult(key=s.key, error=f"engine failed: {type(exc).__name__}: {exc}"))
        self.clock.set(self.engine.in_flight())

    def cancel(self, slot: _Slot, keys: list[str]) -> int:
        sent = [slot.sent_key(k) for k in keys]
        for key in sent:
            self.outstanding.pop(key, None)
        return self.engine.cancel(sent) or 0

    def deliver(self, result: GenerationResult) -> _Slot | None:
        """File a result with its job; the job's slot when that completes its round."""
        got = self.outstanding.pop(result.key, None)
        if got is None:  # already failed (an engine that raised, then answered after all), or cancelled
            return None
        slot, request = got
        result = replace(result, key=request.key)
        if result.ok and len(result.texts) != request.n:
            result = GenerationResult(key=request.key, error=f"the engine returned {len(result.texts)} of {request.n} texts")
        if self.speculation.finished_early(slot.guesses, request.key, result):
            return None
        slot.results[request.key] = result
        del slot.waiting[request.key]
        return None if slot.waiting else slot

    def poll(self) -> None:
        """Wait for the engine's next results and move on every job whose round they complete."""
        if not self.outstanding:  # the front job has nothing in flight, yet is not finished
            raise RuntimeError("scheduler stalled: a job neither finished nor asked for anything")
        # Room freed by finished requests (or left by the last admission, before the first poll)
        # goes to the jobs' guesses, front first.
        if self.speculation.has_room() and not self.room_for_a_record():
            for slot in self.queue:
                if slot.outcomes is None:
                    self.start_guesses(slot)
        self.clock.set(self.engine.in_flight(), polling=True)
        try:
            results = self.engine.poll()
        except UsageError:
            raise
        except Exception as exc:
            message = f"engine failed: {type(exc).__name__}: {exc}"
            results = [GenerationResult(key=k, error=message) for k in list(self.outstanding)]
        # While the results are graded, the engine is busy only with what it still runs.
        self.clock.set(self.engine.in_flight())
        if not results and not self.engine.in_flight():
            results = [GenerationResult(key=k, error="the engine returned no result") for k in list(self.outstanding)]
        # Every result of the poll is filed before any job moves on, so no job cancels a
        # request whose answer is already here.
        ready = [slot for slot in map(self.deliver, results) if slot is not None]
        for slot in ready:
            self.advance(slot, slot.results)


def run_jobs(engine: Engine, units: Iterable[Unit], start: Callable[[Unit], Job], *, window: int,
             size: Callable[[Unit], int] = len, speculate: int = 0,
             max_requests: int = MAX_REQUESTS, stats: Counter | None = None) -> Iterator[list[Outcome]]:
    """Run `start(unit)` for every unit on `engine`; yield finished outcomes in input order, as
    soon as they are next in line. A new unit starts while fewer than `window` records and fewer
    than `max_requests` requests are in flight (a running job's next rounds are never held back).
    `speculate`: start a `Round`'s `ahead` requests while fewer than this many requests are in
    flight and no new unit can start (0: never); the budget grows as the guesses prove needed
    (see prm_annotate/pipeline/speculation.py), up to `max_requests`. `stats` receives the
    engine's busy and the run's wall time, the requests in flight over time
    (`requests_in_flight_ms`) and the counts of the guesses (`ahead_*`)."""
    scheduler = Scheduler(engine, start, window=window, size=size, speculate=speculate, max_requests=max_requests)
    try:
        yield from scheduler.run(units)
    finally:
        if stats is not None:
            scheduler.record(stats)


def one_unit_each(records: Iterable[Any]) -> Iterator[list[Any]]:
    """The default division of the input into units: every record alone."""
    for record in records:
        yield [record]
