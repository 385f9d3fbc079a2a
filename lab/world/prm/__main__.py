"""`python -m lab.world.prm`: the PRM experiment of the arithmetic world (experiment.py; docs/world-prm.md).

    python -m lab.world.prm [--workdir runs/world-prm] [--seeds 3] [--json]

It was `prm-annotate world prm` while the experiment lived in the product; the options are the
same. Exit status 2 on a bad option or setting (one line), before any work.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from lab.world.prm.experiment import ExperimentConfig
from prm_annotate.errors import UsageError

DEFAULTS = {f.name: f.default for f in fields(ExperimentConfig)}


def bounded(kind: type, low: float, high: float | None = None) -> Callable[[str], Any]:
    """An argparse type: `kind` within [low, high]."""
    def parse(text: str) -> Any:
        value = kind(text)
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text} is not in [{low}, {'inf' if high is None else high}]")
        return value
    return parse


# (flags, ExperimentConfig field, type, help); each default is the field's.
OPTIONS: tuple[tuple[tuple[str, ...], str, Callable[[str], Any], str], ...] = (
    (("--workdir",), "workdir", Path,
     "Folder of the run: the report, the PRMs, results.json, world-prm.png (a rerun continues it)."),
    (("--seeds",), "seeds", bounded(int, 1), "Seeds (0..N-1) per label source; more extend a finished run."),
    (("--train-problems",), "train_problems", bounded(int, 2), "Problems whose responses train (and validate) the PRMs."),
    (("--heldout-problems",), "heldout_problems", bounded(int, 1), "Problems held out for the measurement."),
    (("-n", "--num-samples"), "n", bounded(int, 1), "Responses per problem (Best-of-N up to N)."),
    (("-k", "--k"), "k", bounded(int, 1), "Rollouts per step."),
    (("--report-seed",), "report_seed", int, "Seed of the world report (the labels, shared by every seed)."),
    (("--val-share",), "val_share", bounded(float, 0.01, 0.5),
     "Share of the training problems drawn (per seed) for validation."),
    (("--head",), "head", str, "train --head of every PRM: likelihood or qwen."),
    (("--max-steps",), "max_steps", bounded(int, 1), "The step cap of every PRM."),
    (("--eval-every",), "eval_every", bounded(int, 1), "Steps between validations (and checkpoints)."),
    (("--patience",), "patience", bounded(int, 1), "Validations without a better F1 before a PRM stops."),
    (("--batch-size",), "batch_size", bounded(int, 1), "Responses per step."),
    (("--lr",), "lr", bounded(float, 0), "Peak learning rate."),
    (("--base",), "base", Path,
     "The PRMs' base model (default: lab/world/models/prm-base; the policy: prm_annotate/world/models/policy)."),
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.world.prm", description=(
        "The paper's claim with confidence intervals: PRMs trained on MC (hard, soft), judge, consensus and "
        "size-matched MC labels of one world report (and on the true labels, and on them shuffled: the control), "
        "several seeds each, measured against the truth on held-out problems (ProcessBench F1, step AUC, "
        "Best-of-N), with paired bootstrap intervals; results.json and a PNG."))
    for flags, name, kind, text in OPTIONS:
        p.add_argument(*flags, dest=name, type=kind, default=DEFAULTS[name], help=f"{text} (default: %(default)s)")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print results.json instead of the table.")
    return p


def main(argv: list[str] | None = None) -> int:
    import orjson

    from lab.world.prm.experiment import run_experiment
    from lab.world.prm.results import plot_results, print_results
    from prm_annotate.errors import require

    args = vars(parser().parse_args(argv))
    as_json = args.pop("as_json")
    cfg = ExperimentConfig(**args)
    try:
        # Checked first: the picture is drawn after the whole run.
        require("matplotlib", "world prm (its plot)", "pip install -e '.[plot]' in the repository")
        summary = run_experiment(cfg)
        plot_results(summary, cfg.workdir / "world-prm.png")
    except UsageError as exc:
        print(f"world prm: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print("world prm: interrupted; finished PRMs are kept, rerun to resume", file=sys.stderr, flush=True)
        return 130
    if as_json:
        print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        print_results(summary)
        print(f"results: {cfg.workdir / 'results.json'}, picture: {cfg.workdir / 'world-prm.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
