"""Does a PRM trained on recovery labels score a correction above the slip it corrects? Issue 49.

    flock /tmp/prm-train.lock python -m lab.world.prm.recovery --workdir runs/prm-recovery [--seeds 3]

1. Traces (no engine): generated thinking traces of the thinking world (`trace_for`), the
   training ones from the split `prm-train` and the held-out ones from `prm-heldout` (different
   problems: the generator draws each from its split's name), steps = paragraphs, so the truth's
   indices (`read_trace(...).recovery()`) are the steps'. Each trace is written as a judged record
   whose verdict is the truth's (`judge.first_error`, `judge.recovery`), which `export` reads.
2. Three label sets on the same training traces, each exported by the project's `export`
   (`iter_rows`, trl):
   - recovery: `--labels recovery` of the truth (a slip wrong, wrong while it is open, right again
     from its correction);
   - shuffled: the same export after each trace's recovery was moved to another training trace
     with as many steps (`shuffled_recoveries`: a derangement within each length, so no trace
     keeps its own unless it is the only one of its length). Each trace keeps a label vector of
     its own length, every position keeps its rates of wrong labels, every vector is used once
     (the label counts are the recovery set's exactly); what is lost is which text the labels
     belong to. A PRM that orders a correction above its slip from the labels must lose it here;
     one that keeps it learnt it from something the shuffle keeps (a step's position, the base's
     surprise alone with a sign set by the prior);
   - first-error: `--labels first-error` of the truth (the paper's cut: right before the first
     error, wrong at it, the steps after it left out, so no correction is ever trained on).
3. One PRM per label set, seed and kind (BUDGETS) on the thinker (the policy that writes such
   traces): `train --head likelihood` (a step head on the frozen base's token log-probabilities)
   and `train --head qwen` (the base fine-tuned), each kind with one budget for every label set
   (fixed steps, batch, learning rate; no validation, no early stop: a validation F1 of the first
   error would favour one label set). Beside them, the base's untrained surprise (no labels).
4. Scoring: the project's in-process scorer (scores.checkpoint_step_scores) on the held-out
   traces. For each held-out corrected slip (the truth's slip at step s corrected at c, wrong
   corrections included, since the recovery labels treat them alike), d = score(c) - score(s).
   Per PRM: mean d and the share d > 0 (a tie counts half), with a bootstrap interval over
   held-out traces (a trace's pairs stay together), pooled over seeds with the seeds resampled
   too (bootstrap.pooled); the paired differences recovery - first-error and recovery -
   shuffled on the same draws; and each kind of paragraph's mean score (kind_means).

Every PRM's scores are a file (`prms/<head>/<set>-seed<N>.scores.json`): a rerun trains and scores only
what is missing. `results.json` holds the settings, counts and every interval.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import orjson

from lab.world.prm.bootstrap import Draws, Interval, accuracy_metric, pooled
from lab.world.prm.labels import write_atomic
from prm_annotate.recovery.labels import Recovery
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.world import THINKER_DIR, WORLD_SYSTEM_PROMPT, model_setting
from prm_annotate.world.report import read_jsonl, write_jsonl
from prm_annotate.world.thinking import trace_for
from prm_annotate.world.trace_truth import read_trace

LABEL_SETS = ("recovery", "shuffled", "first-error")
COMPARISONS = (("recovery", "first-error"), ("recovery", "shuffled"))


@dataclass(frozen=True)
class HeadBudget:
    """One PRM kind's training, the same for every label set.

    Attributes:
        head: `train --head`: `likelihood` (a head on the frozen base's token log-probabilities:
            what it checks is the base's surprise, the labels set its sign and scale) or `qwen`
            (the base fine-tuned: what it checks is learnt from the labels).
        seeds: PRMs per label set (seeds 0..N-1: the head's initialisation and the batch order).
        steps: optimiser steps per PRM.
        lr: peak learning rate (5% warm-up, cosine decay), the world PRM experiment's for the head.
    """

    head: str
    seeds: int
    steps: int
    lr: float


# The qwen PRMs cost about 1.3 s a step here (one torch thread, shared machine): 2 seeds of 150
# steps (1.6 passes over the training traces) keep the run near 20 minutes.
BUDGETS = (HeadBudget("likelihood", 3, 300, 3e-3), HeadBudget("qwen", 2, 150, 1e-3))


@dataclass(frozen=True)
class RecoveryExperimentConfig:
    """Attributes:
        workdir: the run's folder (data, PRMs, results.json); a rerun continues it.
        train_traces: generated training traces (split `prm-train`).
        heldout_traces: generated held-out traces (split `prm-heldout`).
        trace_seed: the generator's seed for both splits.
        base: the frozen LM the likelihood head reads.
        system_prompt: a built-in system prompt's name the PRM reads under (None: no system turn).
        budgets: the PRM kinds and their training (HeadBudget).
        batch_size: traces per step.
        max_length: tokens per trace (a generated trace is under it; labels past it would be dropped).
    """

    workdir: Path = Path("runs/prm-recovery")
    train_traces: int = 1500
    heldout_traces: int = 1000
    trace_seed: int = 0
    base: Path = THINKER_DIR
    system_prompt: str | None = WORLD_SYSTEM_PROMPT
    budgets: tuple[HeadBudget, ...] = BUDGETS
    batch_size: int = 16
    max_length: int = 1024

    def settings(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("workdir", "budgets")}
        out["base"] = model_setting(self.base)
        # More seeds or another head extend a run; a head's steps and rate are what it trained with.
        out.update({f"{b.head}_steps": b.steps for b in self.budgets})
        out.update({f"{b.head}_lr": b.lr for b in self.budgets})
        return orjson.loads(orjson.dumps(out))  # as settings.json holds them (tuples as lists)

    def system_prompt_text(self) -> str | None:
        from prm_annotate.io.prompt_files import SYSTEM_PROMPTS, load_prompt

        return load_prompt(self.system_prompt, SYSTEM_PROMPTS).text.strip() if self.system_prompt else None


def progress(line: str) -> None:
    print(f"prm recovery: {line}", file=sys.stderr, flush=True)


# -- traces and labels ------------------------------------------------------------------------

def judged_records(split: str, n: int, seed: int) -> list[dict[str, Any]]:
    """`n` generated traces as judged records whose verdict is the truth's (first error and recovery)."""
    out = []
    for i in range(n):
        problem, t = trace_for(split, i, seed)
        truth = read_trace(problem, t.text)
        recovery = truth.recovery()
        out.append({"id": f"{split}-{i}", "problem": problem["problem"], "answer": problem["answer"],
                    "steps": t.steps, "thought_steps": len(t.thought), "thought_finished": True,
                    "final_answer": truth.answer, "correct": truth.final_correct,
                    "truth_kinds": [q.kind for q in truth.paragraphs],
                    "judge": {"first_error": recovery.first_error(), "votes": [recovery.first_error()],
                              "parse_failures": 0, "model": "truth", "prompt": "truth",
                              "recovery": recovery.to_json()}})
    return out


def recovery_of_record(record: dict[str, Any]) -> Recovery:
    return Recovery.from_json(record["judge"]["recovery"], len(record["steps"]))


def shuffled_recoveries(records: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The records with each one's recovery (and first error with it) moved to another record of as
    many steps: per length, the records in a seeded random order, each taking the next one's (a
    cycle, so none keeps its own unless it is alone in its length)."""
    rng = random.Random(derive_seed("prm-recovery", "shuffled", seed))
    by_length: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        by_length.setdefault(len(r["steps"]), []).append(i)
    given: dict[int, int] = {}  # record -> the record whose recovery it takes
    for n in sorted(by_length):
        order = by_length[n][:]
        rng.shuffle(order)
        for k, i in enumerate(order):
            given[i] = order[(k + 1) % len(order)]
    out = []
    for i, r in enumerate(records):
        judge = records[given[i]]["judge"]
        out.append({**r, "judge": {**r["judge"], "first_error": judge["first_error"], "votes": judge["votes"],
                                   "recovery": judge["recovery"]}})
    return out


def export_sets(records: list[dict[str, Any]], folder: Path, seed: int) -> dict[str, Path]:
    """The trl export of each label set (export's own rows), written into `folder`."""
    from prm_annotate.export import ExportOptions, ExportSummary, iter_rows

    folder.mkdir(parents=True, exist_ok=True)
    truth = write_jsonl_path(folder / "train.truth.jsonl", records)
    shuffled = write_jsonl_path(folder / "train.shuffled.jsonl", shuffled_recoveries(records, seed))
    sources = {"recovery": (truth, "recovery"), "shuffled": (shuffled, "recovery"),
               "first-error": (truth, "first-error")}
    paths = {}
    for name, (path, labels) in sources.items():
        summary = ExportSummary()
        rows = list(iter_rows(str(path), ExportOptions(format="trl", labels=labels), summary))
        if summary.skipped:
            raise ValueError(f"{name}: export skipped {dict(summary.skipped)}")
        paths[name] = write_jsonl_path(folder / f"{name}.trl.jsonl", rows)
    return paths


def write_jsonl_path(path: Path, rows: list[dict[str, Any]]) -> Path:
    write_jsonl(path, rows)
    return path


def label_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    labels = [v for r in rows for v in r["labels"]]
    return {"traces": len(rows), "step_labels": len(labels), "wrong": labels.count(False)}


# -- the measurement ---------------------------------------------------------------------------

def corrected_pairs(recovery: Recovery) -> list[tuple[int, int]]:
    """(slip step, correcting step) of every slip the trace corrects, in slip order."""
    return [(s.step, s.corrected_at) for s in recovery.corrected]


def pair_stats(pairs: Sequence[tuple[int, int]], scores: Sequence[float]) -> list[float]:
    """One trace's (sum of d, pairs, pairs with d > 0, a tie counting half), d = score(c) - score(s)."""
    ds = [scores[c] - scores[s] for s, c in pairs]
    return [float(sum(ds)), float(len(ds)), sum(1.0 if d > 0 else 0.5 if d == 0 else 0.0 for d in ds)]


def mean_metric(sums: np.ndarray) -> np.ndarray:
    """Mean d of summed (sum d, pairs, ...) rows."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums[..., 0] / sums[..., 1]


def share_metric(sums: np.ndarray) -> np.ndarray:
    """Percent of pairs with d > 0 of summed (sum d, pairs, wins) rows."""
    return accuracy_metric(sums[..., [2, 1]])


METRICS = {"mean d": mean_metric, "d > 0 (%)": share_metric}


def trace_stats(pairs: dict[str, list[tuple[int, int]]], scores: dict[str, list[float]]) -> np.ndarray:
    """Per held-out trace with a corrected slip (in `pairs`' order), its pair_stats: shape (traces, 3)."""
    return np.array([pair_stats(p, scores[rid]) for rid, p in pairs.items()], dtype=float)


def interval_dict(i: Interval) -> dict[str, Any]:
    return {"estimate": round(i.estimate, 4), "low": round(i.low, 4), "high": round(i.high, 4), "reading": i.reading}


def summarize(stats: dict[str, list[np.ndarray]], seeds: int) -> dict[str, Any]:
    """Per label set each metric pooled over the seeds (and per seed), and each comparison's paired
    difference, all on the same draws of traces and seeds."""
    traces = next(iter(stats.values()))[0].shape[0]
    draws = Draws(traces, seeds)
    one = Draws(traces, 1)
    out: dict[str, Any] = {"prms": {}, "comparisons": {}}
    for name, per_seed in stats.items():
        out["prms"][name] = {m: {"pooled": interval_dict(pooled(draws, per_seed, None, f)),
                                 "per_seed": [interval_dict(pooled(one, [s], None, f)) for s in per_seed]}
                             for m, f in METRICS.items()}
    for a, b in COMPARISONS:
        out["comparisons"][f"{a} - {b}"] = {m: interval_dict(pooled(draws, stats[a], stats[b], f))
                                             for m, f in METRICS.items()}
    return out


# What each held-out paragraph is, by the truth's kinds (trace_truth.py), as the table shows them.
KIND_GROUPS = {"slip": ("slip", "garbled"), "wrong correction": ("wrong_correction",), "correction": ("correction",),
               "carried error": ("propagated",), "right": ("step", "recheck", "answer")}


def kind_means(records: list[dict[str, Any]], scores: dict[str, list[float]]) -> dict[str, float]:
    """Mean score per kind of held-out paragraph (KIND_GROUPS): a wrong correction ("Wait, ..."
    that changes a right step to a wrong value) has a correction's form and a slip's truth, so it
    tells a PRM that reads the form from one that checks the step."""
    group = {k: name for name, kinds in KIND_GROUPS.items() for k in kinds}
    sums: dict[str, list[float]] = {name: [] for name in KIND_GROUPS}
    for r in records:
        for kind, v in zip(r["truth_kinds"], scores[r["id"]]):
            sums[group[kind]].append(v)
    return {k: round(float(np.mean(v)), 4) for k, v in sums.items() if v}


# -- the run -----------------------------------------------------------------------------------

def check_workdir(cfg: RecoveryExperimentConfig) -> None:
    """Refuse a workdir of a run with other settings; a head added later adds its own."""
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    marker = cfg.workdir / "settings.json"
    settings = cfg.settings()
    before = orjson.loads(marker.read_bytes()) if marker.is_file() else {}
    changed = sorted(k for k, v in settings.items() if k in before and before[k] != v)
    if changed:
        raise SystemExit(f"{cfg.workdir} holds a run with other settings ({', '.join(changed)})")
    write_atomic(marker, orjson.dumps({**before, **settings}, option=orjson.OPT_INDENT_2))


def untrained_reference(cfg: RecoveryExperimentConfig, held: list[dict[str, Any]],
                        pairs: dict[str, list[tuple[int, int]]]) -> dict[str, Any]:
    """No labels at all: each step scored by the base's lowest probability of one of its tokens
    (scores.likelihood_baseline_scores, read as the likelihood PRMs read): does the base's surprise
    alone put a correction above its slip? Kept in a file like a PRM's."""
    from lab.world.prm.scores import likelihood_baseline_scores

    path = cfg.workdir / "prms" / "untrained.scores.json"
    if not path.is_file():
        values = likelihood_baseline_scores(cfg.base, held, cfg.system_prompt_text())
        write_atomic(path, orjson.dumps({"scores": {r["id"]: s for r, s in zip(held, values)}}))
    scores = orjson.loads(path.read_bytes())["scores"]
    stats = trace_stats(pairs, scores)
    draws = Draws(stats.shape[0], 1)
    return {"kinds": kind_means(held, scores),
            **{m: interval_dict(pooled(draws, [stats], None, f)) for m, f in METRICS.items()}}


def train_one(cfg: RecoveryExperimentConfig, budget: HeadBudget, data: Path, output: Path, seed: int,
              readings: Any) -> dict[str, Any]:
    from prm_annotate.prm.train import TrainConfig, train

    tc = TrainConfig(data=str(data), base=str(cfg.base), output=str(output), steps=budget.steps,
                     batch_size=cfg.batch_size, lr=budget.lr, seed=seed, head=budget.head, max_length=cfg.max_length,
                     system_prompt=cfg.system_prompt_text(), save_every=budget.steps, save_total_limit=1,
                     log_every=budget.steps, overwrite=True, quiet=True)
    result = train(tc, readings if budget.head == "likelihood" else None)
    return {"examples": result.examples, "labels": result.labels, "skipped": dict(result.skipped),
            "steps": result.steps, "first_loss": result.first_loss, "last_loss": result.last_loss,
            "train_seconds": round(result.train_seconds, 1), "seconds": round(result.seconds, 1)}


def run(cfg: RecoveryExperimentConfig) -> dict[str, Any]:
    import shutil

    import torch

    from lab.world.prm.scores import checkpoint_step_scores
    from prm_annotate.prm.likelihood import LMReadings

    torch.set_num_threads(1)
    started = time.monotonic()
    check_workdir(cfg)
    train = judged_records("prm-train", cfg.train_traces, cfg.trace_seed)
    held = judged_records("prm-heldout", cfg.heldout_traces, cfg.trace_seed)
    pairs = {r["id"]: p for r in held if (p := corrected_pairs(recovery_of_record(r)))}
    progress(f"{len(train)} training traces, {len(held)} held out ({len(pairs)} with a corrected slip, "
             f"{sum(map(len, pairs.values()))} corrected slips)")
    data = export_sets(train, cfg.workdir / "data", cfg.trace_seed)
    counts = {name: label_counts(read_jsonl(path)) for name, path in data.items()}
    readings = LMReadings()
    heads: dict[str, Any] = {}
    for budget in cfg.budgets:
        head = budget.head
        stats: dict[str, list[np.ndarray]] = {name: [] for name in LABEL_SETS}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in LABEL_SETS}
        folder = cfg.workdir / "prms" / head
        folder.mkdir(parents=True, exist_ok=True)
        for seed in range(budget.seeds):
            for name in LABEL_SETS:
                key = f"{name}-seed{seed}"
                path = folder / f"{key}.scores.json"
                if not path.is_file():
                    t = time.monotonic()
                    trained = train_one(cfg, budget, data[name], folder / key, seed, readings)
                    scores, _ = checkpoint_step_scores(folder / key, held, readings)
                    write_atomic(path, orjson.dumps({"train": trained, "seconds": round(time.monotonic() - t, 1),
                                                     "scores": {r["id"]: s for r, s in zip(held, scores)}}))
                    shutil.rmtree(folder / f"{key}.checkpoints", ignore_errors=True)
                done = orjson.loads(path.read_bytes())
                stats[name].append(trace_stats(pairs, done["scores"]))
                runs[name].append({"seed": seed, "train": done["train"], "seconds": done["seconds"],
                                   "kinds": kind_means(held, done["scores"])})
                progress(f"{head} {key}: mean d {mean_metric(stats[name][-1].sum(axis=0)):+.3f}, d > 0 "
                         f"{share_metric(stats[name][-1].sum(axis=0)):.1f}% [{time.monotonic() - started:.0f} s]")
        heads[head] = {"seeds": budget.seeds, "steps": budget.steps, "lr": budget.lr, "runs": runs,
                       **summarize(stats, budget.seeds)}
    reference = untrained_reference(cfg, held, pairs)
    result = {"settings": cfg.settings(), "label_counts": counts,
              "heldout": {"traces": len(held), "with_corrected_slip": len(pairs),
                          "corrected_slips": int(sum(map(len, pairs.values())))},
              "heads": heads, "untrained": reference, "seconds": round(time.monotonic() - started, 1)}
    write_atomic(cfg.workdir / "results.json", orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return result


def _fmt(i: dict[str, Any], pct: bool) -> str:
    f = "{:.1f}" if pct else "{:+.3f}"
    return f"{f.format(i['estimate'])} [{f.format(i['low'])}, {f.format(i['high'])}]"


def tables(result: dict[str, Any]) -> str:
    h = result["heldout"]
    lines = [f"Held out: {h['traces']} traces, {h['with_corrected_slip']} with a corrected slip, "
             f"{h['corrected_slips']} corrected slips.", "",
             "| PRM (head) trained on | step labels (wrong) | mean d = score(c) - score(s) [95%] | d > 0 % [95%] | "
             "per seed d > 0 % | mean score: " + " / ".join(KIND_GROUPS) + " | seconds |",
             "|---|---:|---|---|---|---|---:|"]
    for head, r in result["heads"].items():
        for name in LABEL_SETS:
            p, c, runs = r["prms"][name], result["label_counts"][name], r["runs"][name]
            roles = " / ".join(f"{np.mean([x['kinds'][k] for x in runs]):.3f}" for k in KIND_GROUPS)
            per_seed = ", ".join(f"{x['estimate']:.1f}" for x in p["d > 0 (%)"]["per_seed"])
            seconds = np.mean([x["seconds"] for x in runs])
            lines.append(f"| {head} ({r['seeds']} seeds, {r['steps']} steps): {name} | {c['step_labels']} ({c['wrong']}) | {_fmt(p['mean d']['pooled'], False)} | "
                         f"{_fmt(p['d > 0 (%)']['pooled'], True)} | {per_seed} | {roles} | {seconds:.0f} |")
    u = result["untrained"]
    roles = " / ".join(f"{u['kinds'][k]:.3f}" for k in KIND_GROUPS)
    lines.append(f"| no training: the base's lowest token probability | — | {_fmt(u['mean d'], False)} | "
                 f"{_fmt(u['d > 0 (%)'], True)} | — | {roles} | — |")
    lines += ["", "| comparison (paired, same head) | mean d [95%] | d > 0 % [95%] |", "|---|---|---|"]
    for head, r in result["heads"].items():
        for name, c in r["comparisons"].items():
            lines.append(f"| {head}: {name} | {_fmt(c['mean d'], False)} ({c['mean d']['reading']}) | "
                         f"{_fmt(c['d > 0 (%)'], True)} ({c['d > 0 (%)']['reading']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    defaults = RecoveryExperimentConfig()
    parser = argparse.ArgumentParser(description="PRMs on recovery, shuffled and first-error labels (issue 49).")
    parser.add_argument("--workdir", type=Path, default=defaults.workdir)
    for name in ("train_traces", "heldout_traces", "batch_size"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    parser.add_argument("--seeds", type=int, nargs=2, metavar=("LIKELIHOOD", "QWEN"),
                        default=[b.seeds for b in BUDGETS], help="Seeds per head (0 leaves the head out).")
    parser.add_argument("--steps", type=int, nargs=2, metavar=("LIKELIHOOD", "QWEN"),
                        default=[b.steps for b in BUDGETS], help="Optimiser steps per PRM, per head.")
    parser.add_argument("--base", type=Path, default=defaults.base)
    args = parser.parse_args(argv)
    budgets = tuple(HeadBudget(b.head, seeds, steps, b.lr)
                    for b, seeds, steps in zip(BUDGETS, args.seeds, args.steps) if seeds)
    options = {k: v for k, v in vars(args).items() if k not in ("seeds", "steps")}
    print(tables(run(RecoveryExperimentConfig(**options, budgets=budgets))))


if __name__ == "__main__":
    main()
