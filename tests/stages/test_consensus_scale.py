"""consensus on 10^5 records, as real processes: killed with SIGKILL mid-run and rerun, it writes the
bytes of a run never stopped; a bad line last in either large input changes nothing (exit 2, the
output as it was, a torn last line included); and the run holds ids, not records (peak memory)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson
import pytest

from testing.peak_memory import run_measured
from tests.stages.test_consensus import judged, rollout

N = 100_000
STEPS = ["Step 1: 5 - 3 = 2.", "Step 2: 2 * 2 = 4.", "Step 3: 4 - 1 = 3.", "The answer is \\boxed{3}."]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """10^5 rollouts and their judgements, every row of the table among them, ids in file order."""
    folder = tmp_path_factory.mktemp("big")
    errors = [-1, 0, 1, 2, 3]
    with open(folder / "rollouts.jsonl", "wb") as ro, open(folder / "judged.jsonl", "wb") as ju:
        for i in range(N):
            rid = f"p{i // 8}/{i % 8}"
            mc_error, judge_error = errors[i % 5], errors[(i * 7 // 3) % 5] if i % 3 else errors[i % 5]
            ro.write(orjson.dumps(rollout(rid, mc_error, STEPS)) + b"\n")
            ju.write(orjson.dumps(judged(rid, judge_error, STEPS)) + b"\n")
    return folder


def consensus(folder, rollouts="rollouts.jsonl", judged_file="judged.jsonl", out="out.jsonl") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "prm_annotate", "consensus", str(folder / rollouts),
                             str(folder / judged_file), "-o", str(folder / out), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(child: subprocess.Popen) -> tuple[int, str]:
    """Exit status and stderr."""
    err = child.stderr.read().decode()
    return child.wait(), err


def test_killed_mid_run_and_rerun_writes_the_bytes_of_a_run_never_stopped(big):
    status, err, peak, _ = run_measured([sys.executable, "-m", "prm_annotate", "consensus", str(big / "rollouts.jsonl"),
                                         str(big / "judged.jsonl"), "-o", str(big / "whole.jsonl"), "-q"])
    assert status == 0, err
    whole = (big / "whole.jsonl").read_bytes()
    kept = whole.count(b"\n")
    assert 0 < kept < N
    # The records themselves: 10^5 of them are ~40 MB of Python objects; the run holds ids.
    assert peak < 250 * 2**20, f"peak memory {peak / 2**20:.0f} MB"

    child = consensus(big, out="killed.jsonl")
    out = big / "killed.jsonl"
    deadline = time.monotonic() + 900  # a loaded machine: the first pass alone can take minutes
    while (not out.exists() or out.stat().st_size < len(whole) // 4) and time.monotonic() < deadline:
        time.sleep(0.05)
        assert child.poll() is None, "the run finished before it was killed: nothing was tested"
    os.kill(child.pid, signal.SIGKILL)
    status, _ = finish(child)
    assert status == -signal.SIGKILL, "the run finished before it was killed: nothing was tested"
    partial = out.read_bytes()
    assert 0 < len(partial) < len(whole) and whole.startswith(partial[: partial.rfind(b"\n") + 1])

    # A bad line last in either large input: refused with its file and line, the output untouched.
    for name, line in (("rollouts.jsonl", N + 1), ("judged.jsonl", N + 1)):
        bad = big / f"bad-{name}"
        bad.write_bytes((big / name).read_bytes() + b'{"id": "p-last", "steps": \n')
        files = ("bad-rollouts.jsonl", "judged.jsonl") if name == "rollouts.jsonl" else ("rollouts.jsonl",
                                                                                      "bad-judged.jsonl")
        status, err = finish(consensus(big, *files, out="killed.jsonl"))
        assert status == 2 and f"bad-{name}:{line}:" in err, err
        assert out.read_bytes() == partial
        bad.unlink()

    status, err = finish(consensus(big, out="killed.jsonl"))
    assert status == 0, err
    assert out.read_bytes() == whole


def test_only_judged_ids_are_named_without_reading_the_output_again(big, tmp_path):
    # Every other of the first 20,000 rollouts: the other judged ids are named as only in judged,
    # also on a rerun that finds the kept ones done (they are in neither the rollouts nor the output).
    half = tmp_path / "half.jsonl"
    with open(big / "rollouts.jsonl", "rb") as fh, open(half, "wb") as out:
        for i, line in enumerate(fh):
            if i % 2 == 0 and i < 20_000:
                out.write(line)
    from prm_annotate.stages.consensus import run_consensus

    first = run_consensus(str(half), str(big / "judged.jsonl"), str(tmp_path / "out.jsonl"), quiet=True)
    again = run_consensus(str(half), str(big / "judged.jsonl"), str(tmp_path / "out.jsonl"), quiet=True)
    assert len(first.only_judged) == len(again.only_judged) == N - 10_000
    assert first.only_judged[:2] == ["p0/1", "p0/3"] and first.only_judged[-1] == f"p{(N - 1) // 8}/{(N - 1) % 8}"
    assert first.written > 0 and again.written == 0 and again.skipped == first.written
