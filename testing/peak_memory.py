"""A command's peak resident memory, read from the operating system.

Linux carries a process's peak across `exec` from the memory it was forked with, so a child of a
large process (a pytest worker that has loaded torch) reports at least its parent's size through
`wait4`. The command therefore runs under a small Python process that only starts it, and that
process's rusage of its own child is the command's peak."""
from __future__ import annotations

import subprocess
import sys
import time

_STARTER = ("import resource, subprocess, sys; status = subprocess.call(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, status)")


def run_measured(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, int, float]:
    """(exit status, standard error, peak resident bytes, wall seconds) of `argv`; its standard
    output is dropped."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _STARTER, *argv], env=env, capture_output=True)
    seconds = time.perf_counter() - started
    *_, peak, status = done.stdout.split()
    return int(status), done.stderr.decode(errors="replace"), int(peak), seconds
