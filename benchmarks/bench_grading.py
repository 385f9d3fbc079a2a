"""Answer grading: agreement with reference verdicts, and throughput against plain math-verify.

    .venv/bin/python benchmarks/bench_grading.py [--timeout S] [--repeat N]

Agreement, on every verdict file of the repository (testing/verdict_files.py: the 2,147 ProcessBench
responses of tests/data/grading with human `final_answer_correct` -- GSM8K, MATH, OlympiadBench,
Omni-MATH --, the 4 x 100 GPT-3 GSM8K solutions of data/gsm8k with `is_correct`) and on
Math-Verify's published test pairs (tests/data/math_verify), for the Grader and for plain
math-verify on the whole response text, side by side: agreement, false accepts (graded right, the
reference says wrong: the costlier error for labels) and false rejects; then the olympiad-level
responses by split (development / held out, all and those that end without a box), and MATH's
level-5 and the olympiad-level solutions with their boxes taken off (testing/verdict_files.py,
`unboxed_math`, `olympiad_solutions`). Every
disagreement of the Grader is listed, except on the held-out split (only counted; --show-held-out
lists them too: not while rules are being written).
Throughput, on the verdict files' (gold, response) pairs, measured in this run: plain math-verify
(parse gold + parse response + verify, in-process, its timeouts off), the Grader cold (fresh
caches, worker already started) and the Grader again on the same pairs (verdict cache warm). Each
is timed --repeat times and the fastest run kept: on a shared machine the other runs measure the
neighbours.
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
sys.path.insert(0, str(ROOT / "tests"))

from prm_annotate.grading.answers import normalize_answer  # noqa: E402
from prm_annotate.grading.grader import Agreement, Grader  # noqa: E402
from testing.verdict_files import (  # noqa: E402
    OLYMPIAD, control, held_out, olympiad_solutions, olympiad_split, unboxed_math, verdict_files)

MATH_VERIFY_CASES = ROOT / "tests" / "data" / "math_verify" / "published_cases.jsonl"


def published_cases() -> list[tuple[str, str, str, bool]]:
    rows = [json.loads(line) for line in MATH_VERIFY_CASES.read_text().splitlines()]
    return [(r["source"], r["gold"], r["prediction"], r["expected"]) for r in rows]


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
    ap.add_argument("--repeat", type=int, default=3, help="time each pass N times, keep the fastest")
    ap.add_argument("--show-held-out", action="store_true",
                    help="list the disagreements on the held-out olympiad split too")
    args = ap.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    files = verdict_files()
    rows = [row for rows in files.values() for row in rows]
    olympiad_ids = {rid for sub in olympiad_split().values() for rid, *_ in sub}
    # Throughput on the GSM8K and MATH responses (as before the olympiad files came): plain
    # math-verify runs in this process without a timeout, and a few olympiad responses would hold
    # it for as long as sympy takes.
    timed_rows = [row for row in rows if row[0] not in olympiad_ids]
    pairs = [(gold, text) for _, gold, text, _ in timed_rows]

    # Harder mix first, while sympy's caches are cold in this process as in a fresh worker: the MATH
    # responses, where most comparisons need math-verify (worker round trips).
    plain_math_verify([("1", "$\\frac{1}{2}$")])  # compile math-verify's regexes, as the worker does
    math_pairs = [(gold, text) for rid, gold, text, _ in rows if rid.startswith("math")]
    _, t_plain_m = timed(plain_math_verify, math_pairs)
    with Grader(timeout=args.timeout) as g:
        g.start()
        _, t_cold_m = timed(g.grade_many, math_pairs)
        m_stats = dict(g.stats)

    _, t_plain = min((timed(plain_math_verify, pairs) for _ in range(args.repeat)), key=lambda r: r[1])

    t_cold = t_warm = float("inf")
    for run in range(args.repeat):  # a fresh Grader (worker started, caches empty) each time
        grader = Grader(timeout=args.timeout)
        _, t_start = timed(grader.start)
        normalize_answer.cache_clear()
        cold, t = timed(grader.grade_many, pairs)
        t_cold = min(t_cold, t)
        cold_stats = dict(grader.stats)
        warm, t = timed(grader.grade_many, pairs)
        t_warm = min(t_warm, t)
        assert cold == warm
        if run < args.repeat - 1:
            grader.close()

    # Agreement on every verdict file: the grader, and plain math-verify with the same worker and
    # timeouts (Grader.plain_many), as the tests compute it.
    every = [(gold, text) for _, gold, text, _ in rows]
    ours_all, plain_all = grader.grade_many(every), [v.correct for v in grader.plain_many(every)]
    by_id = {rid: (v, ref) for (rid, *_), v, ref in zip(rows, ours_all, plain_all)}

    def agreement(label: str, sub: list, show: bool = True, ours: list | None = None,
                  ref: list[bool | None] | None = None) -> None:
        flags = [flag for *_, flag in sub]
        ours = ours if ours is not None else [by_id[rid][0] for rid, *_ in sub]
        ref = ref if ref is not None else [by_id[rid][1] for rid, *_ in sub]
        print(f"{label} ({len(sub)} responses)")
        print(f"  grader            {Agreement.of([v.correct for v in ours], flags)}")
        print(f"  plain math-verify {Agreement.of(ref, flags)}")
        for v, (rid, gold, _, flag) in zip(ours, sub):
            hidden = rid in olympiad_ids and held_out(rid) and not args.show_held_out
            if show and v.correct != flag and not hidden:
                print(f"    disagree {rid}: gold={gold!r} extracted={v.final_answer!r} "
                      f"grader={v.correct} ({v.error}) reference={flag}")

    print("== agreement with reference verdicts (disagreements on the held-out split not listed)")
    for name, sub in files.items():
        agreement(name, sub)
    cases = published_cases()
    ours_cases = grader.grade_many([(gold, pred) for _, gold, pred, _ in cases])
    plain_cases = [v.correct for v in grader.plain_many([(gold, pred) for _, gold, pred, _ in cases])]
    agreement(f"{MATH_VERIFY_CASES.relative_to(ROOT)} (Math-Verify's published expectations)",
              cases, ours=ours_cases, ref=plain_cases)
    print("\n== olympiad-level responses (" + ", ".join(OLYMPIAD) + ") by split")
    for split, sub in olympiad_split().items():
        unboxed = [row for row in sub if "\\boxed" not in row[2] and "\\fbox" not in row[2]]
        agreement(split, sub, show=False)
        agreement(f"{split}, ending without a box", unboxed, show=False)
    print("\n== MATH level-5 and olympiad-level solutions with their boxes taken off (development sets), "
          "and the same texts against the next problem's gold")
    math_rows = unboxed_math()
    olympiad_rows = olympiad_solutions()
    for label, sub in (("unboxed MATH level 5", math_rows), ("control", control(math_rows)),
                       ("unboxed olympiad-level solutions (Omni-MATH-Rule, OlympiadBench)", olympiad_rows),
                       ("control", control(olympiad_rows))):
        pairs_b = [(gold, text) for _, gold, text, _ in sub]
        agreement(label, sub, show=False, ours=grader.grade_many(pairs_b),
                  ref=[v.correct for v in grader.plain_many(pairs_b)])
    grader.close()

    n = len(pairs)
    print(f"\n== throughput on the {n} GSM8K and MATH (gold, response) pairs")
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
