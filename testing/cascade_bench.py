"""The judge cascade's benchmark (issue 60, item 4): what does the consensus set cost, road by road,
when a cheap first judge decides what it is sure of? benchmarks/bench_cascade.py runs it.

Roads, on the same responses and seeds (the consensus section's, testing/consensus_bench.py):

    (a) exhaustive MC + the judge            the paper's pipeline
    (b) the judge + verify                   the cheap road (rollout --strategy verify --judged)
    (c) the first judge alone + verify       its verdicts as the judged file (a cascade escalating 0%)
    (d) the cascade + verify                 `judge --escalate-from FIRST --budget X%`, several X: a frontier
    (e) the first judge is a PRM             `train --head likelihood` on prm-base, from the seed slice's
                                             consensus labels; `score` reads the bulk in one forward pass

The first judge learns only from the pipeline's own seed slice (other problems, judged by the big
judge and verified by MC, then `export --format trl` -> `train`): its labels, its compute and its
training (3 x parameters x tokens) are billed to the cascade roads, amortised over 1e5 and 1e6
responses. Compute is the bill's (engines/bill.py: prefill + decode tokens x parameters, in
billion-parameter-tokens) at the world's sizes and at the paper's (7B completer, 72B judge, a PRM at
7B, a critic at 1.5B when at most a quarter of the judge's parameters, else its share of 72B).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prm_annotate.engines.bill import Bill
from prm_annotate.evaluation.metrics import wilson_interval
from testing.consensus_bench import read_jsonl

COMPLETER_B, JUDGE_B, PRM_B, SMALL_CRITIC_B = 7.0, 72.0, 7.0, 1.5
AMORTISED_OVER = (10**5, 10**6)


def critic_paper_b(critic_params: int, judge_params: int) -> float:
    """A critic's size at the paper's scale: 1.5B if at most a quarter of the judge's parameters,
    else its share of 72B."""
    share = critic_params / judge_params
    return SMALL_CRITIC_B if share <= 0.25 else share * JUDGE_B


@dataclass
class Part:
    """One priced part of a road: a bill (tokens) and its model's size, at the world's and the paper's."""

    what: str
    bill: Bill
    world_params: int
    paper_b: float

    def world(self) -> float:
        return (self.bill.prefill_tokens + self.bill.decode_tokens) * self.world_params / 1e9

    def paper(self) -> float:
        return (self.bill.prefill_tokens + self.bill.decode_tokens) * self.paper_b


@dataclass
class Training:
    """A first judge's one-off cost: the seed slice's labels (parts) and its training (3 x params x tokens)."""

    parts: list[Part]
    tokens: int
    world_params: int
    paper_b: float

    def world(self) -> float:
        return sum(p.world() for p in self.parts) + 3 * self.tokens * self.world_params / 1e9

    def paper(self) -> float:
        return sum(p.paper() for p in self.parts) + 3 * self.tokens * self.paper_b


