"""Small helpers the CLI-level tests share: JSONL files and the processes a command leaves behind."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import psutil


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def group_alive(pgid: int, wait: float = 30.0) -> list[int]:
    """Live (non-zombie) processes of a process group, after waiting up to `wait` s for them to go."""
    deadline = time.monotonic() + wait
    while True:
        out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
        alive = [int(p) for p, g, st in (l.split()[:3] for l in out.splitlines()) if int(g) == pgid and "Z" not in st]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def sigkill_after_lines(cmd: list[str], out: Path, lines: int, timeout: float) -> int:
    """Run `cmd` in its own process group, SIGKILL the whole group (vLLM's EngineCore too) once `out`
    holds `lines` lines, and return how many it holds then; the group must be gone."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while line_count(out) < lines and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, f"finished or died before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert group_alive(proc.pid) == [], "EngineCore outlived the killed command"
    return line_count(out)


def kill_all(procs: list[psutil.Process]) -> None:
    """Kill what a test found left behind (so one failure does not leave load for the next tests)."""
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=10)


def sigterm_after_lines(cmd: list[str], out: Path, lines: int, timeout: float) -> tuple[int, str]:
    """Run `cmd`, send SIGTERM to it alone (as `timeout` and SLURM do) once `out` holds `lines` lines,
    and return its exit status and stderr; every process it started (vLLM's EngineCore and workers)
    must be gone within 30 s, by its own doing."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    me = psutil.Process(proc.pid)
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + timeout
        while line_count(out) < lines and proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(psutil.Error):
                family = [*{p.pid: p for p in family + me.children(recursive=True)}.values()]
            time.sleep(0.05)
        assert proc.poll() is None, f"finished or died before the signal: {proc.stderr.read().decode()[-2000:]}"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    _, alive = psutil.wait_procs(family, timeout=30)
    left = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    kill_all(left)
    assert not left, "vLLM's processes outlived the stopped stage"
    return proc.returncode, err.decode()
