"""Hostile answers: what 1,000 of them cost the grader, with its cost pre-check and without.

    .venv/bin/python benchmarks/bench_hostile.py [--n 1000] [--workers 2] [--baseline-sample 12] [--slipping 20]

The answers are made here, seeded: towers of powers, huge powers and factorials, binomials, deep
nesting (fractions, braces, parentheses), very long sums, symbolic powers sympy would expand,
each against a small integer gold answer that none of them equals. Both runs grade the same
answers in this process on this machine:
- baseline: the Grader with the pre-check turned off (every hostile answer goes to math-verify and
  costs up to the timeout plus a restart of the worker); timed on a random sample of
  `--baseline-sample` answers and extrapolated per answer, because the whole set takes hours;
- pre-check: the Grader as shipped, on every answer.
Of the `--n` answers, `--slipping` are of a kind the pre-check lets through (`(x+y+z)^{60..100}`,
sympy expands it for longer than any deadline): they show what the timeout still costs.
It prints the time of each, how each answer was decided, and checks that none was graded right.
"""
from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prm_annotate.grading import grader as grading  # noqa: E402
from prm_annotate.grading.grader import Grader  # noqa: E402


def hostile_answers(n: int, slipping: int = 0, seed: int = 0) -> list[str]:
    rng = random.Random(seed)

    def tower() -> str:
        height = rng.randint(3, 6)
        text = str(rng.randint(2, 99))
        for _ in range(height - 1):
            text = f"{rng.randint(2, 99)}^{{{text}}}"
        return text

    kinds = [
        tower,
        lambda: f"{rng.randint(2, 999)}^{{{rng.randint(10**7, 10**12)}}}",
        lambda: f"{rng.randint(10**6, 10**9)}!",
        lambda: f"(10^{{{rng.randint(6, 12)}}})! + {rng.randint(1, 999)}",
        lambda: f"\\binom{{10^{{{rng.randint(6, 12)}}}}}{{{rng.randint(10**4, 10**6)}}}",
        lambda: "\\frac{1}{" * (d := rng.randint(13, 60)) + str(rng.randint(2, 9)) + "}" * d,
        lambda: "{" * (d := rng.randint(13, 60)) + str(rng.randint(2, 9)) + "}" * d,
        lambda: "(" * (d := rng.randint(13, 60)) + str(rng.randint(2, 9)) + ")" * d,
        lambda: "+".join(f"x^{{{i}}}" for i in range(rng.randint(200, 800))),
        lambda: f"(x+{rng.randint(1, 99)})^{{{rng.randint(1000, 10**6)}}}",
        lambda: f"(a+b+c+{rng.randint(1, 99)})^{{{rng.randint(101, 999)}}}",
        lambda: f"x^{{10^{{{rng.randint(7, 30)}}}}} + {rng.randint(1, 99)}",
        lambda: f"\\frac{{{rng.randint(1, 9)}}}{{10^{{10^{{{rng.randint(7, 30)}}}}}}}",
    ]
    out = [f"(x+y+z)^{{{e}}}" for e in rng.sample(range(60, 101), slipping)]
    seen: set[str] = set(out)
    while len(out) < n:
        text = rng.choice(kinds)()
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def grade(answers: list[str], golds: list[str], workers: int, timeout: float) -> tuple[list, float]:
    with Grader(timeout=timeout, workers=workers) as g:
        g.start()  # worker start-up is not what is measured
        start = time.perf_counter()
        verdicts = g.grade_many([(gold, f"The answer is \\boxed{{{a}}}.") for gold, a in zip(golds, answers)])
        return verdicts, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=grading.DEFAULT_TIMEOUT)
    ap.add_argument("--baseline-sample", type=int, default=12)
    ap.add_argument("--slipping", type=int, default=20)
    args = ap.parse_args()

    answers = hostile_answers(args.n, args.slipping)
    random.Random(2).shuffle(answers)
    golds = [str(random.Random(i).randint(1, 99)) for i in range(args.n)]

    verdicts, ours = grade(answers, golds, args.workers, args.timeout)
    how = Counter(re.sub(r"\d+", "N", v.error) if v.error else f"decided: correct={v.correct}" for v in verdicts)
    right = [a for a, v in zip(answers, verdicts) if v.correct]

    sample = random.Random(1).sample(range(args.n), min(args.baseline_sample, args.n))
    real = grading.too_costly
    grading.too_costly = lambda _answer: None  # the baseline: every answer goes to math-verify
    try:
        base_verdicts, base = grade([answers[i] for i in sample], [golds[i] for i in sample], args.workers, args.timeout)
    finally:
        grading.too_costly = real
    per_answer = base / len(sample)

    print(f"{args.n} hostile answers, {args.workers} workers, timeout {args.timeout:g} s")
    print(f"  baseline (no pre-check): {per_answer:.2f} s per answer on a sample of {len(sample)} "
          f"({Counter(v.error for v in base_verdicts)}) -> {per_answer * args.n / 60:.1f} min for {args.n}")
    print(f"  with the pre-check:      {ours:.1f} s for all {args.n} ({ours / 60:.2f} min), "
          f"{per_answer * args.n / max(ours, 1e-9):.0f}x faster")
    for reason, count in how.most_common():
        print(f"    {count:5d}  {reason}")
    print(f"  graded right by accident: {len(right)}" + (f" {right[:5]}" if right else ""))
    if right:
        sys.exit(1)


if __name__ == "__main__":
    main()
