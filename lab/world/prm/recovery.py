"""Does a PRM trained on recovery labels score a correction above the slip it corrects? Issue 49.

    flock /tmp/prm-train.lock python -m lab.world.prm.recovery --workdir runs/prm-recovery [--seeds 3]

1. Traces (no engine): generated thinking traces of the thinking world (`trace_for`), the
   training ones from the split `prm-train` and the held-out ones from `prm-heldout` (different
   problems: the generator draws each from its split's name), steps = paragraphs, so the truth's
   indices (`read_trace(...).recovery()`) are the steps'. Each trace is written as a judged record
   whose verdict is the truth's (`judge.first_error`, `judge.recovery`), which `export` reads.
2. Three label sets on the same training traces, each exported by the project's `export`
   (`build_rows`, trl):
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
3. One PRM per label set and seed: `train --head likelihood` (a step head on the frozen base's
   token log-probabilities) on the thinker (the policy that writes such traces), the same budget
   for all (fixed steps, batch, learning rate; no validation, no early stop: a validation F1 of
   the first error would favour one label set).
4. Scoring: the project's in-process scorer (scores.checkpoint_step_scores) on the held-out
   traces. For each held-out corrected slip (the truth's slip at step s corrected at c, wrong
   corrections included, since the recovery labels treat them alike), d = score(c) - score(s).
   Per PRM: mean d and the share d > 0 (a tie counts half), with a bootstrap interval over
   held-out traces (a trace's pairs stay together), pooled over seeds with the seeds resampled
   too (bootstrap.pooled); and the paired differences recovery - first-error and recovery -
   shuffled on the same draws.

Every PRM's scores are a file (`prms/<set>-seed<N>.scores.json`): a rerun trains and scores only
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
from prm_annotate.recovery import Recovery
from prm_annotate.seeds import derive_seed
from prm_annotate.world import THINKER_DIR, WORLD_SYSTEM_PROMPT, model_setting
from prm_annotate.world.report import read_jsonl, write_jsonl
from prm_annotate.world.thinking import trace_for
from prm_annotate.world.trace_truth import read_trace

LABEL_SETS = ("recovery", "shuffled", "first-error")
COMPARISONS = (("recovery", "first-error"), ("recovery", "shuffled"))


@dataclass(frozen=True)
class RecoveryExperimentConfig:
    """Attributes:
        workdir: the run's folder (data, PRMs, results.json); a rerun continues it.
        seeds: PRMs per label set (seeds 0..N-1: the head's initialisation and the batch order).
        train_traces: generated training traces (split `prm-train`).
        heldout_traces: generated held-out traces (split `prm-heldout`).
        trace_seed: the generator's seed for both splits.
        base: the frozen LM the likelihood head reads.
        system_prompt: a built-in system prompt's name the PRM reads under (None: no system turn).
        steps: optimiser steps per PRM (the same for every label set).
        batch_size: traces per step.
        lr: peak learning rate (5% warm-up, cosine decay).
        max_length: tokens per trace (a generated trace is under it; labels past it would be dropped).
    """

    workdir: Path = Path("runs/prm-recovery")
    seeds: int = 3
    train_traces: int = 1500
    heldout_traces: int = 1000
    trace_seed: int = 0
    base: Path = THINKER_DIR
    system_prompt: str | None = WORLD_SYSTEM_PROMPT
    steps: int = 300
    batch_size: int = 16
    lr: float = 3e-3
    max_length: int = 1024

    def settings(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("workdir", "seeds")}
        out["base"] = model_setting(self.base)
        return out

    def system_prompt_text(self) -> str | None:
        from prm_annotate.prompt_files import SYSTEM_PROMPTS, load_prompt

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
    from prm_annotate.export import ExportOptions, build_rows

    folder.mkdir(parents=True, exist_ok=True)
    truth = write_jsonl_path(folder / "train.truth.jsonl", records)
    shuffled = write_jsonl_path(folder / "train.shuffled.jsonl", shuffled_recoveries(records, seed))
    sources = {"recovery": (truth, "recovery"), "shuffled": (shuffled, "recovery"),
               "first-error": (truth, "first-error")}
    paths = {}
    for name, (path, labels) in sources.items():
        rows, summary = build_rows(str(path), ExportOptions(format="trl", labels=labels))
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


def role_means(records: list[dict[str, Any]], scores: dict[str, list[float]]) -> dict[str, float]:
    """Mean score per truth role on the held-out traces: slips, corrections, steps while a slip is
    open (wrong, not slips), and the other right steps."""
    sums: dict[str, list[float]] = {"slip": [], "correction": [], "open": [], "right": []}
    for r in records:
        rec, s = recovery_of_record(r), scores[r["id"]]
        roles, labels = rec.roles(len(s)), rec.step_labels(len(s))
        for role, right, v in zip(roles, labels, s):
            key = role if role != "ok" else ("right" if right else "open")
            sums[key].append(v)
    return {k: round(float(np.mean(v)), 4) for k, v in sums.items() if v}


# -- the run -----------------------------------------------------------------------------------

def check_workdir(cfg: RecoveryExperimentConfig) -> None:
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    marker = cfg.workdir / "settings.json"
    settings = cfg.settings()
    if marker.is_file():
        before = orjson.loads(marker.read_bytes())
        changed = sorted(k for k, v in settings.items() if before.get(k) != v)
        if changed:
            raise SystemExit(f"{cfg.workdir} holds a run with other settings ({', '.join(changed)})")
    else:
        write_atomic(marker, orjson.dumps(settings, option=orjson.OPT_INDENT_2))


def train_one(cfg: RecoveryExperimentConfig, data: Path, name: str, seed: int, readings: Any) -> dict[str, Any]:
    from prm_annotate.prm.train import TrainConfig, train

    output = cfg.workdir / "prms" / name
    tc = TrainConfig(data=str(data), base=str(cfg.base), output=str(output), steps=cfg.steps,
                     batch_size=cfg.batch_size, lr=cfg.lr, seed=seed, head="likelihood", max_length=cfg.max_length,
                     system_prompt=cfg.system_prompt_text(), save_every=cfg.steps, save_total_limit=1,
                     log_every=cfg.steps, overwrite=True, quiet=True)
    result = train(tc, readings)
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
    stats: dict[str, list[np.ndarray]] = {name: [] for name in LABEL_SETS}
    prms: dict[str, list[dict[str, Any]]] = {name: [] for name in LABEL_SETS}
    (cfg.workdir / "prms").mkdir(exist_ok=True)
    for seed in range(cfg.seeds):
        for name in LABEL_SETS:
            key = f"{name}-seed{seed}"
            path = cfg.workdir / "prms" / f"{key}.scores.json"
            if not path.is_file():
                t = time.monotonic()
                trained = train_one(cfg, data[name], key, seed, readings)
                scores, _ = checkpoint_step_scores(cfg.workdir / "prms" / key, held, readings)
                write_atomic(path, orjson.dumps({"train": trained, "score_seconds": round(time.monotonic() - t, 1)
                                                 - trained["seconds"],
                                                 "scores": {r["id"]: s for r, s in zip(held, scores)}}))
                shutil.rmtree(cfg.workdir / "prms" / f"{key}.checkpoints", ignore_errors=True)
            done = orjson.loads(path.read_bytes())
            stats[name].append(trace_stats(pairs, done["scores"]))
            prms[name].append({"seed": seed, "train": done["train"], "roles": role_means(held, done["scores"])})
            progress(f"{key}: mean d {mean_metric(stats[name][-1].sum(axis=0)):+.3f}, d > 0 "
                     f"{share_metric(stats[name][-1].sum(axis=0)):.1f}% [{time.monotonic() - started:.0f} s]")
    summary = summarize(stats, cfg.seeds)
    result = {"settings": cfg.settings(), "seeds": cfg.seeds, "label_counts": counts,
              "heldout": {"traces": len(held), "with_corrected_slip": len(pairs),
                          "corrected_slips": int(sum(map(len, pairs.values())))},
              "runs": prms, **summary, "seconds": round(time.monotonic() - started, 1)}
    write_atomic(cfg.workdir / "results.json", orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return result


def _fmt(i: dict[str, Any], pct: bool) -> str:
    f = "{:.1f}" if pct else "{:+.3f}"
    return f"{f.format(i['estimate'])} [{f.format(i['low'])}, {f.format(i['high'])}]"


def tables(result: dict[str, Any]) -> str:
    h = result["heldout"]
    lines = [f"Held out: {h['traces']} traces, {h['with_corrected_slip']} with a corrected slip, "
             f"{h['corrected_slips']} corrected slips; {result['seeds']} seeds.", "",
             "| PRM trained on | step labels (wrong) | mean d = score(c) - score(s) [95%] | d > 0 % [95%] | "
             "mean score: slips / corrections / open / right |", "|---|---:|---|---|---|"]
    for name in LABEL_SETS:
        p, c = result["prms"][name], result["label_counts"][name]
        roles = [r["roles"] for r in result["runs"][name]]
        mean_roles = " / ".join(f"{np.mean([r[k] for r in roles]):.3f}" for k in ("slip", "correction", "open", "right"))
        lines.append(f"| {name} | {c['step_labels']} ({c['wrong']}) | {_fmt(p['mean d']['pooled'], False)} | "
                     f"{_fmt(p['d > 0 (%)']['pooled'], True)} | {mean_roles} |")
    lines += ["", "| comparison (paired) | mean d [95%] | d > 0 % [95%] |", "|---|---|---|"]
    for name, c in result["comparisons"].items():
        lines.append(f"| {name} | {_fmt(c['mean d'], False)} ({c['mean d']['reading']}) | "
                     f"{_fmt(c['d > 0 (%)'], True)} ({c['d > 0 (%)']['reading']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    defaults = RecoveryExperimentConfig()
    parser = argparse.ArgumentParser(description="PRMs on recovery, shuffled and first-error labels (issue 49).")
    parser.add_argument("--workdir", type=Path, default=defaults.workdir)
    for name in ("seeds", "train_traces", "heldout_traces", "steps", "batch_size"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--base", type=Path, default=defaults.base)
    args = parser.parse_args(argv)
    result = run(RecoveryExperimentConfig(**vars(args)))
    print(tables(result))


if __name__ == "__main__":
    main()
