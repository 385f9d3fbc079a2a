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

`lockstep=True` is the behaviour before this scheduler, kept as the baseline the benchmarks
measure against: `window` records at a time, every round of every job of that batch in one
blocking `generate` call, the next batch when the whole batch is done.
"""
from __future__ import annotations

import itertools
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Container, Generator, Iterable, Iterator, TypeVar

from prm_annotate.engines.base import BatchEngine, Engine, GenerationRequest, GenerationResult, LockStep, check_keys
from prm_annotate.errors import InputError
from prm_annotate.pipeline.runner import Outcome

@dataclass(frozen=True)
class Round:
    """A round with speculation: the job waits for `requests`; `ahead` are the requests it may
    still ask for in a later round (all of them, every round). While the engine has room
    (`run_jobs(speculate=N)`: fewer requests in flight than a budget that starts at N and grows
    as guesses prove needed, see `_GUESS_PRIOR`) and no new unit can start (the
    input is used up, or the window is full) they are started now; one the job then asks for is
    handed over (at once if it has finished). One started earlier that a round no longer names,
    or that is still unused when the job ends, is not needed: it is cancelled at once, so the
    engine stops spending on it. `spare` are requests it may ask for, but less likely: they
    start only while fewer than N requests are in flight (the engine has idle capacity), after
    the `ahead` ones, whatever the guess budget has grown to."""

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
# The budget for guesses follows how many turn out needed: `speculate / wasted share`, so the
# guesses in flight that end up unneeded stay about `speculate` however many are started. Where
# a step's remaining completions are nearly always needed (a weak policy: most steps 0), the
# budget grows until every guess can start, as exhaustive starts every completion at once; where
# most guesses are cancelled (most steps 1) it stays near `speculate`. It starts as if this many
# guesses had been wasted, so a few lucky ones do not open it wide.
_GUESS_PRIOR = 32


@dataclass
class _Slot:
    job: Job
    size: int  # records in the unit
    number: int
    waiting: dict[str, GenerationRequest] = field(default_factory=dict)
    results: dict[str, GenerationResult] = field(default_factory=dict)
    outcomes: list[Outcome] | None = None
    ahead: dict[str, GenerationRequest] = field(default_factory=dict)  # started early, not asked for yet
    kept: dict[str, GenerationResult] = field(default_factory=dict)  # finished early, not asked for yet
    may_ask: list[GenerationRequest] = field(default_factory=list)  # the last round's `ahead`
    may_ask_spare: list[GenerationRequest] = field(default_factory=list)  # the last round's `spare`

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


def run_jobs(engine: Engine, units: Iterable[Unit], start: Callable[[Unit], Job], *, window: int,
             size: Callable[[Unit], int] = len, lockstep: bool = False, speculate: int = 0,
             max_requests: int = MAX_REQUESTS, stats: Counter | None = None) -> Iterator[list[Outcome]]:
    """Run `start(unit)` for every unit on `engine`; yield finished outcomes in input order, as
    soon as they are next in line. A new unit starts while fewer than `window` records and fewer
    than `max_requests` requests are in flight (a running job's next rounds are never held back).
    `speculate`: start a `Round`'s `ahead` requests while fewer than this many requests are in
    flight and no new unit can start (0: never); the budget grows as the guesses prove needed
    (see `_GUESS_PRIOR`), up to `max_requests`. `stats` receives the engine's busy and the run's
    wall time, the requests in flight over time (`requests_in_flight_ms`), the requests started
    ahead, used, cancelled while running and dropped when finished unused, and the largest
    budget reached (`ahead_budget_max`)."""
    if window < 1:
        raise ValueError("window must be at least 1")
    if lockstep:
        engine = LockStep(engine)
    clock = EngineClock(streams=not isinstance(engine, BatchEngine))
    pending = iter(units)
    exhausted = False
    queue: deque[_Slot] = deque()
    active = 0  # records whose jobs are running
    queued = 0  # records in the queue: running, or finished and waiting for an earlier one
    outstanding: dict[str, tuple[_Slot, GenerationRequest]] = {}
    numbers = itertools.count()
    bad_input: InputError | None = None

    def room_for_a_record() -> bool:
        return (not exhausted and active < window and queued < _WAITING * window
                and (lockstep or not queue or engine.in_flight() < max_requests))

    def admit() -> None:
        nonlocal exhausted, active, queued, bad_input
        if lockstep and queue:
            return
        while room_for_a_record():
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
            queued += slot.size
            active += slot.size
            advance(slot, None)

    counts: Counter = Counter()

    def advance(slot: _Slot, results: dict[str, GenerationResult] | None) -> None:
        nonlocal active
        while True:
            try:
                step = next(slot.job) if results is None else slot.job.send(results)
            except StopIteration as stop:
                slot.outcomes = list(stop.value)
                active -= slot.size
                slot.may_ask, slot.may_ask_spare = [], []
                drop_ahead(slot)
                return
            if submit(slot, step if isinstance(step, Round) else Round(step)):
                return
            results = slot.results  # nothing to wait for (an empty round, or all started ahead and done)

    def submit(slot: _Slot, step: Round) -> bool:
        """Start the round; False when it has nothing to wait for."""
        check_keys(step.requests)
        slot.waiting, slot.results = {}, {}
        send: list[GenerationRequest] = []
        for r in step.requests:
            if r.key in slot.kept:
                slot.results[r.key] = slot.kept.pop(r.key)
                counts["ahead_used"] += 1
            elif r.key in slot.ahead:  # started ahead, still running: now awaited
                slot.waiting[r.key] = slot.ahead.pop(r.key)
                counts["ahead_used"] += 1
            else:
                slot.waiting[r.key] = r
                send.append(r)
        drop_ahead(slot, keep={r.key for r in step.ahead} | {r.key for r in step.spare})
        slot.may_ask, slot.may_ask_spare = step.ahead, step.spare
        send_to_engine(slot, send)
        start_ahead(slot)
        return bool(slot.waiting)

    def guess_budget() -> int:
        if not speculate:
            return 0
        wasted = counts["ahead_cancelled"] + counts["ahead_dropped"] + _GUESS_PRIOR
        budget = min(max_requests, max(speculate, round(speculate * (wasted + counts["ahead_used"]) / wasted)))
        counts["ahead_budget_max"] = max(counts["ahead_budget_max"], budget)
        return budget

    def start_ahead(slot: _Slot) -> None:
        """Start what the job may ask for later while fewer requests than the guess budget are
        in flight (its spare guesses: fewer than `speculate`); not while a new record could start
        (its requests are all needed, a guess may not be)."""
        if not (slot.may_ask or slot.may_ask_spare) or room_for_a_record():
            return
        for guesses, budget in ((slot.may_ask, guess_budget()), (slot.may_ask_spare, speculate)):
            room = budget - engine.in_flight()
            send = []
            for r in guesses:
                if len(send) >= room:
                    break
                if r.key not in slot.waiting and r.key not in slot.results and r.key not in slot.ahead \
                        and r.key not in slot.kept:
                    slot.ahead[r.key] = r
                    send.append(r)
            counts["ahead_started"] += len(send)
            send_to_engine(slot, send)

    def send_to_engine(slot: _Slot, send: list[GenerationRequest]) -> None:
        if not send:
            return
        sent = [replace(r, key=slot.sent_key(r.key)) for r in send]
        for r, s in zip(send, sent):
            outstanding[s.key] = (slot, r)
        try:
            engine.submit(sent)
        except Exception as exc:  # the engine's own failure: these requests fail, their records are left for a rerun
            for s in sent:
                deliver(GenerationResult(key=s.key, error=f"engine failed: {type(exc).__name__}: {exc}"))
        clock.set(engine.in_flight())

    def drop_ahead(slot: _Slot, keep: Container[str] = frozenset()) -> None:
        """What the job started ahead and no longer may ask for (all of it when the job is done)
        is not needed: cancelled if still running, dropped if finished."""
        running = [k for k in slot.ahead if k not in keep]
        for key in running:
            outstanding.pop(slot.sent_key(key), None)
            del slot.ahead[key]
        if running:
            counts["ahead_cancelled"] += len(running)
            # Tokens generated before the stop: spent for nothing, like an unused finished one's.
            counts["ahead_unused_tokens"] += engine.cancel([slot.sent_key(k) for k in running]) or 0
        # Finished but never asked for: generated for nothing.
        for key in [k for k in slot.kept if k not in keep]:
            counts["ahead_dropped"] += 1
            counts["ahead_unused_tokens"] += slot.kept.pop(key).generated_tokens

    def deliver(result: GenerationResult) -> _Slot | None:
        """File a result with its job; the job's slot when that completes its round."""
        got = outstanding.pop(result.key, None)
        if got is None:  # already failed (an engine that raised, then answered after all), or cancelled
            return None
        slot, request = got
        result = replace(result, key=request.key)
        if result.ok and len(result.texts) != request.n:
            result = GenerationResult(key=request.key, error=f"the engine returned {len(result.texts)} of {request.n} texts")
        if request.key in slot.ahead:  # started ahead and not asked for yet: kept for when it is
            del slot.ahead[request.key]
            slot.kept[request.key] = result
            return None
        slot.results[request.key] = result
        del slot.waiting[request.key]
        return None if slot.waiting else slot

    try:
        admit()
        while queue:
            done: list[Outcome] = []
            while queue and queue[0].outcomes is not None:
                slot = queue.popleft()
                queued -= slot.size
                done.extend(slot.outcomes or [])
            if done:
                yield done
                admit()
                continue
            if not outstanding:  # the front job has nothing in flight, yet is not finished
                raise RuntimeError("scheduler stalled: a job neither finished nor asked for anything")
            # Room freed by finished requests (or left by the last admission, before the first
            # poll) goes to the jobs' guesses, front first.
            if speculate and guess_budget() > engine.in_flight() and not room_for_a_record():
                for slot in queue:
                    if slot.outcomes is None:
                        start_ahead(slot)
            clock.set(engine.in_flight(), polling=True)
            try:
                results = engine.poll()
            except Exception as exc:
                message = f"engine failed: {type(exc).__name__}: {exc}"
                results = [GenerationResult(key=k, error=message) for k in list(outstanding)]
            # While the results are graded, the engine is busy only with what it still runs.
            clock.set(engine.in_flight())
            if not results and not engine.in_flight():
                results = [GenerationResult(key=k, error="the engine returned no result") for k in list(outstanding)]
            # Every result of the poll is filed before any job moves on, so no job cancels a
            # request whose answer is already here.
            ready = [slot for slot in map(deliver, results) if slot is not None]
            for slot in ready:
                advance(slot, slot.results)
            admit()
        if bad_input is not None:
            raise bad_input
    finally:
        for slot in queue:
            slot.job.close()
        if stats is not None:
            clock.record(stats)
            stats.update(counts)


def one_unit_each(records: Iterable[Any]) -> Iterator[list[Any]]:
    """The default division of the input into units: every record alone."""
    for record in records:
        yield [record]
