from __future__ import annotations

from dataclasses import asdict

import orjson
import typer

from prm_annotate.cli.app import JsonOpt, PANEL_TRAIN, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.prm.train import TrainConfig


@app.command(rich_help_panel=PANEL_TRAIN)
@option_groups
def train(*, config: TrainConfig, as_json: JsonOpt = False) -> None:
    """Train a Process Reward Model (Qwen2ForProcessRewardModel) on an export, or with --head critic a
    judge (a causal LM) on `export --format critic` rows, with transformers' Trainer (one device;
    torchrun or accelerate launch for many, docs/training.md)."""
    from prm_annotate.prm.train import train as run

    with handled():
        result = run(config)
    from accelerate import PartialState

    if not PartialState().is_main_process:
        return
    if as_json:
        typer.echo(orjson.dumps(asdict(result), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode())
        return
    if config.head == "critic":
        best = f"; best eval token loss {result.eval['token_loss']:.4f} at step {result.best_step}" \
            if result.eval else ""
        what, made = f"{result.examples} critiques, {result.labels} assistant tokens", "critic"
    else:
        best = f"; best eval F1 {result.eval['f1']:.1f} at step {result.best_step}, threshold " \
               f"{result.threshold:.3f}" if result.eval else ""
        what, made = f"{result.examples} responses, {result.labels} step labels", "PRM"
    typer.echo(f"train: {what}, {result.steps} steps in {result.seconds:.0f} s; loss {result.first_loss:.4f} -> "
               f"{result.last_loss:.4f}{best}; {made} written to {result.output}", err=True)
    for reason, count in result.skipped.items():
        typer.echo(f"  skipped: {reason}: {count}", err=True)
