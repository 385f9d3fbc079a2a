"""The paper's central claim, in the arithmetic world: does a PRM trained on consensus labels beat
one trained on MC labels?

    prm-annotate world report --problems 160 --workdir runs/world     # the labels (vLLM, ~2 min)
    prm-annotate world prm --workdir runs/world                       # this experiment (CPU, no engine)

Reads the files of a `world report` (responses, rollouts, judged, consensus, gold = the true
first errors). The report's problems are split in order: the first `train_share` of them give
the training responses, the rest are held out. From the training responses, one `trl` export per
label source — MC (`mc.first_error`), judge, consensus — and MC again cut at random (seeded) to as
many responses as consensus keeps, which separates the labels' quality from their quantity. Four
PRMs are trained with `train` from the same base (the world policy), with the same steps, batch,
learning rate and seed. Each scores the held-out responses (transformers, float32: the same
numbers vLLM's pooling runner gives, see tests/test_score.py), and is measured:

- ProcessBench F1 of `prm.first_error` (threshold 0.5) against the true first errors;
- Best-of-N accuracy over the held-out problems (`bon`), N up to the responses per problem, for
  the min and prod aggregations, beside majority vote and pass@N (the same for every PRM).
"""
from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prm_annotate.world import POLICY_DIR
from prm_annotate.world.report import FILES, read_jsonl, write_jsonl

# PRM name -> the report file its labels come from.
SOURCES = {"MC": "rollouts", "judge": "judged", "consensus": "consensus"}


@dataclass
class ExperimentConfig:
    workdir: Path = Path("runs/world")
    train_share: float = 0.75
    steps: int = 150
    batch_size: int = 16
    lr: float = 1e-3
    seed: int = 0
    threshold: float = 0.5
    base: Path = POLICY_DIR


def _training_sets(cfg: ExperimentConfig, train_problems: set[str], out: Path) -> dict[str, Path]:
    """One trl export per label source, of the training problems' responses only."""
    from prm_annotate.export import ExportOptions, build_rows

    sets: dict[str, list[dict[str, Any]]] = {}
    for name, role in SOURCES.items():
        rows, _ = build_rows(str(cfg.workdir / FILES[role]), ExportOptions(format="trl"))
        sets[name] = [r for r in rows if r["id"].rsplit("/", 1)[0] in train_problems]
    # As many MC-labelled responses as consensus keeps, drawn at random: quantity held equal.
    sets["MC (consensus-sized)"] = random.Random(cfg.seed).sample(sets["MC"], len(sets["consensus"]))
    paths = {}
    for name, rows in sets.items():
        paths[name] = out / f"train-{name.split()[0]}{'-sub' if '(' in name else ''}.trl.jsonl"
        write_jsonl(paths[name], rows)
    return paths


def _score(prm_dir: Path, responses: list[dict[str, Any]], threshold: float, path: Path) -> None:
    from prm_annotate.prm.checkpoint import load_model, transformers_step_scores
    from prm_annotate.stages.score import first_below

    model, tokenizer, fmt = load_model(prm_dir)
    out = []
    for r in responses:
        scores = transformers_step_scores(model, tokenizer, fmt, r["problem"], r["steps"])
        out.append({**r, "prm": {"scores": scores, "first_error": first_below(scores, threshold),
                                 "threshold": threshold, "model": str(prm_dir)}})
    write_jsonl(path, out)


def run_experiment(cfg: ExperimentConfig) -> dict[str, Any]:
    from prm_annotate.reports.bon import best_of_n, read_scored
    from prm_annotate.reports.evaluate import evaluate
    from prm_annotate.reports.labels import load_gold, load_predictions
    from prm_annotate.prm.train import TrainConfig, train

    for role in ("problems", "responses", "gold", *SOURCES.values()):
        if not (cfg.workdir / FILES[role]).exists():
            raise FileNotFoundError(f"{cfg.workdir / FILES[role]} is missing: run `prm-annotate world report "
                                    f"--workdir {cfg.workdir}` first")
    problems = [p["id"] for p in read_jsonl(cfg.workdir / FILES["problems"])]
    cut = int(len(problems) * cfg.train_share)
    train_problems, held_problems = set(problems[:cut]), set(problems[cut:])
    out = cfg.workdir / f"prm-seed{cfg.seed}"
    out.mkdir(parents=True, exist_ok=True)
    held = [r for r in read_jsonl(cfg.workdir / FILES["responses"]) if r["problem_id"] in held_problems]
    held_path = out / "heldout.jsonl"
    write_jsonl(held_path, held)
    gold = {k: v for k, v in load_gold(str(cfg.workdir / FILES["gold"])).items() if k in {r["id"] for r in held}}

    result: dict[str, Any] = {"train_problems": len(train_problems), "heldout_problems": len(held_problems),
                              "heldout_responses": len(held), "seed": cfg.seed,
                              "settings": {"steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr,
                                           "threshold": cfg.threshold}, "prms": {}}
    for name, data in _training_sets(cfg, train_problems, out).items():
        t = time.monotonic()
        prm_dir = out / f"prm-{data.name.removeprefix('train-').removesuffix('.trl.jsonl')}"
        trained = train(TrainConfig(data=str(data), base=str(cfg.base), output=str(prm_dir), steps=cfg.steps,
                                    batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed, overwrite=True, quiet=True))
        scored = out / f"scored-{prm_dir.name.removeprefix('prm-')}.jsonl"
        _score(prm_dir, held, cfg.threshold, scored)
        metric = evaluate(gold, load_predictions(str(scored), "prm.first_error")[1], pred_field="prm.first_error")
        problems_scored, _ = read_scored(str(scored))
        bon = best_of_n(problems_scored, gold, aggregations=("min", "prod"))
        result["prms"][name] = {"train_responses": trained.examples, "train_labels": trained.labels,
                                "loss": [round(trained.first_loss, 4), round(trained.last_loss, 4)],
                                "f1": metric.overall.f1, "error_acc": metric.overall.error_acc,
                                "correct_acc": metric.overall.correct_acc, "bon": bon,
                                "seconds": round(time.monotonic() - t, 1)}
        print(f"world prm: {name}: trained on {trained.examples} responses, F1 {metric.overall.f1:.1f}",
              file=sys.stderr, flush=True)
    return result


def print_experiment(result: dict[str, Any]) -> None:
    from rich.table import Table

    from prm_annotate.reports.tables import pct, show

    any_bon = next(iter(result["prms"].values()))["bon"]
    n = str(any_bon["n"][-1])
    table = Table(title=f"PRMs trained on each label source (seed {result['seed']}), scored on "
                        f"{result['heldout_responses']} held-out responses of {result['heldout_problems']} problems")
    for col in ("PRM", "train responses", "step labels", "error acc", "correct acc", "F1",
                f"BoN@{n} min", f"BoN@{n} prod"):
        table.add_column(col, justify="left" if col == "PRM" else "right")
    for name, p in result["prms"].items():
        acc = p["bon"]["accuracy"]
        table.add_row(name, str(p["train_responses"]), str(p["train_labels"]), pct(p["error_acc"]),
                      pct(p["correct_acc"]), pct(p["f1"]), pct(acc["prm-min"][n]), pct(acc["prm-prod"][n]))
    show(table)
    acc = any_bon["accuracy"]
    print(f"baselines on the same held-out problems: majority@{n} {pct(acc['majority'][n])}, "
          f"pass@{n} {pct(acc['pass@N'][n])}, one response (N=1) {pct(acc['pass@N']['1'])}")
