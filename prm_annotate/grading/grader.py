"""Grade final answers against gold answers: extraction, normalisation, math-verify with a hard timeout.

    grader = Grader()                      # timeout=5.0 s per comparison, workers=1
    v = grader.grade("18", response_text)  # Verdict(final_answer="18", correct=True, error=None)
    vs = grader.grade_many([(gold, text), ...])
    grader.close()                         # or `with Grader() as grader:`

A verdict's `correct` is True/False when decided. A response with no final answer is
`correct=False, error="no answer"` (so `error` alone does not mean undecided). When the grader
cannot decide (`error` is "timeout", "parse failure", "gold parse failure", "empty gold",
"worker crashed", "out of memory", "too costly: ...", "error: <Exception>") `correct` is None:
never guessed.

How a comparison is decided, cheapest first:
  0. an answer that qualifies its value ("not 18", "at least 5", "18?": `answers.hedged`) is wrong;
  1. the verdict cache (bounded LRU keyed by the normalised gold and answer);
  2. each form of the pair (`answers.comparison_forms`: one, or two under the percent,
     decimal-comma, interval and argument-name rules; right when one form is equal): equal
     normalised strings, or two plain numbers compared exactly (no math-verify needed);
  3. a look at the cost (`cost.too_costly`): a tower of powers, a huge factorial or a deeply
     nested answer is "too costly" (undecided) at once instead of costing a timeout and a restart;
  4. math-verify `verify(gold, answer)` -- gold first -- in a child process
     (`prm_annotate.grading.worker`) with math-verify's signal timeouts off. The parent waits at
     most `timeout` seconds per comparison and kills and replaces a worker that overruns, so the
     bound holds on any thread and inside worker processes (no signals, no multiprocessing).
The worker dies with the process that started it, by any signal (see `worker`).
Model output is never evaluated: the parent only runs regular expressions, the worker only
math-verify's parser.

`plain_many` grades with plain math-verify on the whole response (the reference the grader is
measured against, same worker and timeouts); `Agreement` counts agreement with reference
verdicts and splits the disagreements into false accepts and false rejects.
"""
from __future__ import annotations

import json
import os
import queue
import selectors
import subprocess
import sys
import threading
import time
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Iterable, Sequence

from prm_annotate.grading.answers import comparison_forms, extract_final_answer, hedged, normalize_answer
from prm_annotate.grading.cost import too_costly

__all__ = ["Agreement", "Verdict", "Grader", "extract_final_answer", "normalize_answer"]

DEFAULT_TIMEOUT = 5.0
# A fresh worker imports sympy and math-verify; on a loaded 2-core machine that takes seconds.
STARTUP_TIMEOUT = 120.0
# Comparisons sent to a worker per request; results stream back one by one.
CHUNK = 256


@dataclass(frozen=True)
class Verdict:
    final_answer: str | None
    correct: bool | None
    error: str | None = None


@dataclass
class Agreement:
    """How often verdicts agree with reference verdicts (humans' final_answer_correct, GSM8K's
    is_correct), and how the disagreements split: a false accept (graded right, the reference says
    wrong) hides a real error from the labels and costs more than a false reject."""
    total: int = 0
    agree: int = 0
    false_accepts: int = 0
    false_rejects: int = 0
    undecided: int = 0  # correct=None: counted as disagreements, in neither split

    def add(self, correct: bool | None, reference: bool) -> None:
        self.total += 1
        if correct is None:
            self.undecided += 1
        elif correct == reference:
            self.agree += 1
        elif correct:
            self.false_accepts += 1
        else:
            self.false_rejects += 1

    @classmethod
    def of(cls, verdicts: Iterable[bool | None], references: Iterable[bool]) -> "Agreement":
        out = cls()
        for correct, reference in zip(verdicts, references, strict=True):
            out.add(correct, reference)
        return out

    @property
    def share(self) -> float:
        return self.agree / self.total if self.total else 0.0

    def __str__(self) -> str:
        return (f"{self.agree}/{self.total} = {100 * self.share:.2f}% "
                f"(false accepts {self.false_accepts}, false rejects {self.false_rejects}"
                + (f", undecided {self.undecided})" if self.undecided else ")"))


class GraderUnavailable(RuntimeError):
    """The math-verify worker process could not be started at all."""


def _plain_number(s: str) -> Decimal | None:
    if len(s) > 60 or not s or not (s[0].isdigit() or s[0] in "-."):
        return None
    try:
        d = Decimal(s)
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


def _quick(gold: str, answer: str) -> bool | None:
    """A verdict without math-verify where one is certain, else None."""
    if gold == answer:
        return True
    g, a = _plain_number(gold), _plain_number(answer)
    if g is None or a is None:
        return None
    if g == a:
        return True
    # Two different integers can never round together; decimals are left to math-verify's
    # rounding rules.
    if g == g.to_integral_value() and a == a.to_integral_value() and "." not in gold + answer:
        return False
    return None


