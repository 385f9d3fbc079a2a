"""Measure the shipped world models in vLLM (it starts engines, one at a time).

    python -m lab.world.measure --problems 100 -n 8

Policy: samples `n` answers per test problem at temperature 0.7 (a seed per request) and reports
the share of right final answers, of process-correct answers (no wrong step by `truth.py`), of
equations with wrong arithmetic, and of prompts with a mix of right and wrong answers.
Judge: reads every sampled response in the `processbench` prompt, answers greedily, and is scored
against the true first error (accuracy, and ProcessBench's error/correct accuracies and F1).
Thinker (`--thinker DIR`): samples `n` traces per test problem at temperature 0.7 and reads each
with the trace truth (`trace_truth.py`): shares with a corrected slip, an uncaught slip, a wrong
correction, no error, a right answer, a closed thought; then the judge reads the first
`--judge-traces` closed traces (the thought's and the answer's paragraphs, as a record's steps) in
the `processbench` prompt and is scored against the traces' true first errors
(`--judge-generated N`: the judge alone, on N generated traces).
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
from prm_annotate.world.thinking import trace_for
from prm_annotate.world.trace_truth import read_trace, split_trace
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


def thinker_stats(truths: list) -> dict:
    n = len(truths)
    share = lambda f: round(sum(map(f, truths)) / n, 4)  # noqa: E731
    return {"traces": n, "finished": share(lambda t: t.finished), "accuracy": share(lambda t: t.final_correct),
            "no_error": share(lambda t: t.first_error == -1),
            "corrected_slip": share(lambda t: bool(t.corrected_slips)),
            "uncaught_slip": share(lambda t: bool(t.uncaught_slips)),
            "wrong_correction": share(lambda t: bool(t.wrong_corrections)),
            "garbled": share(lambda t: any(p.kind == "garbled" for p in t.paragraphs)),
            "paragraphs_mean": round(sum(len(t.paragraphs) for t in truths) / n, 2),
            "paragraphs_max": max(len(t.paragraphs) for t in truths)}


def measure_thinker(thinker_dir: Path, judge_dir: Path | None, n_problems: int, n: int, seed: int,
                    judge_traces: int) -> dict:
    problems = make_problems(n_problems, seed=seed, split="test")
    system_prompt = json.loads((thinker_dir / "world.json").read_text()).get("system_prompt") or default_system_prompt()
    t0 = time.time()
    samples = chat(thinker_dir, [policy_messages(p, system_prompt) for p in problems],
                   n=n, temperature=0.7, max_tokens=1024, seed=seed)
    pairs = [(p, t) for p, texts in zip(problems, samples) for t in texts]
    truths = [read_trace(p, t) for p, t in pairs]
    result = {"thinker": thinker_stats(truths), "thinker_seconds": round(time.time() - t0, 1),
              "examples": [t for _, t in pairs[:3]]}
    if judge_dir is None:
        return result
    chosen = [(p, split_trace(t), tr) for (p, t), tr in zip(pairs, truths) if tr.finished][:judge_traces]
    t0 = time.time()
    result["judge"] = judge_on_traces(judge_dir, [(p, thought + answer, tr) for p, (thought, answer, _), tr in chosen],
                                      seed)
    result["judge_seconds"] = round(time.time() - t0, 1)
    return result


def judge_on_generated_traces(judge_dir: Path, count: int, seed: int) -> dict:
    """The judge on `count` generated traces (`trace_for("judgethink", i, seed)`), not the thinker's."""
    items = [trace_for("judgethink", i, seed) for i in range(count)]
    return judge_on_traces(judge_dir, [(p, t.steps, read_trace(p, t.text)) for p, t in items], seed)


def judge_on_traces(judge_dir: Path, chosen: list, seed: int) -> dict:
    """The judge (processbench prompt, greedy) on (problem, steps, trace truth) triples, scored
    against the truth's first error."""
    steps = [s for _, s, _ in chosen]
    chosen = [(p, None, tr) for p, _, tr in chosen]
    verdicts = chat(judge_dir, [judge_messages(JUDGE_TEMPLATE, p, s) for (p, _, _), s in zip(chosen, steps)],
                    n=1, temperature=0.0, max_tokens=1024, seed=seed)
    firsts = [tr.first_error for _, _, tr in chosen]
    predictions = [read_verdict(v[0], len(s)) for v, s in zip(verdicts, steps)]
    judge = judge_stats(firsts, predictions)
    judge["truth_error_share"] = sum(f != -1 for f in firsts) / len(firsts)
    # Where the judge's answer falls against the truth's paragraph kinds: a corrected slip is the
    # paper's first error; a re-check or a correction flagged is a right paragraph called wrong.
    flagged = [tr.paragraphs[p].kind for p, (_, _, tr) in zip(predictions, chosen)
               if p is not None and 0 <= p < len(tr.paragraphs)]
    judge["flagged_kinds"] = {k: flagged.count(k) for k in sorted(set(flagged))}
    judge["on_corrected_slip_traces"] = judge_stats(
        [f for f, (_, _, tr) in zip(firsts, chosen) if tr.corrected_slips],
        [p for p, (_, _, tr) in zip(predictions, chosen) if tr.corrected_slips])
    return judge


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure the world's models in vLLM.")
    parser.add_argument("--policy", type=Path, default=POLICY_DIR)
    parser.add_argument("--judge", type=Path, default=JUDGE_DIR)
    parser.add_argument("--policy-only", action="store_true")
    parser.add_argument("--thinker", type=Path, default=None,
                        help="measure this thinking policy instead (and the judge on its traces)")
    parser.add_argument("--judge-traces", type=int, default=50)
    parser.add_argument("--no-judge", action="store_true")
    parser.add_argument("--judge-generated", type=int, default=0,
                        help="only the judge, on this many generated thinking traces")
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.judge_generated:
        result = judge_on_generated_traces(args.judge, args.judge_generated, args.seed)
    elif args.thinker:
        result = measure_thinker(args.thinker, None if args.no_judge else args.judge, args.problems, args.n,
                                 args.seed, args.judge_traces)
    else:
        result = measure(args.policy, None if args.policy_only else args.judge, args.problems, args.n, args.seed)
    print(json.dumps(result, indent=2))
    # vLLM can abort at interpreter exit (see docs/vllm-cpu.md); the engines are already closed.
    exit_process(0)


if __name__ == "__main__":
    main()
