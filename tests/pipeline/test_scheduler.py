"""The scheduler's own rules, on a streaming stand-in engine whose requests finish in an order the
test chooses (pure logic; the real engine's runs are in test_scheduler_engine.py)."""
from __future__ import annotations

from collections import Counter

import pytest

from prm_annotate.engines.base import GenerationRequest, GenerationResult, Sampling
from prm_annotate.errors import InputError
from prm_annotate.pipeline.runner import Outcome
from prm_annotate.pipeline.scheduler import run_jobs
from testing.lockstep import run_lockstep


class Streaming:
    """Finishes in flight requests one `poll` at a time, the one with the fewest `max_tokens`
    first (ties: oldest first); records what was in flight when each request was submitted."""

    model = "streaming-stand-in"

    def __init__(self, fail_poll_at: int | None = None):
        self.running: list[GenerationRequest] = []
        self.log: list[tuple[str, str]] = []  # ("submit"|"done", key)
        self.peak = 0
        self.polls = 0
        self.fail_poll_at = fail_poll_at

    def submit(self, requests):
        keys = {r.key for r in self.running}
        for r in requests:
            assert r.key not in keys, f"duplicate key in flight: {r.key}"
            self.running.append(r)
            self.log.append(("submit", r.key))
        self.peak = max(self.peak, len(self.running))

    def poll(self):
        self.polls += 1
        if self.fail_poll_at is not None and self.polls == self.fail_poll_at:
            raise RuntimeError("engine died")
        if not self.running:
            return []
        first = min(self.running, key=lambda r: r.sampling.max_tokens)
        self.running.remove(first)
        self.log.append(("done", first.key))
        return [GenerationResult(key=first.key, texts=[first.messages[0]["content"]] * first.n, generated_tokens=1)]

    def in_flight(self):
        return len(self.running)

    def close(self):
        pass


def request(key: str, text: str, duration: int) -> GenerationRequest:
    return GenerationRequest(key=key, messages=({"role": "user", "content": text},), sampling=Sampling(max_tokens=duration))


def rounds_job(rounds: list[int]):
    """A job for record `name` that runs one request per round, each taking the given duration."""

    def start(unit):
        (name,) = unit
        texts = []
        for i, duration in enumerate(rounds[name] if isinstance(rounds, dict) else rounds):
            results = yield [request(f"r{i}", f"{name}:{i}", duration)]
            result = results[f"r{i}"]
            if not result.ok:
                return [Outcome(name, error=result.error)]
            texts.append(result.texts[0])
        return [Outcome(name, [{"id": name, "texts": texts}])]

    return start


def run(engine, names, start, window, lockstep=False, **kw):
    drive = run_lockstep if lockstep else run_jobs
    return [o for outs in drive(engine, ([n] for n in names), start, window=window, **kw) for o in outs]


class Batch:
    """Whole batches only (what the lock-step baseline asks for); records every batch's keys."""

    model = "batch"

    def __init__(self):
        self.batches: list[list[str]] = []

    def generate(self, requests):
        self.batches.append([r.key for r in requests])
        return {r.key: GenerationResult(key=r.key, texts=[r.messages[0]["content"]] * r.n) for r in requests}

    def close(self):
        pass


def test_outcomes_come_in_input_order_whatever_finishes_first():
    # "a" is slow (long rounds), "b".."d" fast: they finish first but are written after "a".
    durations = {"a": [50, 50, 50], "b": [1], "c": [2, 2], "d": [1]}
    engine = Streaming()
    out = run(engine, list("abcd"), rounds_job(durations), window=4)
    assert [o.id for o in out] == list("abcd")
    assert out[0].records[0]["texts"] == ["a:0", "a:1", "a:2"]
    done = [k for what, k in engine.log if what == "done"]
    assert done.index("1\x1fr0") < done.index("0\x1fr0")  # "b" (job 1) really finished before "a" (job 0)


