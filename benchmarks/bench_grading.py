"""Answer grading: agreement with human verdicts, and throughput against plain math-verify.

    .venv/bin/python benchmarks/bench_grading.py [--repeat N]

Agreement: the 512 ProcessBench responses of tests/data/grading (human `final_answer_correct`;
every disagreement is listed) and the 4 x 100 GPT-3 GSM8K solutions of data/gsm8k (`is_correct`), for the
Grader and, as the reference, for plain math-verify on the whole response text.
Throughput, on the same (gold, response) pairs, measured in this run: plain math-verify
(parse gold + parse response + verify, in-process, its timeouts off), the Grader cold (fresh
caches, worker already started) and the Grader again on the same pairs (verdict cache warm).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prm_annotate.grading import Grader  # noqa: E402

GRADING_DIR = ROOT / "tests" / "data" / "grading"
GPT3_FILE = ROOT / "data" / "gsm8k" / "example_model_solutions.jsonl"
GRADING_FILES = ["processbench-gsm8k-gold.jsonl", "processbench-math-gold.jsonl"]
GPT3_KEYS = ["6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"]


def processbench() -> list[tuple[str, str, str, bool]]:
    rows = []
    for name in GRADING_FILES:
        for line in (GRADING_DIR / name).read_text().splitlines():
            r = json.loads(line)
            rows.append((r["id"], r["answer"], "\n\n".join(r["steps"]), r["final_answer_correct"]))
    return rows


def gpt3() -> list[tuple[str, str, str, bool]]:
    rows = []
    for i, line in enumerate(GPT3_FILE.read_text().splitlines()):
        r = json.loads(line)
        gold = r["ground_truth"].rsplit("A:", 1)[1].strip()
        rows.extend((f"{i}/{k}", gold, r[k]["solution"], r[k]["is_correct"]) for k in GPT3_KEYS)
    return rows


def plain_math_verify(pairs: list[tuple[str, str]]) -> list[bool]:
    from math_verify import parse, verify

    return [verify(parse("$" + gold + "$", parsing_timeout=None), parse(text, parsing_timeout=None),
                   timeout_seconds=None) for gold, text in pairs]


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    pb, g3 = processbench(), gpt3()
    rows = pb + g3
    pairs = [(gold, text) for _, gold, text, _ in rows]

    # Harder mix first, while sympy's caches are cold in this process as in a fresh worker: the MATH
    # responses, where most comparisons need math-verify (worker round trips).
    plain_math_verify([("1", "$\\frac{1}{2}$")])  # compile math-verify's regexes, as the worker does
    math_pairs = [(gold, text) for rid, gold, text, _ in pb if rid.startswith("math")]
    _, t_plain_m = timed(plain_math_verify, math_pairs)
    with Grader(timeout=args.timeout) as g:
        g.start()
        _, t_cold_m = timed(g.grade_many, math_pairs)
        m_stats = dict(g.stats)

    plain, t_plain = timed(plain_math_verify, pairs)

    grader = Grader(timeout=args.timeout)
    _, t_start = timed(grader.start)
    cold, t_cold = timed(grader.grade_many, pairs)
    cold_stats = dict(grader.stats)
    warm, t_warm = timed(grader.grade_many, pairs)
    grader.close()
    assert cold == warm

    def agreement(label: str, subset: slice, show: bool) -> None:
        sub = rows[subset]
        ours = sum(v.correct == flag for v, (*_, flag) in zip(cold[subset], sub))
        ref = sum(p == flag for p, (*_, flag) in zip(plain[subset], sub))
        print(f"{label}: grader {ours}/{len(sub)} = {100 * ours / len(sub):.2f}%   "
              f"plain math-verify {ref}/{len(sub)} = {100 * ref / len(sub):.2f}%")
        errors = sum(v.error not in (None, "no answer") for v in cold[subset])
        print(f"  undecided (correct=None): {errors}")
        if show:
            for v, (rid, gold, _, flag) in zip(cold[subset], sub):
                if v.correct != flag:
                    print(f"  disagree {rid}: gold={gold!r} extracted={v.final_answer!r} "
                          f"grader={v.correct} ({v.error}) human={flag}")

    print("== agreement")
    agreement("ProcessBench gsm8k+math (human final_answer_correct)", slice(0, len(pb)), True)
    agreement("GPT-3 GSM8K solutions (is_correct)", slice(len(pb), len(rows)), True)

    n = len(pairs)
    print(f"\n== throughput on {n} (gold, response) pairs")
    print(f"plain math-verify (parse+parse+verify): {n / t_plain:10.0f} comparisons/s  ({t_plain:.2f} s)")
    print(f"grader, cold caches:                    {n / t_cold:10.0f} comparisons/s  ({t_cold:.2f} s)"
          f"   x{t_plain / t_cold:.1f} vs plain")
    print(f"grader, verdict cache warm:             {n / t_warm:10.0f} comparisons/s  ({t_warm:.2f} s)"
          f"   x{t_plain / t_warm:.1f} vs plain")
    print(f"(worker start, once per Grader: {t_start:.2f} s; cold pass decided by: {cold_stats})")
    m = len(math_pairs)
    print(f"\n== throughput on the {m} MATH responses only (decided by: {m_stats})")
    print(f"plain math-verify: {m / t_plain_m:8.0f} comparisons/s   grader cold: {m / t_cold_m:8.0f} "
          f"comparisons/s   x{t_plain_m / t_cold_m:.1f} vs plain")


if __name__ == "__main__":
    main()
