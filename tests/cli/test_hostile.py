"""Hostile conditions, through real processes: signals (SIGKILL included), child processes, output
paths that cannot be written, full disks, foreign manifests, loose types, rejects across reruns.

Each test replays one promise of docs/robustness.md, whose table points here.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import psutil
import pytest

from testing.jsonl_files import kill_all
from testing.jsonl_files import write_jsonl as write
from testing.paths import REPO

ROOT = REPO
CLI = [sys.executable, "-m", "prm_annotate"]
# Slow in sympy yet small (it passes the grader's cost pre-check): only the timeout bounds it.
SLOW = r"\boxed{(x+y+z)^{%d}}"
GOOD = [
    {"id": "a", "answer": "18", "response": "So she makes $18.\n\nThe answer is \\boxed{18}."},
    {"id": "b", "answer": "3", "steps": ["1 + 1 = 2", "\\boxed{2}"]},
    {"id": "c", "answer": "5", "steps": ["2 + 3 = 5", "\\boxed{5}"]},
]


def run(*args: str, stdin: bytes | None = None, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *CLI, *args], input=stdin, capture_output=True, timeout=300)


def jsonl(records: list) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def workers_of(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [c for c in proc.children(recursive=True) if "prm_annotate.grading.worker" in " ".join(c.cmdline())]
    except psutil.Error:
        return []


def wait_gone(procs: list[psutil.Process], seconds: float = 10.0) -> list[psutil.Process]:
    """The processes still running after `seconds`."""
    _, alive = psutil.wait_procs(procs, timeout=seconds)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def wait_computing(worker: psutil.Process, timeout: float = 120.0) -> None:
    """Until the worker is inside a comparison: alive, busy, and no longer reading files (its
    imports are done; the comparison itself reads nothing)."""
    deadline = time.monotonic() + timeout
    last, still = None, 0.0
    while time.monotonic() < deadline:
        io = worker.io_counters().read_chars
        still = still + 0.25 if io == last else 0.0
        last = io
        if still >= 1.5:
            return
        time.sleep(0.25)
    raise AssertionError("the worker never settled into a comparison")


# --- 1. no child outlives a stage ---------------------------------------------------------------

LIBRARY_USER = """
import sys, threading
from prm_annotate.grading.grader import Grader
g = Grader(timeout=600)
if sys.argv[1] == "thread":  # the worker forked from a thread that then ends
    t = threading.Thread(target=g.start); t.start(); t.join()
else:
    g.start()