def test_a_job_advances_while_others_are_still_generating():
    # "a" has three short rounds, "b" one long one: a's later rounds are submitted while b's
    # request is still in flight (lock-step would wait for b before a's second round).
    durations = {"a": [1, 1, 1], "b": [100]}
    engine = Streaming()
    run(engine, ["a", "b"], rounds_job(durations), window=2)
    b_done = engine.log.index(("done", "1\x1fr0"))
    assert engine.log.index(("submit", "0\x1fr2")) < b_done

    lock = Batch()
    run(lock, ["a", "b"], rounds_job(durations), window=2, lockstep=True)
    # The baseline: a's second round waits for b's long first one.
    assert lock.batches == [["0\x1fr0", "1\x1fr0"], ["0\x1fr1"], ["0\x1fr2"]]


def test_lockstep_and_streaming_give_the_same_outcomes():
    durations = {name: [(i * 7) % 5 + 1 for i in range(name_len)] for name_len, name in
                 zip([1, 3, 2, 4, 1, 2], "abcdef")}
    streamed = run(Streaming(), list("abcdef"), rounds_job(durations), window=3)
    lock = Batch()
    stepped = run(lock, list("abcdef"), rounds_job(durations), window=3, lockstep=True)
    assert [(o.id, o.records) for o in streamed] == [(o.id, o.records) for o in stepped]
    # Batches of 3 records, the next when the whole batch is done: a, b, c (3 rounds), then d, e, f (4).
    assert [sorted({k.split("\x1f")[0] for k in keys}) for keys in lock.batches] == \
        [["0", "1", "2"], ["1", "2"], ["1"], ["3", "4", "5"], ["3", "5"], ["3"], ["3"]]


@pytest.mark.parametrize("window", [1, 2, 5])
def test_the_window_bounds_the_records_in_flight(window):
    active, peak = 0, 0

    def start(unit):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        yield [request("x", unit[0], 3)]
        active -= 1
        return [Outcome(unit[0], [{"id": unit[0]}])]

    out = run(Streaming(), [f"r{i}" for i in range(20)], start, window=window)
    assert len(out) == 20 and peak == window


def test_no_record_is_admitted_while_the_engine_holds_max_requests():
    """Records that bring many requests each (exhaustive) are admitted only while the engine has
    fewer than `max_requests`; a running job's later rounds are not held back, and every record
    is done."""
    def start(unit):
        first = yield [request(f"a{j}", unit[0], 3) for j in range(10)]
        later = yield [request(f"b{j}", unit[0], 1) for j in range(10)]
        return [Outcome(unit[0], [{"id": unit[0], "n": len(first) + len(later)}])]

    engine = Streaming()
    out = run(engine, [f"r{i}" for i in range(12)], start, window=100, max_requests=25)
    assert [o.id for o in out] == [f"r{i}" for i in range(12)] and all(o.records[0]["n"] == 20 for o in out)
    assert 25 <= engine.peak <= 25 + 10 + 10  # admitted below 25, then one more record and its next round
    wide = Streaming()
    run(wide, [f"r{i}" for i in range(12)], start, window=100)
    assert wide.peak == 120  # the default cap is far above: every record at once


def test_waiting_outcomes_are_bounded_too():
    # The first record never finishes until the end; the others finish at once. Admission must
    # stop once 4 x window records wait behind it, instead of reading the whole input.
    admitted = []

    def names():
        for i in range(1000):
            admitted.append(i)
            yield [f"r{i}"]

    def start(unit):
        duration = 10_000 if unit[0] == "r0" else 1
        yield [request("x", unit[0], duration)]
        return [Outcome(unit[0], [{"id": unit[0]}])]

    engine = Streaming()
    gen = run_jobs(engine, names(), start, window=2)
    first = next(gen)
    assert [o.id for o in first][0] == "r0"
    assert engine.peak <= 2 * 4 + 1
    list(gen)
    assert len(admitted) == 1000


