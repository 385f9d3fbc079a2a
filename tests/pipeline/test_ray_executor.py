"""`--executor ray`: the same records as the local executor, work spread over the actors, the input
read only as batches come back, an actor restarted with its batch, resume after the driver is
SIGKILLed, and no Ray process left behind.

Each test starts its own local Ray (several seconds on 2 cores), so there are few of them.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import psutil
import pytest

from testing.jsonl_files import kill_all, read_jsonl, write_jsonl

if os.environ.get("CI", "").lower() in ("true", "1"):
    import ray  # noqa: F401  CI installs the ray extra: without Ray these tests must fail, not vanish
else:
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'prm-annotate[ray]')")

# Each test counts the Ray processes it started among all of the machine's, and some run Ray in
# the test process itself: under `pytest -n` they must not run beside each other (`make test`
# sends each file's tests to one worker: --dist loadfile).

CLI = [sys.executable, "-m", "prm_annotate"]
RAY_TIMEOUT = 300


def responses(n: int) -> list[dict]:
    """Grade input: every third answer wrong."""
    out = []
    for i in range(n):
        final = i if i % 3 else i + 1
        out.append({"id": f"p{i}/0", "problem_id": f"p{i}", "answer": str(i),
                    "steps": [f"{i} - 0 = {final}", f"The answer is \\boxed{{{final}}}."]})
    return out


def ray_processes() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if p.info["name"] in ("raylet", "gcs_server") or cmd.startswith("ray::") or "/site-packages/ray/" in cmd:
            found.append(p)
    return found


def new_ray_processes(before: set[int]) -> list[psutil.Process]:
    return [p for p in ray_processes() if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture
def no_ray_left():
    """Fails the test if Ray processes it started are still running shortly after it ends
    (and ends them, by pid, so the next test starts clean)."""
    before = {p.pid for p in ray_processes()}
    yield before
    deadline = time.monotonic() + 20
    while (left := new_ray_processes(before)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:
        names = [" ".join(p.cmdline()[:2]) for p in left]
        kill_all(left)
        pytest.fail(f"Ray processes left running: {names}")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, timeout=RAY_TIMEOUT)


def test_grade_on_ray_gives_the_local_records(tmp_path, no_ray_left):
    src = write_jsonl(tmp_path / "in.jsonl", responses(60))
    local, remote = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    here = run("grade", str(src), "-o", str(local), "--batch-size", "5")
    assert here.returncode == 0, here.stderr
    there = run("grade", str(src), "-o", str(remote), "--batch-size", "5",
                "--executor", "ray", "--ray-actors", "2", "--ray-cpus-per-actor", "1")
    assert there.returncode == 0, there.stderr
    # The same records, byte for byte (the order is the order batches finished).
    assert sorted(remote.read_bytes().splitlines()) == sorted(local.read_bytes().splitlines())
    # The actors' counters reach the driver's summary.
    assert "60 graded (40 correct)" in here.stderr.decode()
    assert "60 graded (40 correct)" in there.stderr.decode()
    runs = orjson.loads((tmp_path / "ray.manifest.json").read_bytes())["runs"]
    assert runs[-1]["counts"]["written"] == 60 and runs[-1]["stats"]["correct"] == 40


def test_ray_spreads_batches_over_actors_and_skips_finished_ids(tmp_path, no_ray_left):
    import ray

    from prm_annotate.pipeline.executors import RayOptions
    from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray
    from prm_annotate.pipeline.runner import RunOptions
    from prm_annotate.stages.grade import GradeStage

    src = write_jsonl(tmp_path / "in.jsonl", responses(40))
    out = tmp_path / "out.jsonl"
    # A finished part from an earlier run: it must be kept and not sent to the cluster again.
    finished = [dict(r, final_answer="kept", correct=None) for r in responses(40)[:12]]
    write_jsonl(out, finished)

    arrived = tmp_path / "actors"
    arrived.mkdir()

    def build(_engine):
        # Defined here, so Ray ships it by value; marks each record with the process that made it.
        class WhereStage(GradeStage):
            def process(self, batch):
                # On a loaded machine one actor can start so late that the other has done every
                # batch: each waits (bounded) until both are up, so the split is Ray's, not timing's.
                if not (arrived / str(os.getpid())).exists():  # its first batch only
                    (arrived / str(os.getpid())).touch()
                    deadline = time.monotonic() + 120
                    while len(list(arrived.iterdir())) < 2 and time.monotonic() < deadline:
                        time.sleep(0.05)
                for outcome in super().process(batch):
                    outcome.records[0].worker_pid = os.getpid()
                    yield outcome

        return WhereStage()

    stage, summary = run_stage_on_ray(build, None, RunOptions(str(src), str(out), batch_size=2, quiet=True),
                                      RayOptions(actors=2, cpus_per_actor=1))
    assert not ray.is_initialized()  # the run started Ray and stopped it again
    assert (summary.skipped, summary.done, summary.written, summary.failed) == (12, 28, 28, 0)
    records = read_jsonl(out)
    assert records[:12] == finished
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in responses(40))
    pids = {r["worker_pid"] for r in records[12:]}
    assert len(pids) == 2 and os.getpid() not in pids  # two actors did the work, not the driver
    assert stage.stats["correct"] == sum(r["correct"] is True for r in records[12:])


def test_the_driver_reads_the_input_only_as_batches_come_back(no_ray_left):
    """The driver holds a bounded window of batches, never the input: at every finished batch it
    has read at most the batches in flight beyond what has come back."""
    from prm_annotate.pipeline.executors import RayOptions
    from prm_annotate.pipeline.executors.ray_executor import IN_FLIGHT_PER_ACTOR, ray_dispatch
    from prm_annotate.stages.grade import GradeStage

    stage = GradeStage()
    records = [stage.input_model.model_validate(r) for r in responses(400)]
    read = 0

    def source():
        nonlocal read
        for record in records:
            read += 1
            yield record

    finished, most_held, batch = 0, 0, 5
    try:
        dispatch = ray_dispatch(lambda _engine: GradeStage(), None, RayOptions(actors=2, cpus_per_actor=1))
        for outcomes in dispatch(stage, source(), batch):
            most_held = max(most_held, read - finished)
            finished += len(outcomes)
    finally:
        stage.close()
    assert finished == read == 400
    assert stage.stats["correct"] == sum(1 for i in range(400) if i % 3)  # the actors' counters came back
    # Two actors, each with at most IN_FLIGHT_PER_ACTOR batches: 20 of 400 records held at most.
    assert most_held <= 2 * IN_FLIGHT_PER_ACTOR * batch, most_held


def test_an_actor_killed_mid_run_is_restarted_and_its_batch_written_once(tmp_path, no_ray_left):
    """An actor's process dies with a batch in hand (SIGKILL, as a lost node would): Ray starts the
    actor again and sends it the batch again; every record is written once, counted once."""
    from prm_annotate.pipeline.executors import RayOptions
    from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray
    from prm_annotate.pipeline.runner import RunOptions
    from prm_annotate.stages.grade import GradeStage

    src = write_jsonl(tmp_path / "in.jsonl", responses(60))
    out = tmp_path / "out.jsonl"
    killed = tmp_path / "killed"

    def build(_engine):
        class DiesOnce(GradeStage):
            def process(self, batch):
                if not killed.exists():  # the first batch to arrive anywhere, once
                    killed.write_text(str(os.getpid()))
                    os.kill(os.getpid(), signal.SIGKILL)
                yield from super().process(batch)

        return DiesOnce()

    stage, summary = run_stage_on_ray(build, None, RunOptions(str(src), str(out), batch_size=5, quiet=True),
                                      RayOptions(actors=2, cpus_per_actor=1))
    assert killed.exists()
    assert (summary.done, summary.written, summary.failed) == (60, 60, 0)
    ids = [r["id"] for r in read_jsonl(out)]
    assert len(ids) == len(set(ids)) == 60
    assert stage.stats["correct"] == 40  # the killed attempt's counts never reached the driver


def test_an_actor_that_cannot_start_its_stage_is_a_usage_error_with_the_reason(tmp_path, no_ray_left):
    """As an engine that cannot start locally (bad model path): exit 2 with the reason, not a crash,
    and not an actor restarted without end."""
    from prm_annotate.errors import UsageError
    from prm_annotate.pipeline.executors import RayOptions
    from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray
    from prm_annotate.pipeline.runner import RunOptions
    from prm_annotate.stages.grade import GradeStage

    src = write_jsonl(tmp_path / "in.jsonl", responses(20))
    driver = os.getpid()

    def build(_engine):
        if os.getpid() != driver:  # the driver's own copy answers for the stage; the actors' fail
            raise FileNotFoundError("no model at /models/missing")
        return GradeStage()

    with pytest.raises(UsageError, match="could not start its stage: FileNotFoundError: no model at /models/missing"):
        run_stage_on_ray(build, None, RunOptions(str(src), str(tmp_path / "out.jsonl"), batch_size=5, quiet=True),
                         RayOptions(actors=2, cpus_per_actor=1))


def test_a_bad_line_in_a_piped_input_keeps_what_came_before_as_locally(tmp_path, no_ray_left):
    lines = b"".join(orjson.dumps(r) + b"\n" for r in responses(30)) + b"{not json\n"
    common = ["grade", "-", "--batch-size", "5", "-q"]
    here = subprocess.run([*CLI, *common, "-o", str(tmp_path / "local.jsonl")], input=lines,
                          capture_output=True, timeout=RAY_TIMEOUT)
    there = subprocess.run([*CLI, *common, "-o", str(tmp_path / "ray.jsonl"), "--executor", "ray", "--ray-actors", "2"],
                           input=lines, capture_output=True, timeout=RAY_TIMEOUT)
    assert here.returncode == there.returncode == 2, there.stderr.decode()[-2000:]
    assert "-:31: invalid JSON" in there.stderr.decode()
    local = sorted((tmp_path / "local.jsonl").read_bytes().splitlines())
    assert len(local) == 30 and sorted((tmp_path / "ray.jsonl").read_bytes().splitlines()) == local


def test_ray_run_resumes_after_the_driver_is_killed(tmp_path, no_ray_left):
    src = write_jsonl(tmp_path / "in.jsonl", responses(3000))
    out = tmp_path / "out.jsonl"
    args = [*CLI, "grade", str(src), "-o", str(out), "--batch-size", "10", "--executor", "ray", "-q"]
    driver = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + RAY_TIMEOUT
    while time.monotonic() < deadline and driver.poll() is None:
        if out.exists() and out.stat().st_size > 0:
            break
        time.sleep(0.05)
    assert driver.poll() is None, driver.stderr.read().decode()
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    driver.stderr.close()
    # The local Ray shares the driver's fate (its head processes and actors end with it); Ray's
    # agents notice a minute or two later: end them now, by pid, rather than wait.
    time.sleep(2)
    kill_all(new_ray_processes(no_ray_left))

    partial = read_jsonl(out) if out.read_bytes().endswith(b"\n") else None
    written = out.read_bytes().count(b"\n")
    assert 0 < written < 3000, written

    again = run(*args[len(CLI):])
    assert again.returncode == 0, again.stderr
    assert f"{written} already done" in again.stderr.decode()
    records = read_jsonl(out)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == 3000
    assert sorted(ids) == sorted(r["id"] for r in responses(3000))
    if partial is not None:
        assert records[: len(partial)] == partial  # what the killed run wrote is kept as it was
    assert sum(r["correct"] is True for r in records) == 2000


def test_sigterm_stops_a_ray_run_as_it_stops_a_local_one(tmp_path, no_ray_left):
    """SLURM's time limit: the command's own SIGTERM handling (exit 143, the manifest says so, the
    actors ended), not Ray's crash handler aborting the driver; the rerun finishes the rest."""
    src = write_jsonl(tmp_path / "in.jsonl", responses(3000))
    out = tmp_path / "out.jsonl"
    args = [*CLI, "grade", str(src), "-o", str(out), "--batch-size", "10", "--executor", "ray", "-q"]
    driver = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + RAY_TIMEOUT
    while time.monotonic() < deadline and driver.poll() is None and not (out.exists() and out.stat().st_size):
        time.sleep(0.05)
    driver.send_signal(signal.SIGTERM)
    err = driver.communicate(timeout=RAY_TIMEOUT)[1].decode()
    assert driver.returncode == 143, err[-2000:]
    assert "interrupted by SIGTERM" in err
    assert orjson.loads((tmp_path / "out.manifest.json").read_bytes())["runs"][-1]["interrupted"] == "SIGTERM"
    written = out.read_bytes().count(b"\n")
    again = run(*args[len(CLI):])
    assert again.returncode == 0, again.stderr
    assert f"{written} already done" in again.stderr.decode()
    ids = [r["id"] for r in read_jsonl(out)]
    assert len(ids) == len(set(ids)) == 3000