print("ready", flush=True)
g.grade("5", sys.argv[2])
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.parametrize("started_on", ["main", "thread"])
def test_worker_dies_with_a_killed_parent_mid_comparison(sig, started_on):
    proc = subprocess.Popen([sys.executable, "-c", LIBRARY_USER, started_on, SLOW % 100],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        [worker] = workers_of(psutil.Process(proc.pid))
        wait_computing(worker)
        os.kill(proc.pid, sig)  # a plain Python process: SIGTERM kills it without any cleanup
        proc.wait(timeout=30)
        left = wait_gone([worker])
        kill_all(left)
        assert not left, "the math-verify worker outlived its parent"
    finally:
        proc.kill()
        proc.wait()


def test_a_worker_started_by_a_thread_outlives_the_thread():
    # PR_SET_PDEATHSIG fires when the forking *thread* ends: the grader forks from a lasting one.
    import threading

    from prm_annotate.grading.grader import Grader

    with Grader(timeout=30) as g:
        t = threading.Thread(target=g.start)
        t.start()
        t.join()
        time.sleep(1.0)
        [worker] = [w for w in g._idle.queue if w is not None]
        assert worker.proc.poll() is None
        assert g.grade("\\frac{1}{2}", "\\boxed{(1/2)}").correct is True


def _slow_grade(tmp_path: Path, n: int = 6) -> tuple[subprocess.Popen, Path]:
    src = write(tmp_path / "in.jsonl", [{"id": f"s{i}", "answer": "5", "response": SLOW % (100 + i)}
                                       for i in range(n)])
    out = tmp_path / "out.jsonl"
    # A job started in the background by a non-interactive shell (a CI runner, `cmd &`) ignores
    # SIGINT, and so does every process it starts: the stage is started as from a terminal.
    proc = subprocess.Popen([*CLI, "grade", str(src), "-o", str(out), "--batch-size", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, out


def _first_worker(proc: subprocess.Popen, timeout: float = 120.0) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = workers_of(psutil.Process(proc.pid))
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no grader worker started")


def test_sigkilled_grade_leaves_no_worker(tmp_path):
    proc, _ = _slow_grade(tmp_path)
    worker = _first_worker(proc)
    wait_computing(worker)
    proc.kill()
    proc.wait()
    left = wait_gone([worker])
    kill_all(left)
    assert not left


# --- 2. SIGTERM and SIGHUP stop like SIGINT -----------------------------------------------------

@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_signals_stop_a_stage_cleanly(tmp_path, sig, code):
    proc, out = _slow_grade(tmp_path)
    worker = _first_worker(proc)
    wait_computing(worker)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    left = wait_gone([worker])
    kill_all(left)
    assert proc.returncode == code, err.decode()
    assert not left
    assert f"interrupted by {signal.Signals(sig).name}" in err.decode()
    [run_] = orjson.loads(out.with_name("out.manifest.json").read_bytes())["runs"]
    assert run_["interrupted"] == signal.Signals(sig).name


# --- 3. output = input ---------------------------------------------------------------------------

def _consensus_inputs(tmp_path: Path) -> tuple[Path, Path]:
    mc = {"k": 4, "label": "hard", "strategy": "scan", "scores": [1.0, 0.0], "first_error": 1,
          "completions": 8, "generated_tokens": 10, "model": "m"}
    judge = {"first_error": 1, "votes": [1], "parse_failures": 0, "model": "j", "prompt": "p"}
    base = {"id": "r1", "problem": "p", "steps": ["s0", "s1"], "answer": "5"}
    return (write(tmp_path / "rollouts.jsonl", [{**base, "mc": mc}]),
            write(tmp_path / "judged.jsonl", [{**base, "judge": judge}]))


def _cases(tmp_path: Path) -> list[tuple[list[str], Path]]:
    graded = write(tmp_path / "g.jsonl", GOOD)
    rollouts, judged = _consensus_inputs(tmp_path)
    consensus = tmp_path / "c.jsonl"
    assert run("consensus", str(rollouts), str(judged), "-o", str(consensus)).returncode == 0
    link = tmp_path / "link.jsonl"
    link.symlink_to(graded)
    hard = tmp_path / "hard.jsonl"
    os.link(consensus, hard)
    return [
        (["grade", str(graded), "-o", str(graded)], graded),
        (["grade", str(graded), "-o", str(link)], graded),  # a symlink to the input
        (["judge", str(graded), "-o", str(graded), "--model", str(tmp_path / "no-model")], graded),
        (["rollout", str(graded), "-o", str(graded), "--model", str(tmp_path / "no-model")], graded),
        (["consensus", str(rollouts), str(judged), "-o", str(judged)], judged),
        (["export", str(consensus), "-o", str(consensus), "--format", "trl"], consensus),
        (["export", str(consensus), "-o", str(hard), "--format", "trl"], consensus),  # a hard link
        (["merge", str(graded), "-o", str(graded)], graded),
    ]


def test_output_equal_to_input_is_refused_everywhere(tmp_path):
    for args, victim in _cases(tmp_path):
        before = victim.read_bytes()
        manifests = sorted(tmp_path.glob("*.manifest.json"))
        result = run(*args)
        assert result.returncode == 2, (args, result.stderr.decode())
        assert "the output is the input" in result.stderr.decode(), args
        assert result.stderr.decode().count("\n") == 1, result.stderr.decode()
        assert victim.read_bytes() == before, args
        assert sorted(tmp_path.glob("*.manifest.json")) == manifests, args


# --- 4. environment errors: one line, exit 3, output resumable ----------------------------------

def test_output_is_a_directory(tmp_path):
    src = write(tmp_path / "in.jsonl", GOOD)
    folder = tmp_path / "out.jsonl"
    folder.mkdir()
    for args in (["grade", str(src), "-o", str(folder)], ["merge", str(src), "-o", str(folder)],
                 ["export", str(src), "-o", str(folder), "--format", "trl"]):
        result = run(*args)
        assert result.returncode == 2 and "is a directory" in result.stderr.decode(), (args, result.stderr)
        assert result.stderr.decode().count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]  # no temp file left
    assert not any(folder.iterdir())


def _unprivileged() -> tuple[str, ...]:
    """A prefix that runs a command without root's power to write anywhere."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot be denied a permission")
    return ("setpriv", "--inh-caps=-all", "--bounding-set=-all", "--securebits=+noroot,+noroot_locked")


def test_permission_denied_is_exit_3_before_any_work(tmp_path):
    src = write(tmp_path / "in.jsonl", GOOD)
    locked = tmp_path / "locked"
    locked.mkdir()
    existing = write(locked / "old.jsonl", GOOD[:1])
    locked.chmod(0o555)
    existing.chmod(0o444)
    try:
        for out in (locked / "new.jsonl", existing, locked / "sub" / "new.jsonl"):
            result = run("grade", str(src), "-o", str(out), prefix=_unprivileged())
            err = result.stderr.decode()
            assert result.returncode == 3, err
            assert err.count("\n") == 1 and "Permission denied" in err and "Traceback" not in err
        assert sorted(p.name for p in locked.iterdir()) == ["old.jsonl"]
    finally:
        locked.chmod(0o755)


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A real small file system (tmpfs), mounted when this runs as root; else skipped."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()

    def mount(*options: str) -> Path:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(mnt)],
                              capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        return mnt

    yield mount
    subprocess.run(["umount", str(mnt)], capture_output=True)


def test_read_only_file_system_is_exit_3(tmp_path, tiny_tmpfs):
    src = write(tmp_path / "in.jsonl", GOOD)
    mnt = tiny_tmpfs("ro", "size=64k")
    result = run("grade", str(src), "-o", str(mnt / "out.jsonl"))
    err = result.stderr.decode()
    assert result.returncode == 3 and "Read-only file system" in err and err.count("\n") == 1, err


def test_disk_full_is_exit_3_and_the_output_resumes(tmp_path, tiny_tmpfs):
    # 200 records of ~2 KB do not fit in 64 KB: the disk fills mid-run.
    records = [{"id": f"r{i:03d}", "answer": str(i), "response": "x" * 2000 + f" \\boxed{{{i}}}"} for i in range(200)]
    src = write(tmp_path / "in.jsonl", records)
    reference = tmp_path / "reference.jsonl"
    assert run("grade", str(src), "-o", str(reference), "--batch-size", "8").returncode == 0
    mnt = tiny_tmpfs("size=64k")
    out = mnt / "out.jsonl"
    result = run("grade", str(src), "-o", str(out), "--batch-size", "8")
    err = result.stderr.decode()
    assert result.returncode == 3, err
    assert "No space left on device" in err and "Traceback" not in err
    kept = out.read_bytes()
    assert kept and kept.endswith(b"\n") and reference.read_bytes().startswith(kept)  # whole records only
    # Space again (the same records on a roomy disk): the rerun finishes what is missing.
    roomy = tmp_path / "roomy"
    roomy.mkdir()
    shutil.copy(out, roomy / "out.jsonl")
    assert run("grade", str(src), "-o", str(roomy / "out.jsonl"), "--batch-size", "8").returncode == 0
    assert (roomy / "out.jsonl").read_bytes() == reference.read_bytes()


# --- 4/5. manifests that are not ours -------------------------------------------------------------

@pytest.mark.parametrize("content", [b'{"runs": [{"stage": "grade"', b'{"runs": 5}', b'[1, 2]', b'\x00\x01'])
def test_foreign_or_torn_manifest_is_kept_aside(tmp_path, content):
    src = write(tmp_path / "in.jsonl", GOOD)
    out = tmp_path / "out.jsonl"
    manifest = tmp_path / "out.manifest.json"
    manifest.write_bytes(content)
    result = run("grade", str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr.decode()
    [aside] = tmp_path.glob("out.manifest.json.unreadable-*")
    assert aside.read_bytes() == content
    assert f"kept it as {aside}" in result.stderr.decode()
    assert [r["stage"] for r in orjson.loads(manifest.read_bytes())["runs"]] == ["grade"]


# --- 6. one strictness for every reader -----------------------------------------------------------

@pytest.mark.parametrize("bad", ["1", 1.0, True])
def test_first_error_of_the_wrong_type_is_refused_by_every_reader(tmp_path, bad):
    rollouts, judged = _consensus_inputs(tmp_path)
    rec = orjson.loads(rollouts.read_bytes())
    rec["mc"]["first_error"] = bad
    loose = write(tmp_path / "loose.jsonl", [rec])
    result = run("consensus", str(loose), str(judged), "-o", str(tmp_path / "c.jsonl"))
    assert result.returncode == 2 and "mc.first_error" in result.stderr.decode(), result.stderr
    assert not (tmp_path / "c.jsonl").exists()
    result = run("export", str(loose), "-o", str(tmp_path / "e.jsonl"), "--format", "trl")
    assert result.returncode == 2 and "mc.first_error" in result.stderr.decode(), result.stderr
    result = run("evaluate", str(loose), "--gold", str(loose), "--label-field", "mc.first_error")
    assert result.returncode == 2 and "mc.first_error" in result.stderr.decode(), result.stderr


def test_evaluate_refuses_a_gold_label_past_the_last_step(tmp_path):
    gold = write(tmp_path / "gold.jsonl", [{"id": "g-1", "steps": ["a", "b"], "label": 2}])
    result = run("evaluate", str(gold), "--gold", str(gold), "--pred-field", "label")
    assert result.returncode == 2 and "label = 2 is outside -1..1" in result.stderr.decode(), result.stderr


def test_export_checks_labels_against_first_error(tmp_path):
    rollouts, judged = _consensus_inputs(tmp_path)
    good = tmp_path / "c.jsonl"
    assert run("consensus", str(rollouts), str(judged), "-o", str(good)).returncode == 0
    rec = orjson.loads(good.read_bytes())
    assert rec["labels"] == [True, False] and rec["first_error"] == 1
    for first_error, labels in ((0, [True, False]), (-1, [True, False]), (1, [False, False])):
        bad = write(tmp_path / "bad.jsonl", [{**rec, "first_error": first_error, "labels": labels}])
        result = run("export", str(bad), "-o", str(tmp_path / "e.jsonl"), "--format", "trl")
        assert result.returncode == 2 and "labels" in result.stderr.decode(), (first_error, result.stderr)
    assert run("export", str(good), "-o", str(tmp_path / "e.jsonl"), "--format", "trl").returncode == 0


def test_stats_takes_non_string_ids_and_bins_a_string_first_error_apart(tmp_path):
    src = write(tmp_path / "s.jsonl", [{"id": 7, "first_error": "2", "labels": [True]},
                                       {"id": ["x"], "first_error": 2, "labels": [True]},
                                       {"id": "ok", "first_error": True, "labels": [True]}])
    result = run("stats", str(src), "--json")
    assert result.returncode == 0, result.stderr.decode()
    out = orjson.loads(result.stdout)
    assert out["ids"] == {"unique": 1, "duplicated": 0, "missing": 0, "not a string": 2}
    assert out["first_error"]["first_error"] == {"2": 1, "not an integer": 2}


# --- 7. a directory as input ----------------------------------------------------------------------

def test_a_directory_as_input_creates_nothing(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    out = tmp_path / "out.jsonl"
    for args in (["grade", str(folder), "-o", str(out)],
                 ["judge", str(folder), "-o", str(out), "--model", str(tmp_path / "no-model")],
                 ["rollout", str(folder), "-o", str(out), "--model", str(tmp_path / "no-model")]):
        result = run(*args)
        assert result.returncode == 2 and "is a directory" in result.stderr.decode(), (args, result.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_bad_input_is_reported_before_the_engine_starts(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"id": "a", "problem": "p", "steps": []}\n')
    result = run("judge", str(src), "-o", str(tmp_path / "out.jsonl"), "--model", str(tmp_path / "no-model"))
    err = result.stderr.decode()
    assert result.returncode == 2 and f"{src}:1: steps" in err and "engine" not in err, err


# --- 8. --skip-invalid across reruns; clean stderr ------------------------------------------------

def test_skip_invalid_sets_each_bad_line_aside_once_and_byte_for_byte(tmp_path):
    latin1 = b'{"id": "x", "answer": "caf\xe9"}'
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl(GOOD[:2]) + b"not json\n" + latin1 + b"\n" + jsonl([{"id": "d"}]))
    out = tmp_path / "out.jsonl"
    for _ in range(2):
        result = run("grade", str(src), "-o", str(out), "--skip-invalid")
        assert result.returncode == 0, result.stderr.decode()
    rejects = [orjson.loads(line) for line in (tmp_path / "out.rejects.jsonl").read_bytes().splitlines()]
    assert [r["where"] for r in rejects] == ["line 3", "line 4", "line 5"]
    assert rejects[0]["record"] == "not json"
    import base64
    assert base64.b64decode(rejects[1]["record_base64"]) == latin1


def test_failure_lines_carry_no_control_characters():
    import contextlib
    import io

    from prm_annotate.pipeline.runner import RunSummary, report

    summary = RunSummary("judge", failed=1, failures={"id\x00": "server said \x00\x1b[31mboom"})
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        report(summary)
    text = err.getvalue()
    assert "\x00" not in text and "\x1b" not in text and "failed id\\x00: server said \\x00\\x1b[31mboom" in text


# --- the kill loop --------------------------------------------------------------------------------

def test_kill_loop_over_grade_is_byte_identical(tmp_path):
    """SIGKILL and SIGTERM at random moments, 4 each, then a final run: the output is byte for byte
    an uninterrupted run's, and no process of the project is left after any kill."""
    records = [orjson.loads(line) for name in ("processbench-gsm8k-gold.jsonl", "processbench-math-gold.jsonl")
               for line in (ROOT / "tests/data/grading" / name).read_bytes().splitlines()]
    # Hostile answers among them: too costly to compare (decided without math-verify, the same every run).
    records += [{"id": f"hostile-{i}", "answer": "5", "response": f"\\boxed{{{b}^{{{b}^{{{b}}}}}}}"}
                for i, b in enumerate(range(11, 41))]
    # Enough math-verify work (fractions to reduce, a third of them wrong) that eight kills, each a
    # moment after the stage has written something new, all land mid-run even on a fast machine.
    rng = random.Random(15)
    for i in range(4000):
        a, b, k = rng.randint(1, 999), rng.randint(1, 999), rng.randint(2, 9)
        records.append({"id": f"frac-{i}", "answer": f"\\frac{{{a + (i % 3 == 0)}}}{{{b}}}",
                        "response": f"So \\boxed{{\\frac{{{k * a}}}{{{k * b}}}}}"})
    src = write(tmp_path / "in.jsonl", records)
    args = ["grade", str(src), "--batch-size", "16", "-q"]
    reference = tmp_path / "reference.jsonl"
    assert run(*args, "-o", str(reference)).returncode == 0
    out = tmp_path / "out.jsonl"
    signals = [signal.SIGKILL] * 4 + [signal.SIGTERM] * 4
    rng.shuffle(signals)
    mid_run = 0
    for sig in signals:
        size_before = out.stat().st_size if out.exists() else 0
        proc = subprocess.Popen([*CLI, *args, "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        me = psutil.Process(proc.pid)
        # A random moment once the stage is at work (its output has grown): a fixed delay would land
        # during start-up on a slow machine and after the end on a fast one.
        deadline, at_work = time.monotonic() + 120, False
        family: list[psutil.Process] = []
        while time.monotonic() < deadline and proc.poll() is None:
            family = [*{p.pid: p for p in family + me.children(recursive=True)}.values()]
            if not at_work and out.exists() and out.stat().st_size > size_before:
                deadline, at_work = time.monotonic() + rng.uniform(0.0, 0.5), True
            time.sleep(0.02)
        mid_run += proc.poll() is None
        proc.send_signal(sig)
        proc.wait(timeout=60)
        # -SIGTERM: stopped before the command set its handlers up (during imports), nothing begun
        assert proc.returncode in (0, -signal.SIGKILL, -signal.SIGTERM, 128 + signal.SIGTERM), proc.returncode
        left = wait_gone(family)
        kill_all(left)
        assert not left, f"processes {[p.pid for p in left]} outlived the stage ({signal.Signals(sig).name})"
    assert mid_run >= 4  # most kills found the stage at work, not already finished
    assert run(*args, "-o", str(out)).returncode == 0
    assert out.read_bytes() == reference.read_bytes()
