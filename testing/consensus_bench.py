"""The strategy benchmark's consensus section: what does the consensus set cost, road by road?

A road is the stages that make the consensus set from sampled responses. The paper's order rolls
out first and judges beside it (sample -> rollout -> judge -> consensus: `exhaustive + judge`,
`binary +share + judge`); the cheap road judges first and rolls out only where MC decides the vote
(sample -> judge -> rollout --strategy verify --judged -> consensus). Every road runs on the same
responses and the same judged file (judged once: its tokens and wall time are every road's), with
the real stages, files and `consensus`:

    judged, judge_cost = judge_responses(judge_engine, responses, workdir)
    rows = [run_road(policy_engine, responses, judged, road, ...) for road in ROADS]
    score_roads(rows, gold_path); print(format_roads(rows, judge_cost))

Costs: generated tokens of the rollouts (as the strategy table counts them: with speculation the
guesses never used too) and of the judge; per kept response; weighted by the parameter count of the
model that generates them (the paper's: a 7B completer, a 72B judge); compute by the bill
(engines/bill.py: prefill + decode tokens of each stage x the paper's size of its model); wall time.
Quality: the kept share, the kept step labels equal to the truth, ProcessBench F1 on the kept
responses, and the kept set against exhaustive's (the same responses kept?). The floor row
(`floor_row`, testing/verify_floor.py): what `judge + verify` needs with foresight of exhaustive's
own completions, and every road's rollout tokens as a multiple of it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson

from prm_annotate.engines.base import Engine
from prm_annotate.engines.bill import Bill
from prm_annotate.engines.defaults import SPECULATE_IN_PROCESS
from prm_annotate.pipeline.runner import RunOptions, run_stage
from prm_annotate.stages.rollout import RolloutStage
from prm_annotate.steps import DEFAULT_SEP
from prm_annotate.strategies import Strategy
from prm_annotate.strategies.adaptive_binary import AdaptiveBinary
from prm_annotate.strategies.binary import Binary
from prm_annotate.strategies.exhaustive import Exhaustive
from prm_annotate.strategies.verify import OUTCOMES, Verify
from testing.rollout_bench import SYSTEM_PROMPT, reset_prefix_cache

# The paper's models: Qwen2.5-Math-7B-Instruct completes, Qwen2.5-72B-Instruct judges.
COMPLETER_B, JUDGE_B = 7, 72
COMPLETER_PARAMS, JUDGE_PARAMS = COMPLETER_B * 10**9, JUDGE_B * 10**9


@dataclass(frozen=True)
class Road:
    label: str
    make: Callable[[], Strategy]
    share_prefixes: bool = False
    zero_rule: str = "all-k"  # rollout --zero-rule
    zero_tolerance: float | None = None


BB = "beta-binomial"
ROADS = (
    Road("exhaustive + judge", Exhaustive),
    Road("binary +share + judge", Binary, True),
    Road("adaptive-binary +share + judge", AdaptiveBinary, True),
    Road("judge + verify", Verify),
    Road("judge + verify +share", Verify, True),
    Road("judge + verify +share, right answers unprobed", lambda: Verify(probe_right_answers=False), True),
    Road(f"binary +share --zero-rule {BB} + judge", Binary, True, BB),
    Road(f"judge + verify --zero-rule {BB}", Verify, zero_rule=BB),
    Road(f"judge + verify +share --zero-rule {BB}", Verify, True, BB),
    Road(f"judge + verify +share --zero-rule {BB} --zero-tolerance 0.1", Verify, True, BB, 0.1),
)
# The roads the targets are checked for (the default K=8 road first).
TARGET_ROADS = ("judge + verify +share", f"judge + verify +share --zero-rule {BB}",
                f"judge + verify +share --zero-rule {BB} --zero-tolerance 0.1")


@dataclass
class Cost:
    tokens: int
    wall: float
    bill: Bill | None = None  # engines/bill.py, at the paper's size of the stage's model


@dataclass
class RoadRow:
    label: str
    rollout: Cost
    kept: dict[str, list[bool]]  # id -> the kept step labels
    responses: int
    outcomes: dict[str, int] = field(default_factory=dict)  # verify: mc.verified counts
    quality: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def judge_responses(engine: Engine, responses_path: Path, judged_path: Path, *, prompt: str, max_tokens: int,
                    seed: int = 0, constrained: bool = False, window: int = 1024) -> Cost:
    """Judge every response once, through the real runner; what it cost."""
    from prm_annotate.stages.judge import JudgeStage

    stage = JudgeStage(engine, prompt=prompt, max_tokens=max_tokens, seed=seed, constrained=constrained)
    reset_prefix_cache(engine)
    started = time.perf_counter()
    try:
        run_stage(stage, RunOptions(str(responses_path), str(judged_path), batch_size=window, quiet=True))
    finally:
        stage.close()
    wall = time.perf_counter() - started
    return Cost(sum(r["judge"].get("generated_tokens", 0) for r in read_jsonl(judged_path)), wall,
                Bill.of(stage.stats, JUDGE_PARAMS, "given"))


def run_road(engine: Engine, responses_path: Path, judged_path: Path, road: Road, workdir: Path, *, k: int,
             max_tokens: int, window: int, seed: int = 0, step_sep: str = DEFAULT_SEP,
             speculate: int = SPECULATE_IN_PROCESS, system_prompt: str = SYSTEM_PROMPT,
             keep_completions: int = 0) -> RoadRow:
    """One road's rollouts (timed) and its consensus, as files in `workdir`. `keep_completions`:
    rollout's `--keep-completions` (K on the exhaustive road: the floor reads them)."""
    from prm_annotate.stages.consensus import run_consensus

    strategy = road.make()
    name = road.label.replace(" ", "_").replace(",", "").replace("+", "")
    rollouts, consensus = workdir / f"{name}.rollouts.jsonl", workdir / f"{name}.consensus.jsonl"
    for path in (rollouts, consensus):
        path.unlink(missing_ok=True)
    stage = RolloutStage(engine, k=k, strategy=strategy, max_tokens=max_tokens, seed=seed, temperature=0.7,
                         share_prefixes=road.share_prefixes, step_sep=step_sep, system_prompt=system_prompt,
                         judged=str(judged_path) if strategy.needs_judged else None, zero_rule=road.zero_rule,
                         zero_tolerance=road.zero_tolerance, keep_completions=keep_completions)
    stage.speculate = speculate
    reset_prefix_cache(engine)
    started = time.perf_counter()
    try:
        run = run_stage(stage, RunOptions(str(responses_path), str(rollouts), batch_size=window, quiet=True))
    finally:
        stage.close()
    wall = time.perf_counter() - started
    if run.failed:
        raise RuntimeError(f"{road.label}: {run.failed} records failed: {list(run.failures.items())[:3]}")
    tokens = stage.stats["generated_tokens"] + stage.stats["ahead_unused_tokens"]
    run_consensus(str(rollouts), str(judged_path), str(consensus), quiet=True)
    kept = {r["id"]: r["labels"] for r in read_jsonl(consensus)}
    outcomes = {o: stage.stats[f"verified: {o}"] for o in OUTCOMES} if strategy.needs_judged else {}
    return RoadRow(road.label, Cost(tokens, wall, Bill.of(stage.stats, COMPLETER_PARAMS, "given")), kept, run.read,
                   outcomes,
                   extra={"rollouts": str(rollouts), "consensus": str(consensus),
                          "completions": stage.stats["engine_completions"], "rounds": stage.stats["rounds"],
                          "unused": stage.stats["ahead_unused_tokens"]})


