"""The rollout-strategy benchmark: every strategy on the same responses, the same engine and the
same seeds, in one run; costs and label quality as ratios to exhaustive.

    responses = sample_responses(engine, problems, n=4, ...)
    rows = compare_strategies(engine, responses, variants(), k=8, truth=...)
    print(format_table(rows))

Cost is what the engine did (generated tokens, completions, wall time, and the engine's busy
share). Lock-step rows run the same strategy in lock-step batches (testing/lockstep.py), as the baseline. Agreement is
`first_error` equal to exhaustive's with the same seed scheme (per-response seeds, or prefix
seeds when prefixes are shared: a different but equally valid sample). Accuracy is `first_error`
equal to the true first error, where the workload has one (the arithmetic world).
Used by benchmarks/bench_rollout_strategies.py.
"""
from __future__ import annotations

import time
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from prm_annotate.engines.base import Engine
from prm_annotate.engines.defaults import SPECULATE_IN_PROCESS
from prm_annotate.engines.vllm_engine import VLLMEngine
from prm_annotate.records import Problem
from prm_annotate.stages.rollout import RolloutInput, RolloutStage
from prm_annotate.stages.sample import SampleStage
from prm_annotate.steps import DEFAULT_SEP
from prm_annotate.strategies import STRATEGIES, Strategy
from prm_annotate.strategies.scan import Scan
from testing import lockstep as lockstep_driver


@dataclass(frozen=True)
class Variant:
    label: str
    make: Callable[[], Strategy]
    share_prefixes: bool = False
    # The baseline: batches of `window` records in lock-step rounds (testing/lockstep.py).
    lockstep: bool = False
    # rollout --speculate: start probes ahead while fewer than this many requests are in flight
    # (and no new record can start).
    speculate: int = SPECULATE_IN_PROCESS
    zero_rule: str = "all-k"  # rollout --zero-rule


def with_zero_rule(variant: Variant, rule: str) -> Variant:
    return dataclasses.replace(variant, label=f"{variant.label} --zero-rule {rule}", zero_rule=rule)


def lockstep(variant: Variant) -> Variant:
    return Variant(f"{variant.label} (lock-step)", variant.make, variant.share_prefixes, True, speculate=0)


def without_speculation(variant: Variant) -> Variant:
    return Variant(f"{variant.label} --speculate 0", variant.make, variant.share_prefixes, speculate=0)


def variants(shared: bool = True, speculate: int = SPECULATE_IN_PROCESS) -> list[Variant]:
    """Every registered strategy, the baseline (exhaustive, the registry's first) first; every row
    as `rollout` runs it in process (`--speculate` 256 unless given). `binary`/`scan` trust a
    correct final answer (the monotonic assumption); the `verify` variant probes correct
    responses too (see docs/rollout-strategies.md)."""
    # The MC-only road: verify checks a judge's verdicts (the consensus section measures it).
    strategies: list[tuple[str, Callable[[], Strategy]]] = [(n, s) for n, s in STRATEGIES.items()
                                                            if not s.needs_judged]
    strategies.append(("scan verify", lambda: Scan(trust_correct=False)))
    out = [Variant(label, make, speculate=speculate) for label, make in strategies]
    if shared:
        # Not "scan verify": with sharing a correct response's own prefixes are witnesses, so it
        # is scan exactly.
        out += [Variant(f"{v.label} +share", v.make, True, speculate=speculate) for v in list(out)
                if v.label != "scan verify"]
    return out


@dataclass
class Row:
    label: str
    share_prefixes: bool
    generated_tokens: int
    completions: int
    wall: float
    first_errors: dict[str, int]
    busy: float  # the engine's busy share: time with requests in flight / the stage's wall time
    in_flight: float = 0.0  # requests in flight, on average over the stage's wall time
    agree: float | None = None  # with exhaustive of the same seed scheme
    accuracy: float | None = None  # vs the true first error
    accuracy_correct: float | None = None  # on responses with a right final answer
    accuracy_wrong: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def reset_prefix_cache(engine: Engine) -> None:
    """Make vLLM forget every cached prompt prefix (nothing for another engine); the product has
    no use for it, so this reaches into the engine's `LLM`."""
    if isinstance(engine, VLLMEngine) and not engine._llm.reset_prefix_cache():
        raise RuntimeError("vLLM did not clear its prefix cache (requests in flight?)")


# The benchmarks' policies (the arithmetic world's, SmolLM2) are prompted for one paragraph per step.
SYSTEM_PROMPT = "step"


def sample_responses(engine: Engine, problems: list[dict], *, n: int, temperature: float = 0.7,
                     max_tokens: int = 256, seed: int = 0, step_sep: str = DEFAULT_SEP) -> list[dict]:
    stage = SampleStage(engine, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed, step_sep=step_sep,
                        system_prompt=SYSTEM_PROMPT)
    try:
        out = []
        for outcome in stage.process([Problem.model_validate(p) for p in problems]):
            if outcome.error is None:
                out.extend(r.dump() for r in outcome.records)
        return out
    finally:
        stage.close()


