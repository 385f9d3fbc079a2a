"""Rollout on the tiny model: how much wall time is spent outside the engine (request building,
grading, writing)? The goal is <= 5%: grading K x steps completions must not become the
bottleneck. Engine time is measured around each `engine.generate` call in the same run.

    flock /tmp/prm-heavy.lock .venv/bin/python benchmarks/bench_rollout.py [--responses 48] [-k 8]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import orjson


def responses(n: int) -> list[dict]:
    out = []
    for i in range(n):
        a, b, c = i % 9 + 1, i % 7 + 2, i % 5 + 1
        steps = [f"Tom has {a} apples.", f"Then he gets {b} more: {a} + {b} = {a + b}.",
                 f"Then he loses {c}: {a + b} - {c} = {a + b - c}.", f"So the answer is \\boxed{{{a + b - c}}}."]
        out.append({"id": f"w{i}/0", "problem": f"Tom has {a} apples. Then gets {b} more. Then loses {c}. "
                    "How many apples now?", "answer": str(a + b - c), "steps": steps, "correct": True})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--responses", type=int, default=48)
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    from prm_annotate.engines import EngineConfig, exit_process
    from prm_annotate.engines.tiny import build_tiny_model
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.runner import RunOptions, run_stage
    from prm_annotate.stages.rollout import RolloutStage

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = build_tiny_model(tmp / "tiny")
        src = tmp / "responses.jsonl"
        src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in responses(args.responses)))
        engine = VLLMEngine(str(model), max_model_len=2048, start_timeout=300)
        try:
            # Warm-up outside the measurement (first-call allocations).
            warm = RolloutStage(engine, k=2, max_tokens=8)
            run_stage(warm, RunOptions(str(src), str(tmp / "warm.jsonl"), limit=2, quiet=True))
            warm.close()

            stage = RolloutStage(engine, k=args.k, max_tokens=args.max_tokens,
                                 engine_info=EngineConfig(model=str(model)).describe())
            started = time.perf_counter()
            summary = run_stage(stage, RunOptions(str(src), str(tmp / "rollouts.jsonl"), batch_size=args.batch_size,
                                                  quiet=True))
            wall = time.perf_counter() - started
            stage.close()
        finally:
            engine.close()
        s = stage.stats
        engine_s = s["engine_ms"] / 1000
        outside = wall - engine_s
        print(f"rollout on the tiny model: {summary.written} responses x 3 probed steps x K={args.k} = "
              f"{s['completions']:,} completions, {s['generated_tokens']:,} generated tokens "
              f"({s['cached_prompt_tokens'] / max(1, s['prompt_tokens']):.0%} of prompt tokens from the prefix cache)")
        print(f"  wall {wall:.2f} s; in the engine {engine_s:.2f} s; outside the engine {outside:.2f} s "
              f"= {outside / wall:.1%} of wall time (goal <= 5%)")
        print(f"  engine throughput {s['generated_tokens'] / engine_s:,.0f} tokens/s; "
              f"outside/engine ratio {outside / engine_s:.3f}")
    exit_process(0)


if __name__ == "__main__":
    main()
