"""A watchdog that ends an in-process vLLM engine's processes when the process that started them dies.

vLLM's EngineCore runs in a child process that does not watch its parent (only its workers watch
the EngineCore). When the process holding `vllm.LLM` dies without closing it — `kill -9` from a
cron job or the OOM killer, a Ray actor whose raylet went down first — EngineCore and its workers
live on, holding memory and cores (on a GPU machine, the GPU). The watchdog is a small separate
process in its own session (so a Ctrl-C or group kill aimed at the parent's group does not end it
first): it notes the parent's descendants while the parent lives and kills whichever of them are
left once the parent is gone. Closing the engine normally stops the watchdog.

Run as a script (`python reaper.py PID`), not as `-m prm_annotate...`, so it imports only psutil.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

POLL_S = 0.5


def start_reaper() -> subprocess.Popen:
    """Start a watchdog for the calling process; stop it with `stop_reaper` after closing the engine."""
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), str(os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        close_fds=True, start_new_session=True,
    )


def stop_reaper(reaper: subprocess.Popen) -> None:
    reaper.kill()
    reaper.wait()


def watch(pid: int) -> None:
    import psutil

    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    me = os.getpid()
    seen: dict[int, psutil.Process] = {}
    while _alive(parent):
        try:
            for child in parent.children(recursive=True):
                if child.pid != me:
                    seen.setdefault(child.pid, child)
        except psutil.Error:
            break
        time.sleep(POLL_S)
    # Orphans were re-parented and keep their own children: take those too (a worker started
    # after the last look).
    left: dict[int, psutil.Process] = {}
    for proc in seen.values():
        try:
            if proc.is_running():  # is_running also checks the start time: a reused pid is not ours
                left[proc.pid] = proc
                left.update((c.pid, c) for c in proc.children(recursive=True) if c.pid != me)
        except psutil.Error:
            pass
    for proc in left.values():
        try:
            proc.kill()
        except psutil.Error:
            pass


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


if __name__ == "__main__":
    watch(int(sys.argv[1]))