def _any_equal(results: list[tuple[bool | None, str | None]]) -> tuple[bool | None, str | None]:
    """The verdict of a comparison with several forms (answers.comparison_forms): right when one
    form is equal; undecided when none is and one could not be decided; else wrong."""
    if any(correct for correct, _ in results):
        return True, None
    return next(((c, e) for c, e in results if c is None), (False, None))


_spawner_lock = threading.Lock()
_spawner: tuple[int, ThreadPoolExecutor] | None = None


def _spawn(*args, **kwargs) -> subprocess.Popen:
    """Popen from a thread that lasts as long as this process. The worker asks the kernel to kill
    it when its parent dies (PR_SET_PDEATHSIG), and Linux means the parent *thread*: a worker
    forked by a short-lived thread (grade_many drives each of several workers from its own) would
    be killed when that thread ends."""
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(*args, **kwargs)
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():  # a forked child has no copy of the thread
            _spawner = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="grader-spawner"))
        pool = _spawner[1]
    return pool.submit(subprocess.Popen, *args, **kwargs).result()


class _Worker:
    """One child process running prm_annotate.grading.worker."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1", PRM_GRADER_PARENT=str(os.getpid()))
        self.proc = _spawn(
            [sys.executable, "-m", "prm_annotate.grading.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, close_fds=True, start_new_session=True)
        self._buf = b""
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        # The import of sympy and math-verify (0.5 s and more) runs in the child while the caller
        # goes on; the first comparison waits for what is left of it.
        self.ready = False

    def wait_ready(self) -> None:
        if self.ready:
            return
        line = self._readline(STARTUP_TIMEOUT)
        if line is None or json.loads(line) != {"ready": True}:
            self.kill()
            raise GraderUnavailable("the math-verify worker did not start (is math-verify installed?)")
        self.ready = True

    def _readline(self, timeout: float) -> bytes | None:
        """The next line, or None on timeout or when the worker died."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def run(self, items: Sequence[tuple[str, str]], timeout: float) -> tuple[list[tuple[bool | None, str | None]], bool]:
        """Compare items in order. Returns the verdicts obtained and whether the worker survived;
        on an overrun the overrunning item is the last verdict and the worker is dead."""
        self.wait_ready()
        payload = json.dumps({"items": [list(i) for i in items]}).encode() + b"\n"
        try:
            self.proc.stdin.write(payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return [(None, "worker crashed")], False
        out: list[tuple[bool | None, str | None]] = []
        for _ in items:
            line = self._readline(timeout)
            if line is None:
                alive = self.proc.poll() is None
                self.kill()
                out.append((None, "timeout" if alive else "worker crashed"))
                return out, False
            correct, error = json.loads(line)
            out.append((correct, error))
        return out, True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._sel.close()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


class Grader:
    """Thread-safe answer grader. See the module docstring for the decision order.

    timeout: hard limit in seconds for one math-verify comparison (parse included).
    workers: child processes for math-verify comparisons (started when first needed, or by
        `start`: a model stage starts them with its stream).
    cache_size: verdicts kept, keyed by (normalised gold, normalised answer).
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, workers: int = 1, cache_size: int = 100_000):
        if timeout <= 0 or workers < 1:
            raise ValueError("timeout must be > 0 and workers >= 1")
        self.timeout = timeout
        self.workers = workers
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], tuple[bool | None, str | None]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        for _ in range(workers):
            self._idle.put(None)  # a slot; the process starts when first used
        # How comparisons were decided: cache, quick (string/number), too_costly, math_verify;
        # plus no_answer.
        self.stats: Counter[str] = Counter()

    def __reduce__(self):
        # Sent to another process (a Ray actor builds its stage from a pickled factory): the
        # settings travel; worker processes, cache and locks belong to each process.
        return (Grader, (self.timeout, self.workers, self.cache_size))

    # -- public API -----------------------------------------------------------------------

    def grade(self, gold: str, text: str) -> Verdict:
        """Grade one response (whole text, or just its answer) against the gold answer."""
        return self.grade_many([(gold, text)])[0]

    def grade_many(self, pairs: Iterable[tuple[str, str]], cut: Sequence[bool] | None = None) -> list[Verdict]:
        """Grade (gold, response text) pairs; the result is in input order. `cut`: per pair, whether
        its text was cut at its token budget (then only an answer it closed before the cut counts:
        answers.extract_final_answer)."""
        pairs = list(pairs)
        answers = [extract_final_answer(text, bool(cut and cut[i])) for i, (_, text) in enumerate(pairs)]
        keys: list[tuple[str, str] | None] = []
        decided: dict[tuple[str, str], tuple[bool | None, str | None]] = {}
        pending: dict[tuple[str, str], list[tuple[str, str]]] = {}  # key -> its comparison forms
        for (gold, _), answer in zip(pairs, answers):
            if answer is None:
                keys.append(None)
                self.stats["no_answer"] += 1
                continue
            if hedged(answer, gold):
                # "not 18", "at least 5", "18?": the answer says something other than a value
                # (answers.hedged); never reduced to its number, never sent to math-verify.
                keys.append(("", answer))
                decided[keys[-1]] = (False, None)
                self.stats["hedged"] += 1
                continue
            key = (normalize_answer(gold), normalize_answer(answer))
            keys.append(key)
            if key in decided or key in pending:
                self.stats["cache"] += 1
                continue
            hit = self._cache_get(key)
            if hit is not None:
                self.stats["cache"] += 1
                decided[key] = hit
                continue
            if not key[0] or not key[1]:  # nothing left once delimiters and units are gone
                decided[key] = (None, "empty gold") if not key[0] else (False, "no answer")
                continue
            forms = comparison_forms(*key)
            quick = [_quick(*form) for form in forms]
            if True in quick or all(q is False for q in quick):
                self.stats["quick"] += 1
                decided[key] = (True in quick, None)
                self._cache_put(key, decided[key])
            elif (costly := too_costly(key[0]) or too_costly(key[1])) is not None:
                self.stats["too_costly"] += 1
                decided[key] = (None, costly)
                self._cache_put(key, decided[key])
            else:
                pending[key] = [form for form, q in zip(forms, quick) if q is None]
        compared = sorted({form for forms in pending.values() for form in forms})
        self.stats["math_verify"] += len(compared)
        results = dict(zip(compared, self._compare(compared)))
        for key, forms in pending.items():
            decided[key] = _any_equal([results[form] for form in forms])
            self._cache_put(key, decided[key])
        return [Verdict(None, False, "no answer") if key is None else Verdict(answer, *decided[key])
                for answer, key in zip(answers, keys)]

    def plain_many(self, pairs: Iterable[tuple[str, str]]) -> list[Verdict]:
        """Plain math-verify on (gold, response text) pairs, with the same hard timeouts: the
        reference the grader's agreement is reported beside (no extraction or rules of ours, no cache)."""
        return [Verdict(None, *result) for result in self._compare([(g, t, "plain") for g, t in pairs])]

    def start(self, wait: bool = True) -> None:
        """Start every worker process now (otherwise each starts when first needed). `wait=False`
        returns at once: the workers load math-verify while the caller goes on (a stage starts
        them so, and its first comparison does not hold the engine up for the import)."""
        slots = [self._idle.get() for _ in range(self.workers)]
        try:
            for i, w in enumerate(slots):
                if w is None:
                    slots[i] = _Worker()
                if wait:
                    slots[i].wait_ready()
        except GraderUnavailable:
            slots[i] = None
            raise
        finally:
            for w in slots:
                self._idle.put(w)

    def close(self) -> None:
        """Stop the worker processes (a later call starts them again)."""
        while True:
            try:
                w = self._idle.get_nowait()
            except queue.Empty:
                break
            if w is not None:
                w.kill()
        for _ in range(self.workers):
            self._idle.put(None)

    def __enter__(self) -> "Grader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- internals ------------------------------------------------------------------------

    def _cache_get(self, key: tuple[str, str]) -> tuple[bool | None, str | None] | None:
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            return hit

    def _cache_put(self, key: tuple[str, str], value: tuple[bool | None, str | None]) -> None:
        with self._cache_lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _compare(self, keys: list[tuple[str, str]]) -> list[tuple[bool | None, str | None]]:
        if not keys:
            return []
        n = min(self.workers, max(1, len(keys) // CHUNK + 1))
        if n == 1:
            return self._compare_on_one(keys)
        # Split across worker processes; each thread drives one of them.
        shares = [keys[i::n] for i in range(n)]
        results: list[list] = [[] for _ in range(n)]
        failures: list[BaseException] = []

        def drive(i: int) -> None:
            try:
                results[i] = self._compare_on_one(shares[i])
            except BaseException as e:  # re-raised on the calling thread below
                failures.append(e)

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        merged: list = [None] * len(keys)
        for i in range(n):
            merged[i::n] = results[i]
        return merged

    def _compare_on_one(self, keys: list[tuple[str, str]]) -> list[tuple[bool | None, str | None]]:
        worker = self._idle.get()
        out: list[tuple[bool | None, str | None]] = []
        try:
            while len(out) < len(keys):
                if worker is None:
                    worker = _Worker()
                chunk = keys[len(out):len(out) + CHUNK]
                try:
                    got, alive = worker.run(chunk, self.timeout)
                except GraderUnavailable:
                    worker = None
                    raise
                out.extend(got)
                if not alive:
                    worker = None  # killed on overrun (the slot stays empty if no replacement starts)
                    worker = _Worker()  # the replacement loads math-verify now, not when next needed
        finally:
            self._idle.put(worker)
        return out
