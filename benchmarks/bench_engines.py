"""Engine throughput and prefix-cache share, on the tiny random model, through both engines.

Workloads (the same for both engines, per-request seeds):
  sample:  64 chat prompts x n=8 x 64 tokens             -> generated tokens/s
  rollout: 16 responses x 6 step prefixes, continuations x n=4 x 16 tokens, all in one batch
           (how the rollout stage asks)                  -> share of prompt tokens from the cache
The in-process engine is the baseline; the server's figures are also given as ratios to it.
The engines run one after the other (never two at once on a small machine).

Streaming over HTTP (the server only): 32 records x 4 rounds of one chat request each (max_tokens
4 to 64, so completions differ in length), every record sending its next request when its last one
is back, as the scheduler drives an engine. The same driver runs the engine streaming, then
`LockStep(engine)` (each round one whole batch, waiting for its slowest completion), twice each
in turn; the ratio of the best wall times is what streaming gains. Measured here (Nov 2026,
bfloat16, --concurrency 64, one pair at a time on the shared 2-core machine): 2.9x to 4.2x in 4
pairs, and once 0.54x, when that streaming run alone took 10 s against 1.8 s the run before
(no retries) — hence the best of two.

    .venv/bin/python benchmarks/bench_engines.py [--dtype bfloat16]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

# The test equipment (testing/) lives beside the package, at the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prm_annotate.engines import GenerationRequest, Sampling, exit_process  # noqa: E402
from prm_annotate.engines.openai_engine import OpenAIEngine  # noqa: E402
from prm_annotate.engines.vllm_engine import VLLMEngine  # noqa: E402
from testing.lockstep import LockStep  # noqa: E402
from testing.tiny_model import build_tiny_model  # noqa: E402
from testing.vllm_server import VLLMServer  # noqa: E402


def sample_workload(prompts: int = 64, n: int = 8, max_tokens: int = 64) -> list[GenerationRequest]:
    rng = random.Random(0)
    reqs = []
    for i in range(prompts):
        a, b, c = rng.randint(1, 99), rng.randint(1, 99), rng.randint(1, 9)
        q = f"Tom has {a} apples. Then gets {b} more. Then loses {c}. How many apples now?"
        reqs.append(GenerationRequest(key=f"s{i}", messages=({"role": "user", "content": q},), n=n,
                                      sampling=Sampling(temperature=0.7, max_tokens=max_tokens, seed=i)))
    return reqs


def rollout_workload(responses: int = 16, steps: int = 6, k: int = 4,
                     max_tokens: int = 16) -> list[GenerationRequest]:
    rng = random.Random(1)
    reqs = []
    for i in range(responses):
        a = rng.randint(10, 99)
        q = (f"Problem {i}: Tom has {a} apples. " + "Then he gets some more and gives some away. " * 3
             + "How many apples now? Solve it step by step.")
        step_texts, total = [], a
        for j in range(steps):
            d = rng.randint(1, 9)
            step_texts.append(f"Step {j + 1}: {total} + {d} = {total + d}, because he got {d} more apples.")
            total += d
        for j in range(1, steps + 1):
            partial = "\n\n".join(step_texts[:j]) + "\n\n"
            reqs.append(GenerationRequest(
                key=f"r{i}/{j}",
                messages=({"role": "user", "content": q}, {"role": "assistant", "content": partial}),
                continue_final=True, n=k, sampling=Sampling(temperature=0.7, max_tokens=max_tokens, seed=1000 * i + j)))
    return reqs


def rounds_workload(records: int = 32, rounds: int = 4) -> list[list[GenerationRequest]]:
    """Per record, the requests of its rounds (in order)."""
    rng = random.Random(2)
    return [[GenerationRequest(key=f"{i}/{r}", sampling=Sampling(seed=100 * i + r, temperature=0.7,
                                                                    max_tokens=rng.choice((4, 8, 16, 32, 64))),
                               messages=({"role": "user", "content": f"Record {i}, round {r}: count "
                                          f"from {rng.randint(1, 99)} upwards."},))
             for r in range(rounds)] for i in range(records)]


def drive(engine, chains: list[list[GenerationRequest]]) -> tuple[float, int]:
    """Run every record's rounds, each sent as soon as the record's previous one is back; returns
    (seconds, failed requests)."""
    t = time.perf_counter()
    failed = 0
    engine.submit([chain[0] for chain in chains])
    while engine.in_flight():
        for g in engine.poll():
            failed += not g.ok
            record, round_ = map(int, g.key.split("/"))
            if round_ + 1 < len(chains[record]):
                engine.submit([chains[record][round_ + 1]])
    return time.perf_counter() - t, failed


def measure(engine) -> dict[str, float]:
    engine.generate(sample_workload(prompts=2, n=2, max_tokens=8))  # warm-up
    reqs = sample_workload()
    t = time.perf_counter()
    res = engine.generate(reqs)
    elapsed = time.perf_counter() - t
    failed = sum(not g.ok for g in res.values())
    generated = sum(g.generated_tokens for g in res.values())

    roll = engine.generate(rollout_workload())
    prompt = sum(g.prompt_tokens for g in roll.values())
    cached = sum(g.cached_prompt_tokens or 0 for g in roll.values())
    return {"tok_s": generated / elapsed, "seconds": elapsed, "generated": generated, "failed": failed,
            "cache_share": cached / prompt if prompt else 0.0, "prompt_tokens": prompt,
            "cached_tokens": cached}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--concurrency", type=int, default=64, help="openai engine requests in flight")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny")
        t = time.perf_counter()
        engine = VLLMEngine(str(model), dtype=args.dtype, start_timeout=300)
        start_engine = time.perf_counter() - t
        try:
            base = measure(engine)
        finally:
            engine.close()

        t = time.perf_counter()
        with VLLMServer(model, served_name="tiny", dtype=args.dtype, log_path=Path(tmp) / "server.log") as srv:
            start_server = time.perf_counter() - t
            remote = OpenAIEngine(srv.base_url, "tiny", concurrency=args.concurrency, timeout=300)
            try:
                http = measure(remote)
                # Twice each, alternating, best of two: one run is at the mercy of a busy machine.
                runs = [(drive(remote, rounds_workload()), drive(LockStep(remote), rounds_workload()))
                        for _ in range(2)]
                (streaming, streaming_failed), (lockstep, lockstep_failed) = (
                    min(run[mode] for run in runs) for mode in (0, 1))
            finally:
                remote.close()

    print(f"tiny Qwen2 (1M params, {args.dtype}); sample workload 64 prompts x n=8 x 64 tokens; "
          f"rollout workload 16 x 6 prefixes x n=4")
    print(f"{'engine':<10} {'start s':>8} {'gen tok/s':>10} {'vs vllm':>8} {'failed':>7} "
          f"{'rollout prompt tok':>19} {'from cache':>11}")
    for name, start, m in (("vllm", start_engine, base), ("openai", start_server, http)):
        print(f"{name:<10} {start:>8.1f} {m['tok_s']:>10.0f} {m['tok_s'] / base['tok_s']:>7.2f}x "
              f"{m['failed']:>7} {m['prompt_tokens']:>19} {m['cache_share']:>10.1%}")
    print(f"openai, 32 records x 4 rounds: streaming {streaming:.1f} s ({streaming_failed} failed), "
          f"lock-step {lockstep:.1f} s ({lockstep_failed} failed): streaming {lockstep / streaming:.2f}x faster")


if __name__ == "__main__":
    main()
    # After an in-process vLLM engine, leave without the interpreter's (sometimes aborting) exit.
    exit_process(0)