@dataclass
class Road:
    label: str
    parts: list[Part]
    responses: int
    judged: str  # the judged (or cascaded) file the consensus was made from
    consensus: str
    training: Training | None = None
    escalated: int | None = None  # a cascade's responses sent to the second judge
    quality: dict[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        """The consensus set's size (counted once, by `score_road`)."""
        if "kept" not in self.quality:
            self.quality["kept"] = len(read_jsonl(Path(self.consensus)))
        return self.quality["kept"]

    def per_kept(self, sizes: str, over: int | None = None) -> float:
        """Labelling compute per kept response (billion-parameter-tokens); `over`: the training amortised
        over that many responses (None: left out)."""
        total = sum(getattr(p, sizes)() for p in self.parts)
        if self.training is not None and over is not None:
            total += getattr(self.training, sizes)() * self.responses / over
        return total / max(1, self.kept)


def score_road(road: Road, gold_path: Path) -> None:
    """Kept share, kept step labels = truth (Wilson), F1 on the kept and the label source's F1 on all."""
    from prm_annotate.evaluation.label_sets import read_gold
    from prm_annotate.reports.compare import Source, compare_sources

    gold = read_gold([(str(gold_path), None)])
    kept = compare_sources([Source.read(road.label, road.consensus, "first_error", gold)], gold)["sources"][road.label]
    source = compare_sources([Source.read(road.label, road.judged, "judge.first_error", gold)], gold
                             )["sources"][road.label]
    n = kept["step_labels_compared"] or 0
    right = round((kept["step_label_precision"] or 0) * n / 100)
    road.quality.update({
        "kept": road.kept, "share": 100.0 * road.kept / road.responses,
        "truth": kept["step_label_precision"], "truth_ci": tuple(100 * x for x in wilson_interval(right, n)), "steps": n,
        "f1_kept": kept["kept"]["overall"]["f1"], "f1_source_all": source["all"]["overall"]["f1"],
    })


def _c(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def format_frontier(roads: list[Road]) -> str:
    """The table (Markdown): quality, then compute per kept response at both sizes, ratios to road (a)."""
    base = roads[0]
    lines = ["| road | escalated | kept | kept step labels = truth [95%] | F1 kept | F1 of its verdicts, all "
             "| world: per kept (amortised 1e5) | paper: per kept, w/o training | amortised 1e5 | x less | amortised 1e6 | x less |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in roads:
        q = r.quality
        lo, hi = q["truth_ci"]
        esc = "-" if r.escalated is None else f"{r.escalated} ({100.0 * r.escalated / r.responses:.1f}%)"
        cells = [r.label, esc, f"{q['kept']} ({q['share']:.1f}%)", f"{q['truth']:.1f} [{lo:.1f}, {hi:.1f}] ({q['steps']:,})",
                 f"{q['f1_kept']:.1f}", f"{q['f1_source_all']:.1f}", _c(r.per_kept("world", AMORTISED_OVER[0])),
                 _c(r.per_kept("paper"))]
        for over in AMORTISED_OVER:
            cost = r.per_kept("paper", over)
            cells += [_c(cost), f"{base.per_kept('paper', over) / cost:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_parts(roads: list[Road]) -> str:
    """Where each road's compute goes (paper sizes, whole bench run), and the one-off training."""
    lines = ["| road | part | model at paper size | prefill + decode tokens | compute (paper) | compute (world) |",
             "|---|---|---|---:|---:|---:|"]
    for r in roads:
        for p in r.parts:
            lines.append(f"| {r.label} | {p.what} | {p.paper_b:g}B | {p.bill.prefill_tokens:,} + {p.bill.decode_tokens:,} "
                         f"| {_c(p.paper())} | {_c(p.world())} |")
        if r.training is not None:
            t = r.training
            lines.append(f"| {r.label} | seed slice + training (3 x {t.paper_b:g}B x {t.tokens:,} tokens) | - | - "
                         f"| {_c(t.paper())} | {_c(t.world())} |")
    return "\n".join(lines)


def check_t1(roads: list[Road], over: int = AMORTISED_OVER[0]) -> list[tuple[str, bool]]:
    """T1: a cascade setting 5x cheaper per kept response than (a) at paper sizes (its training amortised
    over `over`), kept step labels within 0.5 points of (a)'s, kept share at least 90% of (a)'s. A
    setting that escalates nothing (the first judge alone) is said apart, not counted as a cascade."""
    base = roads[0]
    b = base.quality
    checks = []
    best = None
    for r in roads[1:]:
        if r.training is None or not r.escalated:
            continue
        q = r.quality
        ratio = base.per_kept("paper", over) / r.per_kept("paper", over)
        ok = ratio >= 5 and q["truth"] >= b["truth"] - 0.5 and q["share"] >= 0.9 * b["share"]
        if ok and (best is None or ratio > best[1]):
            best = (r, ratio)
    if best is None:
        checks.append(("T1: no cascade setting is >= 5x cheaper per kept response at paper sizes with kept step "
                       f"labels within 0.5 points of (a)'s {b['truth']:.1f} and a kept share >= 90% of its "
                       f"{b['share']:.1f}%", False))
        return checks
    r, ratio = best
    q = r.quality
    checks.append((f"T1: {r.label}: x{ratio:.2f} less labelling compute per kept response than (a) at paper sizes "
                   f"(training amortised over {over:.0e}; aim 10x: {'met' if ratio >= 10 else 'not met'}), kept step "
                   f"labels {q['truth']:.1f} vs {b['truth']:.1f}, kept share {q['share']:.1f}% vs {b['share']:.1f}% "
                   f"(>= {0.9 * b['share']:.1f}%)", True))
    return checks


def format_corrected(roads: list[Road], truth: list[dict[str, Any]]) -> str:
    """The thinking world's traces that correct a slip, road by road: how many its verdicts (the label
    source) get right, how many consensus keeps, and how many of those carry the true first error."""
    corrected = {g["id"]: g["label"] for g in truth if g.get("corrected_slips", 0) > 0}
    lines = [f"| road | its verdicts = truth on the {len(corrected)} traces | kept | kept with the true first error |",
             "|---|---:|---:|---:|"]
    for r in roads:
        verdicts = {x["id"]: x["judge"]["first_error"] for x in read_jsonl(Path(r.judged)) if x["id"] in corrected}
        kept = {x["id"]: x["first_error"] for x in read_jsonl(Path(r.consensus)) if x["id"] in corrected}
        right = sum(verdicts.get(i) == label for i, label in corrected.items())
        lines.append(f"| {r.label} | {right} ({100.0 * right / max(1, len(corrected)):.1f}%) | {len(kept)} | "
                     f"{sum(kept[i] == corrected[i] for i in kept)} |")
    return "\n".join(lines)
