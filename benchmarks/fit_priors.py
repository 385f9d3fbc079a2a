"""Measure the fixed values of the zero rule and of adaptive-binary on exhaustive rollouts.

The beta-binomial zero rule's prior (prm_annotate/strategies/zero_rules.py):
Reads an exhaustive rollouts file (every step's K completions) and, optionally, the judged file of
the same responses; fits Beta(a, b) by maximum likelihood to the right-of-K counts of three sets of
steps: every rolled-out step, the judge's first error j (the steps verify confirms), and step j-1.
For each fit and tolerance it prints the failures after which the rule calls a fresh step 0, and
how many of the steps the rule would stop are 1 among the K (its label flips, expected counts).
Adaptive-binary's prior and cost (prm_annotate/strategies/adaptive_binary.py): the share of
wrong-answer responses whose MC first error is the last step (the answer itself), where the
others' first errors sit, and the completions a step with label 1 costs with early stopping
(a step with r right of K finds its first right one at (K + 1) / (r + 1) on average).

    .venv/bin/python benchmarks/fit_priors.py ROLLOUTS [JUDGED]

The shipped values were measured on seed 1 of the world (`bench_rollout_strategies.py --consensus-only
--seed 1 --roads "exhaustive + judge"` writes both files), not on the benchmark's seed 0.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prm_annotate.strategies.zero_rules import BetaBinomial, log_beta  # noqa: E402


def read(path: str) -> list[dict]:
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]


def log_likelihood(counts: list[tuple[int, int]], a: float, b: float) -> float:
    return sum(math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1) + log_beta(r + a, n - r + b)
               - log_beta(a, b) for r, n in counts)


def fit(counts: list[tuple[int, int]]) -> tuple[float, float]:
    """Maximum likelihood by a coarse-to-fine grid on (log a, log b)."""
    best, centre, width = None, (0.0, 0.0), 3.0
    for _ in range(8):
        grid = [centre[0] + width * (i / 10 - 1) for i in range(21)], [centre[1] + width * (i / 10 - 1) for i in range(21)]
        for la in grid[0]:
            for lb in grid[1]:
                ll = log_likelihood(counts, math.exp(la), math.exp(lb))
                if best is None or ll > best[0]:
                    best = (ll, la, lb)
        centre, width = (best[1], best[2]), width / 4
    return round(math.exp(best[1]), 2), round(math.exp(best[2]), 2)


def flipped(counts: list[tuple[int, int]], failures: int) -> tuple[float, float]:
    """Of the steps whose first `failures` completions would all fail, how many are 1 among the K
    (the rule calls them 0, all-k 1): expected counts, since completions are exchangeable, a step
    with r right of K fails its first f with chance C(K-r, f) / C(K, f)."""
    stopped = flips = 0.0
    for r, n in counts:
        p = math.comb(n - r, failures) / math.comb(n, failures)
        stopped += p
        flips += p * (r > 0)
    return stopped, flips


def main() -> None:
    rows = read(sys.argv[1])
    judged = {r["id"]: r["judge"]["first_error"] for r in read(sys.argv[2])} if len(sys.argv) > 2 else {}
    k = rows[0]["mc"]["k"]
    sets: dict[str, list[tuple[int, int]]] = {"every rolled-out step": [], "the judge's j": [], "step j-1": []}
    for r in rows:
        scores = r["mc"]["scores"][:-1]  # the last step is the response's own answer
        sets["every rolled-out step"] += [(round(s * k), k) for s in scores]
        j = judged.get(r["id"])
        if j is not None and 0 <= j < len(scores):
            sets["the judge's j"].append((round(scores[j] * k), k))
        if j is not None and 1 <= j <= len(scores):
            sets["step j-1"].append((round(scores[j - 1] * k), k))
    print(f"{len(rows)} responses, K={k}")
    tolerances = (0.01, 0.05, 0.1, 0.2)
    print(f"| steps | n | 0 of K | a | b | failures for a 0 at tolerance {' / '.join(map(str, tolerances))} "
          "| stopped 0 that are 1 of K, at each |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name, counts in sets.items():
        if not counts:
            continue
        a, b = fit(counts)
        zeros = sum(r == 0 for r, _ in counts) / len(counts)
        n_star = [BetaBinomial(a=a, b=b, tolerance=t).failures_for_zero(k) for t in tolerances]
        shares = []
        for f in n_star:
            stopped, flips = flipped(counts, f)
            shares.append(f"{100 * flips / max(stopped, 1e-9):.1f}%")
        print(f"| {name} | {len(counts):,} | {100 * zeros:.1f}% | {a} | {b} | {' / '.join(map(str, n_star))} "
              f"| {' / '.join(shares)} |")
    wrong = [r for r in rows if not r["mc"]["last_correct"]]
    last = sum(r["mc"]["first_error"] == len(r["steps"]) - 1 for r in wrong)
    earlier = [r["mc"]["first_error"] / max(1, len(r["steps"]) - 2) for r in wrong
               if 0 <= r["mc"]["first_error"] < len(r["steps"]) - 1 and len(r["steps"]) > 2]
    thirds = [sum(1 for x in earlier if lo <= x < hi) for lo, hi in ((0, 1 / 3), (1 / 3, 2 / 3), (2 / 3, 1.01))]
    ones = [(k + 1) / (r + 1) for r, _ in sets["every rolled-out step"] if r > 0]
    share = last / max(1, len(wrong))
    print(f"\nwrong-answer responses: {len(wrong)}; MC first error at the last step: {last} ({100 * share:.1f}%, "
          f"standard error {100 * math.sqrt(share * (1 - share) / max(1, len(wrong))):.1f}); the others' "
          f"first errors by position among the steps before the last (first / middle / last third): "
          f"{' / '.join(map(str, thirds))}")
    print(f"completions a step with label 1 costs with early stopping: {sum(ones) / max(1, len(ones)):.2f} "
          f"on average over {len(ones):,} such steps")


if __name__ == "__main__":
    main()