def run_variant(engine: Engine, responses: list[dict], variant: Variant, *, k: int, max_tokens: int,
                window: int, seed: int = 0, temperature: float = 0.7, step_sep: str = DEFAULT_SEP) -> Row:
    """One rollout run over all responses, as the runner streams them: at most `window` records
    in flight (lock-step: batches of `window`)."""
    stage = RolloutStage(engine, k=k, strategy=variant.make(), max_tokens=max_tokens, seed=seed,
                         temperature=temperature, share_prefixes=variant.share_prefixes, step_sep=step_sep,
                         system_prompt=SYSTEM_PROMPT, zero_rule=variant.zero_rule)
    stage.speculate = variant.speculate
    records = [RolloutInput.model_validate(r) for r in responses]
    first_errors: dict[str, int] = {}
    # Every row starts with a cold prefix cache, not the last row's.
    reset_prefix_cache(engine)
    started = time.perf_counter()
    try:
        runs = (lockstep_driver.stream(stage, iter(records), window) if variant.lockstep
                else stage.stream(iter(records), window))
        for outcomes in runs:
            for outcome in outcomes:
                if outcome.error is not None:
                    raise RuntimeError(f"{outcome.id}: {outcome.error}")
                first_errors[outcome.id] = outcome.records[0].mc.first_error
    finally:
        stage.close()
    wall = time.perf_counter() - started
    # What the engine generated: with speculation also the completions started ahead and never used.
    return Row(variant.label, variant.share_prefixes, stage.stats["generated_tokens"] + stage.stats["ahead_unused_tokens"],
               stage.stats["engine_completions"], wall, first_errors,
               busy=stage.stats["engine_busy_ms"] / max(1, stage.stats["scheduler_ms"]),
               in_flight=stage.stats["requests_in_flight_ms"] / max(1, stage.stats["scheduler_ms"]),
               extra={"rounds": stage.stats["rounds"], "records_completions": stage.stats["completions"],
                      "ahead": {k: stage.stats[k] for k in ("ahead_started", "ahead_used", "ahead_cancelled", "ahead_dropped", "ahead_budget_max")}})


def score_rows(rows: list[Row], responses: list[dict], truth: Callable[[dict], int] | None) -> None:
    """Fill agreement (with the exhaustive row of the same seed scheme) and accuracy vs truth."""
    reference = {r.share_prefixes: r for r in rows if r.label.split()[0] == "exhaustive"}
    by_id = {r["id"]: r for r in responses}
    gold = {rid: truth(rec) for rid, rec in by_id.items()} if truth else None
    for row in rows:
        ref = reference.get(row.share_prefixes)
        if ref is not None:
            row.agree = sum(row.first_errors[i] == ref.first_errors[i] for i in by_id) / len(by_id)
        if gold is not None:
            def acc(ids: list[str]) -> float | None:
                return sum(row.first_errors[i] == gold[i] for i in ids) / len(ids) if ids else None

            row.accuracy = acc(list(by_id))
            row.accuracy_correct = acc([i for i, r in by_id.items() if r.get("correct")])
            row.accuracy_wrong = acc([i for i, r in by_id.items() if not r.get("correct")])