def score_roads(rows: list[RoadRow], gold_path: Path | None) -> None:
    """Each road's kept set against the truth (when there is one) and against the first road's."""
    from prm_annotate.evaluation.label_sets import read_gold
    from prm_annotate.reports.compare import Source, compare_sources

    gold = read_gold([(str(gold_path), None)]) if gold_path is not None else None
    base = set(rows[0].kept)
    for row in rows:
        ids = set(row.kept)
        row.quality["same_as_first"] = len(ids & base)
        row.quality["only_here"] = len(ids - base)
        row.quality["only_first"] = len(base - ids)
        if gold is None:
            continue
        source = Source.read(row.label, row.extra["consensus"], "first_error", gold)
        report = compare_sources([source], gold)["sources"][row.label]
        row.quality["step_precision"] = report["step_label_precision"]
        row.quality["steps_compared"] = report["step_labels_compared"]
        row.quality["f1_kept"] = report["kept"]["overall"]["f1"]
        row.quality["error_acc"] = report["kept"]["overall"]["error_acc"]
        row.quality["correct_acc"] = report["kept"]["overall"]["correct_acc"]


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


FLOOR_LABEL = "floor of judge + verify (foresight of exhaustive's completions)"


def road_compute(r: RoadRow, judge: Cost) -> float | None:
    """The road's compute by the bill at the paper's sizes: its rollouts' (prefill + decode) x 7B plus
    the judge's (prefill + decode) x 72B, in billion-parameter-tokens."""
    if r.rollout.bill is None or judge.bill is None:
        return None
    return r.rollout.bill.compute + judge.bill.compute


