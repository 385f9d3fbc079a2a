from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer

from prm_annotate.cli.app import app, handled
from prm_annotate.prm.checkpoint import PRMFormat

EVAL = "Evaluation and the best model"
RUN = "Schedule, devices and checkpoints"


@app.command()
def train(
    data: Annotated[str, typer.Argument(help="An export: trl JSONL (--keep-scores for --soft), tokens JSONL/Parquet, or an hf dataset directory.")],
    base: Annotated[Path, typer.Option("--base", help="The checkpoint the PRM starts from (a policy): Qwen2 for --head qwen, any causal LM for --head likelihood.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory for the PRM checkpoint (written when complete).")],
    steps: Annotated[Optional[int], typer.Option("--steps", min=1, help="Optimiser steps (default 200 unless --epochs).")] = None,
    epochs: Annotated[Optional[float], typer.Option("--epochs", min=0.0, help="Passes over the training set, instead of --steps.")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Responses per optimiser step, over all devices and accumulation steps.")] = 8,
    lr: Annotated[float, typer.Option("--lr", min=0, help="AdamW peak learning rate.")] = 2e-5,
    soft: Annotated[bool, typer.Option("--soft", help="Train on the MC scores (binary cross-entropy) instead of hard labels.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the head's initialisation and the shuffle.")] = 0,
    max_length: Annotated[int, typer.Option("--max-length", min=8, help="Tokens per response; labels past it are dropped.")] = 2048,
    step_tag: Annotated[str, typer.Option("--step-tag", help="Token written after each step (added to the tokenizer if needed).")] = PRMFormat.step_tag,
    system_prompt: Annotated[Optional[str], typer.Option("--system-prompt", help="System turn of the PRM's input ('' for none).")] = PRMFormat.system_prompt,
    head: Annotated[str, typer.Option("--head", help="qwen (the base fine-tuned as Qwen2ForProcessRewardModel), likelihood or likelihood-tokens (heads on the frozen base's token log-probabilities; docs/training.md).")] = "qwen",
    data_format: Annotated[str, typer.Option("--format", help="auto, trl, tokens or hf.")] = "auto",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a non-empty output directory and earlier checkpoints.")] = False,
    log_every: Annotated[int, typer.Option("--log-every", min=1, help="Print the mean loss every N steps.")] = 50,
    eval_file: Annotated[Optional[str], typer.Option("--eval", help="Eval set (same formats as DATA).", rich_help_panel=EVAL)] = None,
    eval_split: Annotated[float, typer.Option("--eval-split", min=0.0, max=0.99, help="Hold out this share of DATA's problems for evaluation.", rich_help_panel=EVAL)] = 0.0,
    eval_every: Annotated[Optional[int], typer.Option("--eval-every", min=1, help="Evaluate every N steps (default: --save-every).", rich_help_panel=EVAL)] = None,
    patience: Annotated[Optional[int], typer.Option("--patience", min=1, help="Stop after N evaluations without a better F1.", rich_help_panel=EVAL)] = None,
    grad_accum: Annotated[int, typer.Option("--grad-accum", min=1, help="Micro-batches per optimiser step.", rich_help_panel=RUN)] = 1,
    lr_scheduler: Annotated[str, typer.Option("--lr-scheduler", help="transformers schedule after the warm-up: cosine, linear, constant_with_warmup, ...", rich_help_panel=RUN)] = "cosine",
    warmup: Annotated[float, typer.Option("--warmup", min=0.0, help="Warm-up: a share of the steps if < 1, else steps.", rich_help_panel=RUN)] = 0.05,
    weight_decay: Annotated[float, typer.Option("--weight-decay", min=0.0, help="AdamW weight decay.", rich_help_panel=RUN)] = 0.0,
    group_by_length: Annotated[bool, typer.Option("--group-by-length/--no-group-by-length", help="Batch responses of similar length (less padding).", rich_help_panel=RUN)] = True,
    gradient_checkpointing: Annotated[bool, typer.Option("--gradient-checkpointing", help="Recompute activations in the backward pass (less memory).", rich_help_panel=RUN)] = False,
    precision: Annotated[str, typer.Option("--precision", help="auto (bf16 on a GPU that has it, else fp32), bf16 or fp32.", rich_help_panel=RUN)] = "auto",
    save_every: Annotated[int, typer.Option("--save-every", min=1, help="Write a checkpoint-N folder every N steps (in OUTPUT.checkpoints/).", rich_help_panel=RUN)] = 50,
    save_total_limit: Annotated[Optional[int], typer.Option("--save-total-limit", min=1, help="Checkpoints kept (the best one besides).", rich_help_panel=RUN)] = 2,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the last complete checkpoint of an interrupted run.", rich_help_panel=RUN)] = False,
    report_to: Annotated[str, typer.Option("--report-to", help="none, tensorboard or wandb.", rich_help_panel=RUN)] = "none",
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar or log lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run's summary as JSON.")] = False,
) -> None:
    """Train a Process Reward Model (Qwen2ForProcessRewardModel) on an export, with transformers' Trainer
    (one device; torchrun or accelerate launch for many, docs/training.md)."""
    from prm_annotate.prm.train import TrainConfig, train as run

    with handled():
        result = run(TrainConfig(
            data=data, base=str(base), output=str(output), steps=steps, epochs=epochs, batch_size=batch_size,
            grad_accum=grad_accum, lr=lr, lr_scheduler=lr_scheduler, warmup=warmup, weight_decay=weight_decay,
            soft=soft, seed=seed, max_length=max_length, step_tag=step_tag, system_prompt=system_prompt or None,
            head=head, format=data_format, eval=eval_file, eval_split=eval_split, eval_every=eval_every, save_every=save_every,
            save_total_limit=save_total_limit, patience=patience, group_by_length=group_by_length,
            gradient_checkpointing=gradient_checkpointing, precision=precision, report_to=report_to, resume=resume,
            overwrite=overwrite, log_every=log_every, quiet=quiet))
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