def test_a_failed_engine_fails_the_records_in_flight_and_the_run_goes_on():
    engine = Streaming(fail_poll_at=2)
    out = run(engine, list("abc"), rounds_job([1, 1]), window=3)
    failed = [o for o in out if o.error]
    assert failed and all("engine failed: RuntimeError: engine died" in o.error for o in failed)
    assert [o.id for o in out] == list("abc")


def test_wrong_number_of_texts_is_an_error_not_a_short_result():
    class Short(Streaming):
        def poll(self):
            got = super().poll()
            return [GenerationResult(key=r.key, texts=[]) for r in got]

    out = run(Short(), ["a"], rounds_job([1]), window=1)
    assert out[0].error == "the engine returned 0 of 1 texts"


def test_a_bad_line_in_a_stream_finishes_the_records_before_it_then_raises():
    def names():
        yield ["a"]
        yield ["b"]
        raise InputError("in.jsonl", "line 3", "not JSON")

    seen = []
    with pytest.raises(InputError):
        for outs in run_jobs(Streaming(), names(), rounds_job([2, 1]), window=8):
            seen.extend(o.id for o in outs)
    assert seen == ["a", "b"]


def test_busy_share_counts_time_with_requests_in_flight():
    # Lower bounds only (sleeps last at least as long as asked): the engine spends 5 ms per poll,
    # a job 5 ms "grading" per round. Streaming, the last record's grading has nothing in flight
    # around it only at the very end; in lock-step every round's grading is idle engine time.
    import time

    class Slow(Streaming):
        def poll(self):
            time.sleep(0.005)
            return super().poll()

    def start(unit):
        for i in range(3):
            yield [request(f"r{i}", unit[0], 1)]
            time.sleep(0.005)
        return [Outcome(unit[0], [{"id": unit[0]}])]

    streamed: Counter = Counter()
    engine = Slow()
    run(engine, list("abcd"), start, window=4, stats=streamed)
    assert streamed["engine_busy_ms"] >= 5 * engine.polls - 1
    assert streamed["scheduler_ms"] >= streamed["engine_busy_ms"]

    class SlowBatch:
        model = "batch"

        def generate(self, requests):
            time.sleep(0.005)
            return {r.key: GenerationResult(key=r.key, texts=["t"]) for r in requests}

        def close(self):
            pass

    stepped: Counter = Counter()
    run(SlowBatch(), list("abcd"), start, window=4, stats=stepped, lockstep=True)
    assert stepped["engine_busy_ms"] >= 3 * 5 - 1  # three rounds, one generate call each
    assert stepped["scheduler_ms"] - stepped["engine_busy_ms"] >= 4 * 3 * 5 - 1  # all grading idle


class Cancelling(Streaming):
    def __init__(self):
        super().__init__()
        self.cancelled: list[str] = []

    def cancel(self, keys):
        self.cancelled.extend(keys)
        self.log.extend(("cancel", k) for k in keys)
        self.running = [r for r in self.running if r.key not in set(keys)]


def speculating_job(asked_later: list[str]):
    """Round 1 asks "a" and names "b", "c", "d" ahead; round 2 asks `asked_later`."""
    from prm_annotate.pipeline.scheduler import Round

    def start(unit):
        first = yield Round([request("a", "a", 5)], [request(k, k, d) for k, d in (("b", 1), ("c", 2), ("d", 50))])
        later = yield [request(k, k, 1) for k in asked_later]
        return [Outcome(unit[0], [{"id": unit[0], "texts": [first["a"].texts[0]] + [later[k].texts[0] for k in asked_later]}])]

    return start


def test_requests_started_ahead_are_handed_over_and_the_rest_cancelled():
    engine = Cancelling()
    stats: Counter = Counter()
    out = run(engine, ["x"], speculating_job(["b", "c"]), window=1, speculate=10, stats=stats)
    assert out[0].records[0]["texts"] == ["a", "b", "c"]
    submitted = [k for what, k in engine.log if what == "submit"]
    assert submitted == ["0\x1fa", "0\x1fb", "0\x1fc", "0\x1fd"]  # b, c, d went with round 1; nothing twice
    assert engine.cancelled == ["0\x1fd"]  # d was never asked for: stopped when the job ended
    assert stats["ahead_started"] == 3 and stats["ahead_used"] == 2 and stats["ahead_cancelled"] == 1