def floor_row(floor: Any, rows: list[RoadRow], twin: str = "judge + verify") -> RoadRow:
    """The floor (testing/verify_floor.py) as a row: its tokens and compute; kept and quality are
    `twin`'s (the road without sharing on the same seeds: with foresight it keeps exactly what that
    road keeps, since every probed step's label is the same)."""
    base = {r.label: r for r in rows}[twin]
    bill = Bill(requests=floor.completions, prompt_tokens=floor.prefill_tokens, decode_tokens=floor.decode_tokens,
                params=COMPLETER_PARAMS, params_from="given")
    return RoadRow(FLOOR_LABEL, Cost(floor.decode_tokens, float("nan"), bill), base.kept, base.responses,
                   quality=dict(base.quality), extra={"completions": floor.completions, "floor": True})


def format_roads(rows: list[RoadRow], judge: Cost, floor: RoadRow | None = None) -> str:
    """Costs and quality per road (Markdown), ratios to the first road (exhaustive + judge); with
    `floor`, its row last and every row's rollout tokens as a multiple of the floor's."""
    base = rows[0]
    lines = ["| road | rollout tokens | x fewer | judge tokens | tokens per kept | 7B/72B-weighted per kept (B-param-tokens) "
             "| x fewer | compute, bill at 7B/72B (B-param-tokens) | x less | rollout tokens / floor's "
             "| rollout wall s | x faster | wall s incl. judge | kept | kept step labels = truth | F1 on kept "
             "| kept = exhaustive's (both / only this / only exhaustive's) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def weighted(r: RoadRow) -> float:
        return (COMPLETER_B * r.rollout.tokens + JUDGE_B * judge.tokens) / max(1, len(r.kept))

    base_compute = road_compute(base, judge)
    for r in rows + ([floor] if floor is not None else []):
        q = r.quality
        kept = len(r.kept)
        steps = f" ({q['steps_compared']:,})" if "steps_compared" in q else ""
        compute = road_compute(r, judge)
        less = "-" if compute is None or base_compute is None else f"{base_compute / max(1e-9, compute):.2f}"
        to_floor = "-" if floor is None else f"{r.rollout.tokens / max(1, floor.rollout.tokens):.2f}"
        if r is floor:
            wall = "- | - | -"
        else:
            wall = (f"{r.rollout.wall:.1f} | {base.rollout.wall / max(1e-9, r.rollout.wall):.2f} | "
                    f"{r.rollout.wall + judge.wall:.1f}")
        lines.append(
            f"| {r.label} | {r.rollout.tokens:,} | {base.rollout.tokens / max(1, r.rollout.tokens):.2f} | "
            f"{judge.tokens:,} | {(r.rollout.tokens + judge.tokens) / max(1, kept):,.0f} | {weighted(r):,.0f} | "
            f"{weighted(base) / max(1e-9, weighted(r)):.2f} | {_f(compute, ',.0f')} | {less} | {to_floor} | {wall} | "
            f"{kept} ({100.0 * kept / r.responses:.1f}%) | "
            f"{_f(q.get('step_precision'))}{steps} | "
            f"{_f(q.get('f1_kept'))} | {q['same_as_first']} / {q['only_here']} / {q['only_first']} |")
    return "\n".join(lines)


def format_outcomes(rows: list[RoadRow]) -> str:
    """What verify found of the judge's claims, per verify road (Markdown)."""
    shown = [r for r in rows if r.outcomes]
    lines = ["| road | " + " | ".join(OUTCOMES) + " |", "|---|" + "---:|" * len(OUTCOMES)]
    for r in shown:
        lines.append(f"| {r.label} | " + " | ".join(f"{r.outcomes[o]:,}" for o in OUTCOMES) + " |")
    return "\n".join(lines)


def check_targets(rows: list[RoadRow], road: str = "judge + verify +share") -> list[tuple[str, bool]]:
    """The issue's targets for the verify road against exhaustive + judge."""
    by = {r.label: r for r in rows}
    if road not in by:
        return []
    ex, v = rows[0], by[road]
    tokens = ex.rollout.tokens / max(1, v.rollout.tokens)
    wall = ex.rollout.wall / max(1e-9, v.rollout.wall)
    out = [(f"{road}: rollout tokens >= 10x fewer than exhaustive's (aim 16x): x{tokens:.2f}", tokens >= 10),
           (f"{road}: rollout wall ratio >= 0.8 x its token ratio: x{wall:.2f} vs 0.8 x {tokens:.2f} = "
            f"{0.8 * tokens:.2f}", wall >= 0.8 * tokens)]
    ep, vp = ex.quality.get("step_precision"), v.quality.get("step_precision")
    if ep is not None and vp is not None:
        out.append((f"{road}: kept step labels = truth within 0.5 points of exhaustive's consensus or better: "
                    f"{vp:.1f} vs {ep:.1f}", vp >= ep - 0.5))
    ek, vk = 100.0 * len(ex.kept) / ex.responses, 100.0 * len(v.kept) / v.responses
    out.append((f"{road}: kept share within 3 points of exhaustive's: {vk:.1f}% vs {ek:.1f}%", abs(vk - ek) <= 3))
    if "judge + verify" in by and road == TARGET_ROADS[0]:
        # With the same seeds and no witnesses, verify sees exhaustive's labels at j-1 and j, so it
        # confirms every claim exhaustive's consensus keeps (and more where a step before j-1 is 0).
        plain = by["judge + verify"]
        out.append((f"judge + verify keeps every response exhaustive's consensus keeps (same seeds): "
                    f"{plain.quality['only_first']} kept by exhaustive only", plain.quality["only_first"] == 0))
    return out


def check_floor(rows: list[RoadRow], floor: RoadRow | None, road: str = "judge + verify",
                within: float = 1.2) -> list[tuple[str, bool]]:
    """Issue 48's target: the verify road's rollout tokens within 1.2x of its foresight floor."""
    by = {r.label: r for r in rows}
    if floor is None or road not in by:
        return []
    ratio = by[road].rollout.tokens / max(1, floor.rollout.tokens)
    return [(f"{road}: rollout tokens within {within:g}x of its floor: {ratio:.2f}x", ratio <= within)]


def format_targets(rows: list[RoadRow], roads: tuple[str, ...] = TARGET_ROADS, floor: RoadRow | None = None) -> str:
    checks = [c for road in roads for c in check_targets(rows, road)] + check_floor(rows, floor)
    return "\n".join(f"- [{'met' if ok else 'NOT met'}] {text}" for text, ok in checks)
