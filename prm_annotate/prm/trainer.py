"""The `Trainer` that `train` runs (prm/train.py sets it up): transformers' own, with a length-grouped
sampler that does not depend on the number of devices, the eval metrics of evaluation/metrics.py
(`step_metrics`, fed per response from the eval batches), and progress on stderr (stdout is left to `train --json`).

Length grouping: the Trainer's `group_by_length` groups within megabatches of the per-device batch,
so the batches change with the number of devices, and it draws from the global RNG, so a resumed
epoch is shuffled differently. Here the megabatches are of the global batch and the shuffle is
seeded by (seed, epoch): one process and N processes see the same global batches, and a resumed
run the same as an uninterrupted one.
"""
from __future__ import annotations

import sys
import time
from typing import Any

import torch
from transformers import EarlyStoppingCallback, Trainer, TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.trainer_pt_utils import LengthGroupedSampler

import numpy as np

from prm_annotate.prm.data import IGNORE
from prm_annotate.evaluation.metrics import StepResponse, step_metrics


def responses_of(log_odds: np.ndarray, labels: np.ndarray, step_labels: np.ndarray) -> list[StepResponse]:
    """Per-row responses of a padded eval batch (rows are responses, IGNORE off the labelled tokens)."""
    out = []
    for d, y, h in zip(log_odds, labels, step_labels):
        mask = h != IGNORE
        if mask.any():
            out.append(StepResponse(scores=1 / (1 + np.exp(-d[mask].astype(np.float64))), hard=h[mask],
                                    targets=y[mask].astype(np.float64)))
    return out


def trainer_metrics(eval_pred: Any) -> dict[str, float]:
    """`compute_metrics` for the Trainer: predictions are the log-odds (logit right - logit wrong)
    at every token (`log_odds`), label_ids the (labels, step_labels) pair."""
    labels, step_labels = eval_pred.label_ids
    return step_metrics(responses_of(np.asarray(eval_pred.predictions), np.asarray(labels), np.asarray(step_labels)))


def log_odds(logits: Any, labels: Any) -> Any:
    """`preprocess_logits_for_metrics`: one number per token instead of two, all the metrics need."""
    return (logits[..., 1] - logits[..., 0]).float()


class EpochLengthSampler(LengthGroupedSampler):
    def __init__(self, batch_size: int, lengths: list[int], seed: int) -> None:
        super().__init__(batch_size, lengths=lengths, generator=torch.Generator())
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.generator.manual_seed(self.seed * 100_003 + self.epoch)
        return super().__iter__()