def test_a_request_started_ahead_is_cancelled_as_soon_as_a_round_no_longer_names_it():
    """Not at the job's end: the engine stops spending on it at once."""
    from prm_annotate.pipeline.scheduler import Round

    def start(unit):
        yield Round([request("a", "a", 5)], [request("b", "b", 50), request("c", "c", 1)])
        yield Round([request("c", "c", 1)], [])  # b is no longer wanted
        last = yield [request("x", "x", 1)]
        return [Outcome(unit[0], [{"id": unit[0], "texts": [last["x"].texts[0]]}])]

    engine = Cancelling()
    stats: Counter = Counter()
    run(engine, ["j"], start, window=1, speculate=10, stats=stats)
    assert engine.log == [("submit", "0\x1fa"), ("submit", "0\x1fb"), ("submit", "0\x1fc"), ("done", "0\x1fc"),
                          ("done", "0\x1fa"), ("cancel", "0\x1fb"), ("submit", "0\x1fx"), ("done", "0\x1fx")]
    assert stats["ahead_started"] == 2 and stats["ahead_used"] == 1 and stats["ahead_cancelled"] == 1


def test_speculation_off_or_without_room_starts_nothing_ahead():
    engine = Cancelling()
    out = run(engine, ["x"], speculating_job(["b"]), window=1)
    assert [k for what, k in engine.log if what == "submit"] == ["0\x1fa", "0\x1fb"] and engine.cancelled == []
    assert out[0].records[0]["texts"] == ["a", "b"]
    engine = Cancelling()
    run(engine, ["x"], speculating_job(["b"]), window=1, speculate=3)  # room for 2 beside "a"
    # "d" starts when "b" has made room; never more than 3 in flight; unused "d" is stopped.
    assert engine.log == [("submit", "0\x1fa"), ("submit", "0\x1fb"), ("submit", "0\x1fc"), ("done", "0\x1fb"),
                          ("submit", "0\x1fd"), ("done", "0\x1fc"), ("done", "0\x1fa"), ("cancel", "0\x1fd")]
    assert engine.peak <= 3


def test_no_guess_starts_while_a_record_could_start():
    """A new record's requests are all needed: while one can start, nothing starts ahead; once
    none can (the input is used up, or the window is full), the jobs' guesses fill the room."""
    engine = Cancelling()
    stats: Counter = Counter()
    run(engine, ["x", "y", "z"], speculating_job(["b"]), window=3, speculate=100, stats=stats)
    submitted = [k for what, k in engine.log if what == "submit"]
    # x and y start with their first request only; z, the last, fills the window: its guesses
    # start at once, and x's and y's next, before the engine is first asked for results (so
    # they are prefilled with the first requests, not one poll later).
    assert submitted[:6] == ["0\x1fa", "1\x1fa", "2\x1fa", "2\x1fb", "2\x1fc", "2\x1fd"]
    first_done = engine.log.index(next(e for e in engine.log if e[0] == "done"))
    assert {("submit", "0\x1fb"), ("submit", "1\x1fb")} <= set(engine.log[:first_done])
    assert stats["ahead_started"] == 9