NOISY_DRIVER = """
import os
import sys

from prm_annotate.pipeline.executors import RayOptions
from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray
from prm_annotate.pipeline.runner import RunOptions
from prm_annotate.stages.grade import GradeStage


def build(_engine):
    class Noisy(GradeStage):  # as an engine's logging would: prints on its standard output
        def process(self, batch):
            print("a line printed by the stage", flush=True)
            os.write(1, b"a line written to fd 1\\n")
            yield from super().process(batch)

    return Noisy()


if __name__ == "__main__":
    import ray

    # Started here (not by the executor) only to learn the session's log directory.
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    logs = ray._private.worker._global_node.get_logs_dir_path()
    run_stage_on_ray(build, None, RunOptions(sys.argv[1], "-", batch_size=4, quiet=True), RayOptions(actors=2))
    ray.shutdown()
    print("LOGS", logs, file=sys.stderr)
"""


def test_records_on_standard_output_are_not_mixed_with_actor_output(tmp_path, no_ray_left):
    src = write_jsonl(tmp_path / "in.jsonl", responses(20))
    driver = tmp_path / "noisy.py"
    driver.write_text(NOISY_DRIVER)
    result = subprocess.run([sys.executable, str(driver), str(src)], capture_output=True, timeout=RAY_TIMEOUT)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    records = [orjson.loads(line) for line in result.stdout.splitlines()]  # every line a record
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in responses(20))
    # The actors' output went to their standard error, none to their standard output. (Checked in
    # the actors' own log files: Ray's replay of them on the driver's stderr is best effort, and
    # a line can be lost when the driver shuts Ray down first.)
    logs = Path(result.stderr.decode().rsplit("LOGS ", 1)[1].strip())
    actor_err = b"".join(f.read_bytes() for f in logs.glob("worker-*.err"))
    actor_out = b"".join(f.read_bytes() for f in logs.glob("worker-*.out"))
    for line in (b"a line printed by the stage", b"a line written to fd 1"):
        assert line in actor_err
        assert line not in actor_out


