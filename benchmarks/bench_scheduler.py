"""sample and judge (with votes) on the scheduler against lock-step, in one run.

The arithmetic world's shipped policy samples n responses per problem, and its shipped judge
votes on them, once streaming (records advance on their own, `--batch-size` in flight) and once
in lock-step batches of the same size (testing/lockstep.py, the baseline). The same records come
out (checked); the figures are wall time, generated tokens per second and the engine's busy
share, as ratios streaming / lock-step. Each mode runs twice, in turns; the faster run counts.

    .venv/bin/python benchmarks/bench_scheduler.py [--problems 120] [--window 64]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test equipment (testing/) lives at the repository root


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(stage, records, window: int, lockstep: bool) -> tuple[float, list, dict]:
    from testing import lockstep as lockstep_driver

    stage.stats.clear()
    started = time.perf_counter()
    runs = lockstep_driver.stream(stage, iter(records), window) if lockstep else stage.stream(iter(records), window)
    out = [o for outcomes in runs for o in outcomes]
    wall = time.perf_counter() - started
    if any(o.error for o in out):
        raise RuntimeError(next(o.error for o in out if o.error))
    return wall, [r.dump() for o in out for r in o.records], dict(stage.stats)


def compare(name: str, stage, records, window: int) -> str:
    best: dict[bool, tuple[float, list, dict]] = {}
    for _ in range(2):
        for lockstep in (False, True):
            got = run(stage, records, window, lockstep)
            log(f"{name} {'lock-step' if lockstep else 'streaming'}: {got[0]:.1f} s")
            if lockstep not in best or got[0] < best[lockstep][0]:
                best[lockstep] = got
    stream, lock = best[False], best[True]
    if stream[1] != lock[1]:
        raise RuntimeError(f"{name}: streaming and lock-step wrote different records")
    tokens = stream[2]["generated_tokens"]

    def busy(stats: dict) -> float:
        return stats["engine_busy_ms"] / max(1, stats["scheduler_ms"])

    return (f"| {name} | {len(stream[1])} | {tokens:,} | {stream[0]:.1f} | {lock[0]:.1f} | "
            f"{lock[0] / stream[0]:.2f} | {busy(stream[2]):.0%} | {busy(lock[2]):.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=120)
    parser.add_argument("-n", type=int, default=4, help="responses per problem")
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--window", type=int, default=64, help="records in flight (lock-step: per batch)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from prm_annotate.engines import exit_process
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.records import Problem, Response
    from prm_annotate.stages.judge import JudgeStage
    from prm_annotate.stages.sample import SampleStage
    from prm_annotate.world import JUDGE_DIR, POLICY_DIR, make_problems

    code = 0
    rows = []
    try:
        problems = [Problem.model_validate(p) for p in make_problems(args.problems, seed=0, split="bench")]
        engine = VLLMEngine(str(POLICY_DIR), max_model_len=2048, start_timeout=300)
        try:
            sample = SampleStage(engine, n=args.n, max_tokens=128, seed=0, system_prompt="step")
            rows.append(compare(f"sample (n={args.n})", sample, problems, args.window))
            _, responses, _ = run(sample, problems, args.window, False)
            sample.close()
        finally:
            engine.close()
        engine = VLLMEngine(str(JUDGE_DIR), max_model_len=2048, start_timeout=300)
        try:
            judge = JudgeStage(engine, prompt="processbench", votes=args.votes, temperature=0.7, max_tokens=256, seed=0)
            rows.append(compare(f"judge ({args.votes} votes)", judge,
                                [Response.model_validate(r) for r in responses], args.window))
        finally:
            engine.close()
        print(f"World models, {args.problems} problems, window {args.window} records (lock-step: batches of "
              f"{args.window}); fastest of 2 runs each; the same records in both modes.\n")
        print("| stage | records | generated tokens | streaming s | lock-step s | x faster | busy (streaming) "
              "| busy (lock-step) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(rows), flush=True)
    except Exception as exc:  # engines are closed by now
        log(f"bench_scheduler: {type(exc).__name__}: {exc}")
        code = 1
    exit_process(code)


if __name__ == "__main__":
    main()
