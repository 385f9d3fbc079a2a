from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer

from prm_annotate.cli.app import app, handled
from prm_annotate.prm.checkpoint import PRMFormat


@app.command()
def train(
    data: Annotated[str, typer.Argument(help="A trl export (`export --format trl`; --keep-scores for --soft).")],
    base: Annotated[Path, typer.Option("--base", help="Qwen2 checkpoint whose backbone the PRM starts from (a policy).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory for the PRM checkpoint.")],
    steps: Annotated[int, typer.Option("--steps", min=1, help="Optimiser steps.")] = 200,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Responses per step.")] = 8,
    lr: Annotated[float, typer.Option("--lr", min=0, help="AdamW learning rate.")] = 2e-5,
    soft: Annotated[bool, typer.Option("--soft", help="Train on the MC scores (binary cross-entropy) instead of hard labels.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the head's initialisation and the shuffle.")] = 0,
    max_length: Annotated[int, typer.Option("--max-length", min=8, help="Tokens per response; labels past it are dropped.")] = 2048,
    step_tag: Annotated[str, typer.Option("--step-tag", help="Token written after each step (added to the tokenizer if needed).")] = PRMFormat.step_tag,
    system_prompt: Annotated[Optional[str], typer.Option("--system-prompt", help="System turn of the PRM's input ('' for none).")] = PRMFormat.system_prompt,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a non-empty output directory.")] = False,
    log_every: Annotated[int, typer.Option("--log-every", min=1, help="Print the mean loss every N steps.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run's summary as JSON.")] = False,
) -> None:
    """Train a Process Reward Model (Qwen2ForProcessRewardModel) on an export, with transformers and torch."""
    from prm_annotate.prm.train import TrainConfig, train as run

    with handled():
        result = run(TrainConfig(data=data, base=str(base), output=str(output), steps=steps, batch_size=batch_size,
                                 lr=lr, soft=soft, seed=seed, max_length=max_length, step_tag=step_tag,
                                 system_prompt=system_prompt or None, overwrite=overwrite, log_every=log_every))
    if as_json:
        typer.echo(orjson.dumps(asdict(result), option=orjson.OPT_INDENT_2).decode())
    else:
        typer.echo(f"train: {result.examples} responses, {result.labels} step labels, {result.steps} steps in "
                   f"{result.seconds:.0f} s; loss {result.first_loss:.4f} -> {result.last_loss:.4f}; "
                   f"PRM written to {result.output}", err=True)
        for reason, count in result.skipped.items():
            typer.echo(f"  skipped: {reason}: {count}", err=True)