def test_unknown_executor_is_a_usage_error(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", responses(2))
    bad = run("grade", str(src), "-o", str(tmp_path / "o.jsonl"), "--executor", "dask")
    assert bad.returncode == 2 and "--executor 'dask'" in bad.stderr.decode()


# --- a model stage: two actors, each with a vLLM engine on the tiny model ----------------------

SAMPLE_DRIVER = """
import sys

from prm_annotate.engines import EngineConfig
from prm_annotate.pipeline.executors import RayOptions
from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray
from prm_annotate.pipeline.runner import RunOptions
from prm_annotate.stages.sample import SampleStage


def main():
    src, out, model, timeout = sys.argv[1:5]
    config = EngineConfig(model=model, dtype="float32", max_model_len=2048, start_timeout=float(timeout))
    build = lambda engine: SampleStage(engine, n=2, max_tokens=24, seed=1, engine_info=config.describe())
    stage, summary = run_stage_on_ray(build, config, RunOptions(src, out, batch_size=2, quiet=True),
                                      RayOptions(actors=2, cpus_per_actor=1))
    sys.exit(summary.exit_code)  # the summary line is already on stderr


if __name__ == "__main__":
    main()
"""


def vllm_processes(since: float) -> list[psutil.Process]:
    """vLLM engine processes started after `since` that are not this test process's own engine."""
    mine = {p.pid for p in psutil.Process().children(recursive=True)}
    found = []
    for p in psutil.process_iter(["name", "cmdline", "create_time"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if cmd.startswith("VLLM::") and p.info["create_time"] >= since and p.pid not in mine:
            found.append(p)
    return found


def vllm_processes_after(since: float, timeout: float = 90) -> list[psutil.Process]:
    """The vLLM processes started after `since` still running once they have had `timeout`
    seconds to end. Ray ends its actors asynchronously after a finished run: measured, within
    5 s on an idle machine and up to a minute on a loaded 2-core one; a leak lasts forever."""
    deadline = time.monotonic() + timeout
    while (left := vllm_processes(since)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@pytest.mark.engine
@pytest.mark.whole_machine  # two engines of its own, and its leak check scans every process
@pytest.mark.slow  # Ray actors with engines of their own: `make test-slow` (docs/test-durations.md)
def test_sample_on_ray_with_two_engines_matches_local_and_resumes_after_kill(
        tmp_path, tiny_model_dir, vllm_engine, heavy, no_ray_left):
    from prm_annotate.pipeline.runner import RunOptions, run_stage
    from prm_annotate.stages.sample import SampleStage
    from testing.heavy import ENGINE_START_TIMEOUT, TINY_MAX_MODEL_LEN

    problems = [{"id": f"q{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(24)]
    src = write_jsonl(tmp_path / "problems.jsonl", problems)
    assert TINY_MAX_MODEL_LEN == 2048  # the driver's engines match the fixture's

    # The reference: the same stage on the local executor (the fixture engine is already running).
    local = tmp_path / "local.jsonl"
    run_stage(SampleStage(vllm_engine, n=2, max_tokens=24, seed=1,
                          engine_info={"engine": "vllm", "model": str(tiny_model_dir), "dtype": "float32"}),
              RunOptions(str(src), str(local), batch_size=2, quiet=True))
    heavy.release()  # two engines are about to start in the actors: free this one's core first

    driver = tmp_path / "driver.py"
    driver.write_text(SAMPLE_DRIVER)
    out = tmp_path / "ray.jsonl"
    args = [sys.executable, str(driver), str(src), str(out), str(tiny_model_dir), str(ENGINE_START_TIMEOUT)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    started = time.time()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + RAY_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.stat().st_size > 0:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    engines = vllm_processes_after(started)  # the actors and their engines end with the driver
    leaked = [" ".join(p.cmdline()) for p in engines]
    kill_all(engines)
    assert not leaked, f"vLLM processes outlived the killed driver: {leaked}"
    kill_all(new_ray_processes(no_ray_left))  # Ray's agents would linger a minute or two
    written = out.read_bytes().count(b"\n")
    assert 0 < written < 48

    rerun_started = time.time()
    again = subprocess.run(args, capture_output=True, timeout=RAY_TIMEOUT, env=env)
    assert again.returncode == 0, again.stderr.decode()[-3000:]
    # Only what was missing was generated again (a problem cut between its two responses
    # gets just the missing one).
    assert re.search(rf"sampled into {48 - written} responses?[;, ]", again.stderr.decode()), again.stderr.decode()[-2000:]
    assert not vllm_processes_after(rerun_started), "vLLM processes left after a finished Ray run"

    records = read_jsonl(out)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == 48
    # Same seeds, same model: the two engines in Ray actors wrote exactly what the local run wrote.
    assert sorted(out.read_bytes().splitlines()) == sorted(local.read_bytes().splitlines())


def test_a_grader_travels_to_another_process_as_its_settings():
    """CLI stage factories capture a Grader; Ray pickles the factory for each actor."""
    import pickle

    from ray import cloudpickle

    from prm_annotate.grading.grader import Grader

    grader = Grader(timeout=3.0, workers=2)
    try:
        assert grader.grade("1/2", "so \\boxed{0.5}").correct is True  # its worker process is running
        copy = pickle.loads(cloudpickle.dumps(grader))
        assert (copy.timeout, copy.workers) == (3.0, 2)
        assert copy.grade("1/2", "so \\boxed{0.5}").correct is True
        copy.close()
    finally:
        grader.close()


@pytest.mark.engine
@pytest.mark.whole_machine
@pytest.mark.slow  # Ray actors with engines of their own: `make test-slow` (docs/test-durations.md)
def test_rollout_command_with_executor_ray_writes_the_local_records(tmp_path, tiny_model_dir, heavy, no_ray_left):
    from testing.heavy import ENGINE_START_TIMEOUT

    heavy.release()  # no other engine while these run
    responses_in = [{"id": f"q{i}/0", "problem_id": f"q{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i),
                     "steps": [f"{i} + {i} = {2 * i}", f"The answer is \\boxed{{{2 * i}}}."]} for i in range(6)]
    src = write_jsonl(tmp_path / "responses.jsonl", responses_in)
    common = ["rollout", str(src), "--model", str(tiny_model_dir), "-k", "2", "--max-tokens", "16", "--seed", "3",
              "--batch-size", "2", "--dtype", "float32", "--max-model-len", "2048",
              "--start-timeout", str(int(ENGINE_START_TIMEOUT)), "-q"]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    local = subprocess.run([*CLI, *common, "-o", str(tmp_path / "local.jsonl")], capture_output=True,
                           timeout=RAY_TIMEOUT, env=env)
    assert local.returncode == 0, local.stderr.decode()[-3000:]
    started = time.time()
    remote = subprocess.run([*CLI, *common, "-o", str(tmp_path / "ray.jsonl"), "--executor", "ray",
                             "--ray-actors", "2", "--ray-cpus-per-actor", "1"], capture_output=True,
                            timeout=RAY_TIMEOUT, env=env)
    assert remote.returncode == 0, remote.stderr.decode()[-3000:]
    out = sorted((tmp_path / "ray.jsonl").read_bytes().splitlines())
    assert len(out) == 6 and out == sorted((tmp_path / "local.jsonl").read_bytes().splitlines())
    # The counts made in the actors reach the command's own report: the same line as locally.
    line = [ln for ln in local.stderr.decode().splitlines() if ln.startswith("rollout: ") and "completions" in ln]
    assert line and line[-1] in remote.stderr.decode().splitlines()
    assert not line[-1].startswith("rollout: 0 completions")
    assert not vllm_processes_after(started), "vLLM processes left after the Ray run"


def test_a_cascade_on_ray_gives_the_local_records(tmp_path, no_ray_left):
    """`judge --escalate-from` on Ray actors: the first file and its budget's threshold travel with the
    stage, so the actors escalate what a local run escalates (scripted judges: the logic, not an engine)."""
    from prm_annotate.pipeline.executors import RayOptions
    from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray
    from prm_annotate.pipeline.runner import RunOptions, run_stage
    from prm_annotate.stages.judge import JudgeStage
    from testing.scripted_engine import ScriptedEngine

    items = [{"id": f"r{i}", "problem": f"What is {i} + 1?", "steps": [f"{i} + 1 = {i + 1}.", f"\\boxed{{{i + 1}}}"]}
             for i in range(24)]
    src = write_jsonl(tmp_path / "in.jsonl", items)
    first = write_jsonl(tmp_path / "first.jsonl", [
        {**r, "judge": {"first_error": 0, "votes": [0] * (1 + i % 4) + [None] * (3 - i % 4), "parse_failures": 3 - i % 4,
                        "model": "critic", "prompt": "processbench"}} for i, r in enumerate(items)])

    def build(_engine):
        return JudgeStage(ScriptedEngine(lambda r: "\\boxed{-1}", model="big"), prompt="processbench",
                          escalate_from=str(first), budget="25%")

    local, remote = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    run_stage(build(None), RunOptions(str(src), str(local), batch_size=4, quiet=True))
    _, summary = run_stage_on_ray(build, None, RunOptions(str(src), str(remote), batch_size=4, quiet=True),
                                  RayOptions(actors=2, cpus_per_actor=1))
    assert summary.failed == 0
    assert sorted(remote.read_bytes().splitlines()) == sorted(local.read_bytes().splitlines())
    assert sum(r["judge"]["cascade"]["decided_by"] == "second" for r in read_jsonl(remote)) == 6
