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
    """Train a Process Reward Model (Qwen2ForProcessRewardModel) on an export, with transformers' Trainer
    (one device; torchrun or accelerate launch for many, docs/training.md)."""
    from prm_annotate.prm.train import train as run

    with handled():
        result = run(config)
    from accelerate import PartialState

    if not PartialState().is_main_process:
        return
    if as_json:
        typer.echo(orjson.dumps(asdict(result), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode())
        return
    best = f"; best eval F1 {result.eval['f1']:.1f} at step {result.best_step}, threshold {result.threshold:.3f}" \
        if result.eval else ""
    typer.echo(f"train: {result.examples} responses, {result.labels} step labels, {result.steps} steps in "
               f"{result.seconds:.0f} s; loss {result.first_loss:.4f} -> {result.last_loss:.4f}{best}; "
               f"PRM written to {result.output}", err=True)
    for reason, count in result.skipped.items():
        typer.echo(f"  skipped: {reason}: {count}", err=True)