class PRMTrainer(Trainer):
    def __init__(self, *args: Any, group_by_length: bool, eval_collator: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prm_group_by_length = group_by_length
        self.eval_collator = eval_collator

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        if not self.prm_group_by_length:
            return super()._get_train_sampler(train_dataset)
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        global_batch = self.args.train_batch_size * self.args.gradient_accumulation_steps * self.args.world_size
        return EpochLengthSampler(global_batch, [len(f["input_ids"]) for f in dataset], self.args.data_seed or 0)

    def get_eval_dataloader(self, eval_dataset: Any = None) -> Any:
        # Eval batches have their own collator, so the training collator's pad count is training's.
        train_collator, self.data_collator = self.data_collator, self.eval_collator
        try:
            return super().get_eval_dataloader(eval_dataset)
        finally:
            self.data_collator = train_collator


class QuietBar(ProgressCallback):
    """The Trainer's progress bar without its dict-per-log printing (TerminalLog prints those)."""

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        pass


class TerminalLog(TrainerCallback):
    """One line per log on stderr (main process); the wall time of each evaluation, and of the
    steps themselves (first step's start to last step's end: the Trainer's setup left out, as a
    hand-written loop's would be)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.monotonic()
        self.eval_seconds: dict[int, float] = {}
        self.first_step: float | None = None
        self.last_step = 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = time.monotonic()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.first_step is None:
            self.first_step = time.monotonic()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.last_step = time.monotonic()

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        evaluated = "eval_f1" in logs or "eval_token_loss" in logs  # a PRM's evaluation or a critic's
        if evaluated:
            # The first evaluation at a step is the training one; the final re-evaluation comes later.
            self.eval_seconds.setdefault(state.global_step, time.monotonic() - self.started)
        if self.quiet:
            return
        where = f"step {state.global_step}/{state.max_steps}"
        if evaluated:
            shown = [f"{k.removeprefix('eval_')} {logs[k]:.4g}" for k in
                     ("eval_step_loss", "eval_step_accuracy", "eval_step_auc", "eval_f1", "eval_threshold",
                      "eval_f1_at_0.5", "eval_token_loss", "eval_key_accuracy") if k in logs]
            _write(f"eval: {where} " + ", ".join(shown))
        elif "loss" in logs:
            _write(f"train: {where} loss {logs['loss']:.4f} lr {logs.get('learning_rate', 0):.3g}")


def _write(line: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(line, file=sys.stderr)  # above the progress bar, not through it


def build_trainer(cfg: Any, args: Any, model: Any, tokenizer: Any, data: Any, collator: Any,
                  trainer_class: Any = PRMTrainer, metrics: tuple[Any, Any] = (trainer_metrics, log_odds)) -> PRMTrainer:
    """A PRMTrainer, or `trainer_class` (a subclass with its own loss: the critic's) with its
    `metrics` (compute_metrics, preprocess_logits_for_metrics)."""
    callbacks: list[Any] = [TerminalLog(cfg.quiet)]
    if data.eval and cfg.patience:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=cfg.patience))
    compute, preprocess = metrics if data.eval else (None, None)
    trainer = trainer_class(
        model=model, args=args, train_dataset=data.train, eval_dataset=data.eval or None, data_collator=collator,
        processing_class=tokenizer, callbacks=callbacks, compute_metrics=compute,
        preprocess_logits_for_metrics=preprocess, group_by_length=cfg.group_by_length,
        eval_collator=type(collator)(collator.pad_id))
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if not cfg.quiet:
        trainer.add_callback(QuietBar())
    return trainer


def run_trainer(trainer: PRMTrainer, cfg: Any, data: Any, collator: Any, resume_from: str | None,
                started: float) -> dict[str, Any]:
    """Train (from `resume_from` if given), evaluate the model kept, and sum the run up (the
    fields of prm.train.TrainResult)."""
    if resume_from and not cfg.quiet:
        print(f"train: resuming from {resume_from}", file=sys.stderr, flush=True)
    trainer.train(resume_from_checkpoint=resume_from)
    state = trainer.state
    log = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, TerminalLog))
    loop_seconds = log.last_step - log.first_step if log.first_step is not None else 0.0
    losses = [e["loss"] for e in state.log_history if "loss" in e]
    result: dict[str, Any] = dict(
        output=cfg.output, examples=len(data.train),
        labels=sum(len(f["hard"]) if "hard" in f else sum(x != IGNORE for x in f["labels"]) for f in data.train),
        skipped=data.skipped, steps=state.global_step, first_loss=losses[0] if losses else 0.0,
        last_loss=losses[-1] if losses else 0.0, eval_examples=len(data.eval), resumed_from=resume_from,
        pad_share=round(collator.pad_share, 4), tokens=collator.tokens, train_seconds=round(loop_seconds, 3),
        processes=trainer.args.world_size)
    if data.eval:
        metrics = trainer.evaluate()
        result["eval"] = {k.removeprefix("eval_"): v for k, v in metrics.items() if isinstance(v, (int, float))}
        result["threshold"] = result["eval"].get("threshold")
        best = result["best_step"] = state.best_global_step
        result["seconds_to_best"] = round(log.eval_seconds[best], 1) if best in log.eval_seconds else None
    result["seconds"] = round(time.monotonic() - started, 1)
    return result