def compare_strategies(engine: Engine, responses: list[dict], chosen: list[Variant], *, k: int,
                       max_tokens: int, window: int, truth: Callable[[dict], int] | None = None,
                       seed: int = 0, progress: Callable[[str], None] | None = None,
                       step_sep: str = DEFAULT_SEP, repeats: int = 1) -> list[Row]:
    """Every variant `repeats` times, in turns (so a slow spell of the machine hits all of them
    alike); each row is the variant's fastest run. Repeats give the same records (same seeds):
    checked."""
    best: dict[str, Row] = {}
    for turn in range(repeats):
        for variant in chosen:
            row = run_variant(engine, responses, variant, k=k, max_tokens=max_tokens, window=window,
                              seed=seed, step_sep=step_sep)
            if progress:
                progress(f"{variant.label} (run {turn + 1}/{repeats}): {row.generated_tokens:,} tokens, "
                         f"{row.completions:,} completions, {row.wall:.1f} s, engine busy {row.busy:.0%}, "
                         f"{row.in_flight:,.0f} requests in flight on average")
            seen = best.get(variant.label)
            if seen is not None and seen.first_errors != row.first_errors:
                raise RuntimeError(f"{variant.label}: a repeat gave other labels")
            if seen is None or row.wall < seen.wall:
                best[variant.label] = row
    rows = [best[v.label] for v in chosen]
    score_rows(rows, responses, truth)
    return rows


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def format_table(rows: list[Row]) -> str:
    """A Markdown table; costs also as ratios to the first (exhaustive) row."""
    base = rows[0]
    lines = ["| strategy | generated tokens | x fewer | completions | x fewer | wall s | x faster | engine busy | "
             "mean in flight | guesses used/started (budget) | agree w/ exhaustive | acc vs truth | acc (right answer) | "
             "acc (wrong answer) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ahead = r.extra.get("ahead") or {}
        guesses = (f"{ahead['ahead_used']:,}/{ahead['ahead_started']:,} ({ahead['ahead_budget_max']:,})"
                   if ahead.get("ahead_started") else "-")
        lines.append(
            f"| {r.label} | {r.generated_tokens:,} | {base.generated_tokens / max(1, r.generated_tokens):.2f} | "
            f"{r.completions:,} | {base.completions / max(1, r.completions):.2f} | {r.wall:.1f} | "
            f"{base.wall / max(1e-9, r.wall):.2f} | {r.busy:.0%} | {r.in_flight:,.0f} | {guesses} | {_pct(r.agree)} | {_pct(r.accuracy)} | "
            f"{_pct(r.accuracy_correct)} | {_pct(r.accuracy_wrong)} |")
    return "\n".join(lines)


# Identical runs differ by several % on this shared machine: "no slower" allows this much.
NOISE = 0.05


def check_targets(rows: list[Row], *, adaptive_faster: bool = True) -> list[tuple[str, bool | None]]:
    """The scheduler's targets (docs/rollout-strategies.md), each as (statement with the figures, met?), or None
    for a row shown for information: the `--speculate 0` rows are not how `rollout` runs.
    `adaptive_faster`: every adaptive strategy must be faster than exhaustive (the arithmetic
    world); False where the target is no slower (SmolLM2, which gets nearly every step wrong, so
    that early-stop must sample all that exhaustive does)."""
    by = {r.label: r for r in rows}
    ex = by["exhaustive"]
    out: list[tuple[str, bool | None]] = []
    if "exhaustive (lock-step)" in by:
        lock = by["exhaustive (lock-step)"]
        # With a window as large as the workload, exhaustive is one round in either mode: the same
        # work, so the two differ only by the machine's noise.
        out.append((f"exhaustive no slower than lock-step ({NOISE:.0%} for noise): {ex.wall:.1f} s vs "
                    f"{lock.wall:.1f} s", ex.wall <= (1 + NOISE) * lock.wall))
    out.append((f"exhaustive keeps the engine busy >= 90%: {ex.busy:.0%}", ex.busy >= 0.9))
    for r in rows:
        if r.label.startswith("exhaustive") or "lock-step" in r.label:
            continue
        speed = ex.wall / r.wall
        if "--speculate 0" in r.label:
            out.append((f"{r.label} vs exhaustive: x{speed:.2f}", None))
        elif adaptive_faster:
            out.append((f"{r.label} faster than exhaustive: x{speed:.2f}", r.wall < ex.wall))
        else:
            out.append((f"{r.label} no slower than exhaustive ({NOISE:.0%} for noise): x{speed:.2f}",
                        r.wall <= (1 + NOISE) * ex.wall))
    if "binary +share" in by:
        b = by["binary +share"]
        tokens, wall = ex.generated_tokens / max(1, b.generated_tokens), ex.wall / b.wall
        out.append((f"binary +share wall ratio >= 0.8 x its token ratio: x{wall:.2f} vs 0.8 x {tokens:.2f} = "
                    f"{0.8 * tokens:.2f}", wall >= 0.8 * tokens))
    for plain in ("binary", "binary +share", "binary +share --zero-rule beta-binomial"):
        adaptive = by.get(f"adaptive-{plain}")
        if plain in by and adaptive is not None:
            b = by[plain]
            out.append((f"adaptive-{plain} vs {plain}: x{b.generated_tokens / max(1, adaptive.generated_tokens):.2f} "
                        f"fewer tokens, x{b.completions / max(1, adaptive.completions):.2f} fewer completions, "
                        f"x{b.wall / adaptive.wall:.2f} wall", None))
    return out


def format_targets(rows: list[Row], *, adaptive_faster: bool = True) -> str:
    mark = {True: "met", False: "NOT met", None: "for information"}
    return "\n".join(f"- [{mark[ok]}] {text}" for text, ok in check_targets(rows, adaptive_faster=adaptive_faster))


def throughput_curve(engine: Engine, prompts: list[str], sizes: tuple[int, ...], max_tokens: int = 32) -> str:
    """Generated tokens/s of `engine` with N requests at once, for each N in `sizes`: why a
    strategy whose rounds hold few requests gains less wall time than tokens (a Markdown table)."""
    from prm_annotate.engines.base import GenerationRequest, Sampling

    lines = ["| requests at once | tokens/s | x of the largest |", "|---:|---:|---:|"]
    rates = []
    for size in sizes:
        requests = [GenerationRequest(key=f"{size}:{i}", messages=({"role": "user", "content": prompts[i % len(prompts)]},),
                                      sampling=Sampling(max_tokens=max_tokens, temperature=0.7, seed=i))
                    for i in range(size)]
        engine.generate(requests[:1])  # the prompt's prefix cache, as in a rollout
        started = time.perf_counter()
        results = engine.generate(requests)
        rates.append(sum(r.generated_tokens for r in results.values()) / (time.perf_counter() - started))
    for size, rate in zip(sizes, rates):
        lines.append(f"| {size} | {rate:,.0f} | {rate / rates[-1]:.2f} |")
    return "\n".join(lines)
