"""The math-verify side of the grader, run as a child process: `python -m prm_annotate.grading.worker`.

math-verify (sympy underneath) can run for ever on answers such as `10^{10^{10}}`, and its own
timeouts use SIGALRM, which only works on the main thread of the main process. So the parent
(`prm_annotate.grading.grader.Grader`) turns those off and runs every comparison here, in a process it
can kill when a comparison overruns its deadline.

Protocol, one JSON document per line. The parent writes `{"items": [[gold, answer], ...]}` (both
already normalised; `[gold, text, "plain"]` asks for plain math-verify on a whole response); the worker answers with one line per item, in order, as soon as it is done:
`[true|false, null]` for a verdict or `[null, "<error>"]` when it could not decide. It writes
`{"ready": true}` once math-verify is imported. Strings are only ever handed to math-verify's
parser (an ANTLR LaTeX grammar and a digits-and-operators expression regex); nothing is evaluated.
"""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import threading
import time
from functools import lru_cache

# Address-space cap: a runaway expression fails with MemoryError instead of taking the machine down.
MEMORY_LIMIT_BYTES = int(os.environ.get("PRM_GRADER_MEMORY_LIMIT", str(4 << 30)))


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):  # not on this platform, or a lower hard limit
        pass


def _die_with_parent() -> None:
    """End this worker when the grading process ends, however it ends (SIGKILL included).

    The parent kills its worker on close and on timeouts, but a parent that is SIGKILLed (or
    killed by SIGTERM mid-comparison before its handlers run) cannot; the worker, in its own
    session, would go on at 100% CPU under init for as long as sympy takes: possibly for ever.
    On Linux the kernel sends SIGKILL on the parent's death (PR_SET_PDEATHSIG), even while sympy
    holds the GIL in C; elsewhere a thread notices the new parent id within a second.
    """
    parent = int(os.environ.get("PRM_GRADER_PARENT", "0")) or os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    if os.getppid() != parent:  # the parent died before the prctl above
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _wrap(answer: str) -> str:
    # A normalised answer is bare LaTeX or a number; "$...$" makes math-verify read it whole.
    return "$" + answer + "$"


def _parse(answer: str) -> list:
    from math_verify import parse

    return parse(_wrap(answer), parsing_timeout=None)


@lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> list:
    # Each gold answer is parsed once; rollouts compare one gold with many completions.
    return _parse(gold)


@lru_cache(maxsize=4096)
def _parse_answer(answer: str) -> list:
    return _parse(answer)


def verify_answer(gold: str, answer: str) -> tuple[bool | None, str | None]:
    """math-verify on an extracted answer: (equal, None), or (None, why it could not tell)."""
    from math_verify import verify

    gold_parsed = _parse_gold(gold)
    if not gold_parsed:
        return None, "gold parse failure"
    parsed = _parse_answer(answer)
    if not parsed:
        return None, "parse failure"
    # Gold first: verify is not symmetric (assignments such as "x = 2" are read on the answer side).
    return bool(verify(gold_parsed, parsed, timeout_seconds=None)), None


_DELIMITED_RE = re.compile(r"(?<!\\)\$|\\\(|\\\[")


def compare_plain(gold: str, text: str) -> tuple[bool | None, str | None]:
    """Plain math-verify, the reference the grader is measured against: the gold as an answer, the
    whole response parsed by math-verify's own extraction, no rules of ours."""
    from math_verify import parse, verify

    # A gold that brings its own delimiters ("$9$", as math-verify's own tests write them) is read
    # as it is; a bare one ("18", "\\frac{1}{2}") is wrapped like the grader's.
    gold_parsed = parse(gold, parsing_timeout=None) if _DELIMITED_RE.search(gold) else _parse_gold(gold)
    return bool(verify(gold_parsed, parse(text, parsing_timeout=None), timeout_seconds=None)), None


def main() -> None:
    # Keep the protocol stream clean: anything a library prints goes to stderr instead.
    _die_with_parent()
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _limit_memory()
    logging.basicConfig(level=logging.ERROR)
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # Pay the import and the compilation of math-verify's large regexes before "ready", so the
    # first real comparison is not charged for them against its deadline.
    verify_answer("1", "\\frac{1}{2}")
    _parse_gold.cache_clear()
    _parse_answer.cache_clear()

    proto.write('{"ready": true}\n')
    for line in sys.stdin:
        request = json.loads(line)
        for item in request["items"]:
            try:
                # [gold, answer], or [gold, response text, "plain"] for the plain math-verify reference
                verdict = (compare_plain if len(item) > 2 else verify_answer)(item[0], item[1])
            except MemoryError:
                verdict = (None, "out of memory")
            except Exception as e:  # a grader bug must not look like a wrong answer
                verdict = (None, f"error: {type(e).__name__}")
            proto.write(json.dumps(verdict) + "\n")


if __name__ == "__main__":
    main()
