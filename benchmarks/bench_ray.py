"""What `--executor ray` costs on top of the work: Ray start-up and per-batch overhead.

Workload: the grade stage (no model) over 3000 responses, batches of 10 and of 100, local
executor (the baseline) and a local Ray with two actors, in the same run. Grading is cheap, so
the difference is Ray's own cost; with engines each batch takes seconds and that cost vanishes.

    .venv/bin/python benchmarks/bench_ray.py
"""
from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

import orjson

from prm_annotate.pipeline.executors import RayOptions
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.grade import GradeStage

RECORDS = 3000


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

if __name__ == "__main__":
    main()
