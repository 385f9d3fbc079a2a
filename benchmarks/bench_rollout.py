"""Rollout: how much wall time is spent outside the engine (request building, grading, writing)?
The goal is <= 5%: grading K x steps completions must not become the bottleneck. Engine time is
measured around each `engine.generate` call in the same run, wall time around the whole stage run
(reading, validating, writing included); both workloads use the exhaustive strategy.

Each workload is rolled out twice by one stage: a cold pass (seed 0), inside which the grader's
math-verify worker starts (about 0.3-1 s, once per run however long the run) and math-verify's
parser fills its caches, and a steady-state pass (seed 1, other completions) like the later
batches of a long run. The goal is judged on the steady state; the cold pass is printed beside it.

Workloads:
  world: the shipped arithmetic-world policy. Problems from `make_problems`, responses from the
         sample stage (T=0.7), then rolled out by the same policy: realistic text, answers such as
         `\\boxed{12}`.
  tiny:  the random-weight tiny model (testing/tiny_model.py) on hand-written responses:
         garbage completions, the worst case for answer extraction.

    .venv/bin/python benchmarks/bench_rollout.py [--only world|tiny] [-k 8]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from collections import Counter
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def handmade_responses(n: int) -> list[dict]:
    out = []
    for i in range(n):
        a, b, c = i % 9 + 1, i % 7 + 2, i % 5 + 1
        steps = [f"Tom has {a} apples.", f"Then he gets {b} more: {a} + {b} = {a + b}.",
                 f"Then he loses {c}: {a + b} - {c} = {a + b - c}.", f"So the answer is \\boxed{{{a + b - c}}}."]
        out.append({"id": f"w{i}/0", "problem": f"Tom has {a} apples. Then gets {b} more. Then loses {c}. "
                    "How many apples now?", "answer": str(a + b - c), "steps": steps, "correct": True})
    return out


def measure(engine, model: str, responses: list[dict], tmp: Path, args, save_pairs: Path | None) -> list[dict]:
    """Roll `responses` out twice with one stage (and so one grader): a cold pass (seed 0: the
    grading worker starts and math-verify's parser builds its caches inside it) and a steady-state
    pass (seed 1: other completions, as later batches of a long run see). Per pass: wall and
    engine seconds, stats, and how the grader decided."""
    from prm_annotate.engines import EngineConfig
    from prm_annotate.pipeline.runner import RunOptions, run_stage
    from prm_annotate.stages.rollout import RolloutStage

    src = tmp / "responses.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in responses))
    # Engine warm-up outside the measurement (first-call allocations), with a grader of its own.
    warm = RolloutStage(engine, k=2, max_tokens=8, system_prompt="step")
    run_stage(warm, RunOptions(str(src), str(tmp / "warm.jsonl"), limit=2, quiet=True))
    warm.close()

    stage = RolloutStage(engine, k=args.k, max_tokens=args.max_tokens, system_prompt="step",
                         engine_info=EngineConfig(model=model).describe())
    graded: list = []
    if save_pairs:
        grade_many = stage.grader.grade_many

        def recording(pairs):
            pairs = list(pairs)
            graded.extend(pairs)
            return grade_many(pairs)

        stage.grader.grade_many = recording
    passes = []
    for seed in (0, 1):
        stage.config = replace(stage.config, seed=seed)
        before_stats, before_grader = Counter(stage.stats), Counter(stage.grader.stats)
        started = time.perf_counter()
        summary = run_stage(stage, RunOptions(str(src), str(tmp / f"rollouts-{seed}.jsonl"),
                                              batch_size=args.batch_size, quiet=True))
        wall = time.perf_counter() - started
        stats = Counter(stage.stats)
        stats.subtract(before_stats)
        grader = Counter(stage.grader.stats)
        grader.subtract(before_grader)
        passes.append({"wall": wall, "engine": stats["engine_busy_ms"] / 1000, "written": summary.written,
                       "stats": stats, "grader": {k: v for k, v in grader.items() if v}})
    stage.close()
    if save_pairs:
        save_pairs.write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in graded))
    return passes


def report(name: str, passes: list[dict], k: int) -> str:
    s = passes[1]["stats"]
    lines = [f"{name}: {passes[1]['written']} responses, K={k}, {s['completions']:,} completions per pass, "
             f"{s['generated_tokens']:,} generated tokens "
             f"({s['cached_prompt_tokens'] / max(1, s['prompt_tokens']):.0%} of prompt tokens from the prefix cache)"]
    for label, m in zip(("cold pass (grading worker starts inside it)", "steady state (second pass, seed 1)"), passes):
        outside = m["wall"] - m["engine"]
        share = outside / m["wall"]
        goal = f" -> goal <= 5%: {'met' if share <= 0.05 else 'NOT met'}" if m is passes[1] else ""
        lines.append(f"  {label}: wall {m['wall']:.2f} s, engine {m['engine']:.2f} s, outside {outside:.2f} s "
                     f"= {share:.1%} of wall (outside/engine {outside / m['engine']:.3f}){goal}")
        lines.append(f"    grader decided by: {m['grader']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["world", "tiny"])
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--responses", type=int, default=48, help="tiny workload: hand-written responses")
    parser.add_argument("--problems", type=int, default=12, help="world workload: problems")
    parser.add_argument("-n", type=int, default=4, help="world workload: responses per problem")
    parser.add_argument("--save-pairs", type=Path, help="directory: write the graded (gold, text) pairs of each workload")
    args = parser.parse_args()

    from prm_annotate.engines import exit_process
    from prm_annotate.engines.vllm_engine import VLLMEngine

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.only in (None, "world"):
            from prm_annotate.world import POLICY_DIR, make_problems
            from testing.rollout_bench import sample_responses

            engine = VLLMEngine(str(POLICY_DIR), max_model_len=2048, start_timeout=300)
            try:
                responses = sample_responses(engine, make_problems(args.problems, seed=0, split="bench"),
                                             n=args.n, max_tokens=128, seed=0)
                passes = measure(engine, str(POLICY_DIR), responses, tmp, args,
                                 args.save_pairs and args.save_pairs / "world.jsonl")
            finally:
                engine.close()
            steps = sum(len(r["steps"]) for r in responses) / len(responses)
            lines.append(report(f"world policy ({args.problems} problems x {args.n} sampled responses, "
                                f"{steps:.1f} steps each)", passes, args.k))
        if args.only in (None, "tiny"):
            from testing.tiny_model import build_tiny_model

            model = build_tiny_model(tmp / "tiny")
            engine = VLLMEngine(str(model), max_model_len=2048, start_timeout=300)
            try:
                passes = measure(engine, str(model), handmade_responses(args.responses), tmp, args,
                                 args.save_pairs and args.save_pairs / "tiny.jsonl")
            finally:
                engine.close()
            lines.append(report("random tiny model (hand-written responses, 3 probed steps each, garbage "
                                "completions)", passes, args.k))
    print("\n".join(lines), flush=True)
    exit_process(0)


if __name__ == "__main__":
    main()
