"""Measure the shipped world models in vLLM (it starts engines, one at a time).

    python -m lab.world.measure --problems 100 -n 8

Policy: samples `n` answers per test problem at temperature 0.7 (a seed per request) and reports
the share of right final answers, of process-correct answers (no wrong step by `truth.py`), of
equations with wrong arithmetic, and of prompts with a mix of right and wrong answers.
Judge: reads every sampled response in the `processbench` prompt, answers greedily, and is scored
against the true first error (accuracy, and ProcessBench's error/correct accuracies and F1).
The engines are the pipeline's own (`prm_annotate.engines`, with its CPU settings and watchdog);
the policy's engine is closed before the judge's starts.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lab.world.train import JUDGE_TEMPLATE, default_system_prompt, judge_messages, judge_stats, policy_messages
from prm_annotate.engines import EngineConfig, GenerationRequest, Sampling, exit_process, make_engine
from prm_annotate.judging import read_verdict
from prm_annotate.world import JUDGE_DIR, POLICY_DIR
from prm_annotate.world.problems import make_problems
from prm_annotate.world.truth import EQUATION, boxed_values, true_first_error

# The KV-cache budget these measurements were taken with (the pipeline's CPU default is larger).
KV_CACHE_GB = 0.5


def chat(model_dir: Path, conversations: list[list[dict]], *, n: int, temperature: float, max_tokens: int,
         seed: int) -> list[list[str]]:
    """Every conversation through a fresh engine on `model_dir` (closed before returning)."""
    engine = make_engine(EngineConfig(model=str(model_dir.resolve()), seed=0, kv_cache_gb=KV_CACHE_GB))
    try:
        results = engine.generate([
            GenerationRequest(key=str(i), messages=tuple(c), n=n,
                              sampling=Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed + i))
            for i, c in enumerate(conversations)])
    finally:
        engine.close()
    for key, result in results.items():
        if not result.ok:
            raise RuntimeError(f"request {key} failed: {result.error}")
    return [results[str(i)].texts for i in range(len(conversations))]


def split(text: str) -> list[str]:
    return [piece for piece in text.split("\n\n") if piece.strip()]


def final_answer(text: str) -> str | None:
    found = boxed_values(text)
    return found[-1] if found else None


def policy_stats(problems: list[dict], samples: list[list[str]]) -> dict:
    answers_right = process_right = equations = wrong_equations = mixed = 0
    total = sum(len(s) for s in samples)
    for problem, texts in zip(problems, samples):
        right_here = 0
        for text in texts:
            right = final_answer(text) == problem["answer"]
            right_here += right
            process_right += true_first_error(problem, split(text)) == -1
            for a, sym, b, c in EQUATION.findall(text):
                a, b, c = int(a), int(b), int(c)
                value = {"+": a + b, "-": a - b}.get(sym, a * b)
                equations += 1
                wrong_equations += c != value
        answers_right += right_here
        mixed += 0 < right_here < len(texts)
    return {"responses": total, "answer_accuracy": answers_right / total,
            "process_correct": process_right / total,
            "wrong_arithmetic_share": wrong_equations / max(1, equations),
            "mixed_prompts": mixed / len(problems)}


def measure(policy_dir: Path, judge_dir: Path | None, n_problems: int, n: int, seed: int) -> dict:
    problems = make_problems(n_problems, seed=seed, split="test")
    meta = json.loads((policy_dir / "world.json").read_text())
    system_prompt = meta.get("system_prompt") or default_system_prompt()
    t0 = time.time()
    samples = chat(policy_dir, [policy_messages(p, system_prompt) for p in problems],
                   n=n, temperature=0.7, max_tokens=128, seed=seed)
    result = {"policy": policy_stats(problems, samples), "policy_seconds": round(time.time() - t0, 1)}
    if judge_dir is None:
        return result

    pairs = [(p, split(t)) for p, texts in zip(problems, samples) for t in texts if split(t)]
    t0 = time.time()
    verdicts = chat(judge_dir, [judge_messages(JUDGE_TEMPLATE, p, steps) for p, steps in pairs],
                    n=1, temperature=0.0, max_tokens=256, seed=seed)
    truths = [true_first_error(p, steps) for p, steps in pairs]
    result["judge"] = judge_stats(truths, [read_verdict(v[0], len(steps)) for v, (_, steps) in zip(verdicts, pairs)])
    result["judge"]["truth_error_share"] = sum(t != -1 for t in truths) / len(truths)
    result["judge_seconds"] = round(time.time() - t0, 1)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure the world's models in vLLM.")
    parser.add_argument("--policy", type=Path, default=POLICY_DIR)
    parser.add_argument("--judge", type=Path, default=JUDGE_DIR)
    parser.add_argument("--policy-only", action="store_true")
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = measure(args.policy, None if args.policy_only else args.judge, args.problems, args.n, args.seed)
    print(json.dumps(result, indent=2))
    # vLLM can abort at interpreter exit (see docs/vllm-cpu.md); the engines are already closed.
    exit_process(0)


if __name__ == "__main__":
    main()
