"""What `--executor ray` costs on top of the work: Ray start-up and per-batch overhead.

Workload: the grade stage (no model) over 3000 responses, batches of 10 and of 100, local
executor (the baseline) and a local Ray with two actors, in the same run. Grading is cheap, so
the difference is Ray's own cost; with engines each batch takes seconds and that cost vanishes.

Then the driver's memory: `grade --executor ray` over records padded to ~5 KB at two sizes, its own
peak resident memory (the driver process, not Ray's), which should not grow with the input: the
driver holds the batches in flight, never the input (target: at most 300 bytes a record added).

    .venv/bin/python benchmarks/bench_ray.py
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.peak_memory import run_measured  # noqa: E402  (the repository on the path first)

from prm_annotate.pipeline.executors import RayOptions
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.grade import GradeStage

RECORDS = 3000
MEMORY_SIZES = (20000, 60000)  # Ray's object store, mapped into the driver, settles by ~20000 (~50 MB)
PAD = 5000  # characters of problem text per record: an input held whole shows as ~200 MB between the sizes
PER_RECORD = 300  # bytes of driver memory a record may add

# The command, with its own peak reported as it ends (Ray's processes are its children: the
# operating system's figure for the tree would be the largest of them).
DRIVER = ("import resource, sys\nfrom prm_annotate.cli import main\nsys.argv[0] = 'prm-annotate'\ntry:\n"
          "    main()\nfinally:\n"
          "    print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr)")


def responses(n: int) -> list[dict]:
    return [{"id": f"p{i}/0", "answer": str(i), "steps": [f"{i} + 0 = {i}", f"\\boxed{{{i if i % 3 else i + 1}}}"]}
            for i in range(n)]


def main() -> None:
    if importlib.util.find_spec("ray") is None:
        print("bench_ray: skipped, the ray extra is not installed")
        return
    import ray

    from prm_annotate.pipeline.executors.ray_executor import run_stage_on_ray

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in responses(RECORDS)))

        t = time.perf_counter()
        ray.init(address="local", include_dashboard=False, logging_level="ERROR")
        start = time.perf_counter() - t
        ray.shutdown()
        print(f"local Ray start + stop: {start:.1f} s")

        times = {}
        for batch in (10, 100):
            t = time.perf_counter()
            run_stage(GradeStage(), RunOptions(str(src), f"{tmp}/local{batch}.jsonl", batch_size=batch, quiet=True))
            local = time.perf_counter() - t
            t = time.perf_counter()
            run_stage_on_ray(lambda _engine: GradeStage(), None,
                             RunOptions(str(src), f"{tmp}/ray{batch}.jsonl", batch_size=batch, quiet=True),
                             RayOptions(actors=2))
            remote = time.perf_counter() - t
            times[batch] = (local, remote)
            print(f"grade {RECORDS} records, batches of {batch}: local {local:.1f} s, "
                  f"ray (2 actors) {remote:.1f} s = {remote / local:.1f}x local")
        # Fixed cost (Ray and actor start-up) and the marginal cost of one more batch.
        (l10, r10), (l100, r100) = times[10], times[100]
        per_batch = ((r10 - l10) - (r100 - l100)) / (RECORDS // 10 - RECORDS // 100)
        fixed = (r100 - l100) - per_batch * (RECORDS // 100)
        print(f"ray overhead: ~{fixed:.1f} s per run (start-up), ~{per_batch * 1000:.0f} ms per batch")
        driver_memory(Path(tmp))


def driver_memory(tmp: Path) -> None:
    peaks = {}
    for n in MEMORY_SIZES:
        src = tmp / f"padded{n}.jsonl"
        with open(src, "wb") as fh:
            for r in responses(n):
                fh.write(orjson.dumps({**r, "problem": "x" * PAD}) + b"\n")
        status, err, _, seconds = run_measured([sys.executable, "-c", DRIVER, "grade", str(src), "-o",
                                                str(tmp / f"padded{n}.out.jsonl"), "--batch-size", "100",
                                                "--executor", "ray", "--ray-actors", "2", "-q"])
        if status != 0:
            raise SystemExit(f"grade --executor ray failed ({status}): {err[-2000:]}")
        peaks[n] = int(err.rsplit("PEAK ", 1)[1].split()[0])
        print(f"grade --executor ray, {n} records of ~{PAD // 1000} KB: driver peak {peaks[n] / 1e6:.0f} MB, {seconds:.1f} s")
    small, large = MEMORY_SIZES
    added = (peaks[large] - peaks[small]) / (large - small)
    print(f"driver memory added per record: {added:.0f} bytes "
          f"({'met' if added <= PER_RECORD else 'not met'}: at most {PER_RECORD})")


if __name__ == "__main__":
    main()