def test_the_guess_budget_grows_as_guesses_prove_needed_and_stops_them_when_most_are_not():
    """`speculate` is where the budget starts: a job whose named guesses are all asked for later
    gets more of them in flight as it goes; one whose guesses are never asked for soon starts
    none (fewer than half of the names asked for), and its names, though no longer started, are
    still counted, so a job whose guesses become needed again gets them started again."""
    from prm_annotate.pipeline.scheduler import Round

    def job(phases: str):
        def start(unit):
            for phase, needed in enumerate(phases):
                for i in range(120):
                    later = [request(f"{phase}r{j}" if needed == "n" else f"{phase}w{i}.{j}", "x", 1)
                             for j in range(i + 1, 120)]
                    yield Round([request(f"{phase}r{i}", "x", 1)], later)
            return [Outcome(unit[0], [{"id": unit[0], "texts": []}])]
        return start

    engine, stats = Cancelling(), Counter()
    run(engine, ["x"], job("n"), window=1, speculate=2, stats=stats)
    assert stats["ahead_cancelled"] == 0 and stats["ahead_used"] > 100 and stats["named_asked"] > 100
    assert engine.peak > 4 and stats["ahead_budget_max"] >= engine.peak

    engine, stats = Cancelling(), Counter()
    run(engine, ["x"], job("w"), window=1, speculate=2, stats=stats)
    assert stats["ahead_used"] == 0 and stats["ahead_started"] <= 2 and engine.peak <= 2
    assert stats["named_unasked"] > 100 * 119 // 2  # every name counted, none started after the first

    def wasted_then_needed(unit):
        for i in range(40):  # one guess named a round, never asked for
            yield Round([request(f"a{i}", "x", 1)], [request(f"w{i}", "x", 1)])
        for i in range(120):
            yield Round([request(f"r{i}", "x", 1)], [request(f"r{j}", "x", 1) for j in range(i + 1, 120)])
        return [Outcome(unit[0], [{"id": unit[0], "texts": []}])]

    engine, stats = Cancelling(), Counter()
    run(engine, ["x"], wasted_then_needed, window=1, speculate=2, stats=stats)
    submitted = [k.split("\x1f")[1] for what, k in engine.log if what == "submit"]
    assert sum(k.startswith("w") for k in submitted) < 20  # off before the wasted phase ends
    assert stats["ahead_used"] > 50  # on again once names are asked for


def test_spare_guesses_use_only_idle_capacity_whatever_the_budget_has_grown_to():
    """`Round.spare` starts only while fewer than `speculate` requests are in flight, though
    every guess is used and the budget for `ahead` grows far past it."""
    from prm_annotate.pipeline.scheduler import Round

    engine, stats = Cancelling(), Counter()

    def start(unit):
        for i in range(120):
            engine.log.append(("round", f"{i}"))
            near = [request(f"r{j}", "x", 1) for j in range(i + 1, min(i + 2, 120))]
            far = [request(f"r{j}", "x", 1) for j in range(i + 2, 120)]
            yield Round([request(f"r{i}", "x", 1)], near, far)
        return [Outcome(unit[0], [{"id": unit[0], "texts": []}])]

    run(engine, ["x"], start, window=1, speculate=3, stats=stats)
    in_flight, spare_started, current = 0, 0, 0
    for what, key in engine.log:
        if what == "round":
            current = int(key)
        elif what == "submit":
            if int(key.split("\x1fr")[1]) > current + 1:  # neither asked nor named `ahead` by this round
                assert in_flight < 3
                spare_started += 1
            in_flight += 1
        else:
            in_flight -= 1
    assert spare_started > 10 and stats["ahead_used"] > 100 and stats["ahead_budget_max"] > 3
    assert engine.peak <= 3


def test_speculation_changes_no_outcome():
    durations = {name: [(i * 7) % 5 + 1 for i in range(n)] for n, name in zip([1, 3, 2, 4], "abcd")}

    def start(unit):
        from prm_annotate.pipeline.scheduler import Round

        name = unit[0]
        texts = []
        rounds = durations[name]
        for i, d in enumerate(rounds):
            ahead = [request(f"r{j}", f"{name}:{j}", rounds[j]) for j in range(i + 1, len(rounds))]
            results = yield Round([request(f"r{i}", f"{name}:{i}", d)], ahead)
            texts.append(results[f"r{i}"].texts[0])
        return [Outcome(name, [{"id": name, "texts": texts}])]

    plain = run(Cancelling(), list("abcd"), start, window=2)
    ahead = run(Cancelling(), list("abcd"), start, window=2, speculate=100)
    assert [(o.id, o.records) for o in plain] == [(o.id, o.records) for o in ahead]
