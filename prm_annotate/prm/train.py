"""Train a Process Reward Model from an export, on transformers' `Trainer` (accelerate underneath).

    result = train(TrainConfig(data="train.trl.jsonl", base="path/to/policy", output="prm/"))

Input (prm/data.py): a `trl`, `tokens` or `hf` export, hard labels or `--soft` MC scores. The model
(prm/model.py): the base checkpoint's Qwen2 backbone plus the PRM head; the loss: cross-entropy of
the head's two logits at each step tag against the target, summed over the global batch and divided
by its label count, so one process and N processes at the same global batch take the same step.
Steps after a first error carry no label in the exports and are not in the text.

One device by default; `torchrun --nproc-per-node N -m prm_annotate train ...` or `accelerate
launch [--config_file examples/accelerate/fsdp.yaml] -m prm_annotate train ...` for data parallel,
FSDP or DeepSpeed (docs/training.md). `--batch-size` is the global batch: each device takes
batch / (devices x --grad-accum) responses per micro-step. bf16 mixed precision on a GPU that has
it, float32 on CPU; the saved weights are float32 (the master copy) unless DeepSpeed gathers them
in 16 bits.

With an eval set (`--eval FILE`, `--eval-split FRACTION` by problem, or an hf export's `test`
split) every `--eval-every` steps logs the loss per step label, step accuracy and AUC, and the
ProcessBench F1 of the first error at the threshold that maximises it (evaluation/metrics.py); the saved
model is the checkpoint with the best F1, and its threshold goes into the config, where `score`
reads it. `--patience N` stops after N evaluations without a better F1.

Files: the Trainer's `checkpoint-N` folders (model, optimizer, scheduler, RNG, trainer state) go to
`<output>.checkpoints/`; `--resume` continues from the last complete one. The output directory is
written as `.<output>.partial` beside it and renamed into place when complete; it is a
`Qwen2ForProcessRewardModel` checkpoint (safetensors, config, tokenizer with the step tag) that vLLM
loads with `runner="pooling"` and `score` reads. Only the main process writes.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry
from prm_annotate.pipeline.runner import QUIET
from prm_annotate.settings import declare, setting
from prm_annotate.prm.checkpoint import PRMFormat, causal_lm_dir, step_tag_id
from prm_annotate.io.inputs import AUTO
from prm_annotate.prm.critic import VERDICT_PATTERN
from prm_annotate.prm.data import READERS, Data, Example, StepCollator, encode, marker_tag, read_examples, split_by_problem
from prm_annotate.steps import DEFAULT_SEP

DEFAULT_STEPS = 200  # neither --steps nor --epochs
REPORTERS = {"none": None, "tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}
EVAL, RUN = "Evaluation and the best model", "Schedule, devices and checkpoints"  # --help panels


def _none_if_empty(text: str | None) -> str | None:
    return text or None
# Settings that may differ between a run and its --resume without changing what is trained.
RESUME_FREE = ("output", "overwrite", "quiet", "log_every", "resume", "report_to")


@dataclass(frozen=True)
class TrainConfig:
    """How `train` trains a PRM: each field is an option of the command (its setting says which), in
    this --help order."""

    data: str = setting(argument=True, flags=(), help=(
        "An export: trl JSONL (--keep-scores for --soft), tokens JSONL/Parquet, or an hf dataset directory."))
    base: str = setting(flags="--base", help=(
        "The checkpoint the PRM starts from (a policy): Qwen2 for --head qwen, any causal LM for --head likelihood."))
    output: str = setting(flags=("-o", "--output"), help="Directory for the PRM checkpoint (written when complete).")
    steps: Optional[int] = setting(None, flags="--steps", min=1, help=f"Optimiser steps (default {DEFAULT_STEPS} unless --epochs).")
    epochs: Optional[float] = setting(None, flags="--epochs", min=0.0, help="Passes over the training set, instead of --steps.")
    batch_size: int = setting(8, flags="--batch-size", min=1, help=(
        "Responses per optimiser step, over all devices and accumulation steps."))
    grad_accum: int = setting(1, flags="--grad-accum", min=1, panel=RUN, help="Micro-batches per optimiser step.")
    lr: float = setting(2e-5, flags="--lr", min=0, help="AdamW peak learning rate.")
    lr_scheduler: str = setting("cosine", flags="--lr-scheduler", panel=RUN, help=(
        "transformers schedule after the warm-up: cosine, linear, constant_with_warmup, ..."))
    warmup: float = setting(0.05, flags="--warmup", min=0.0, panel=RUN, help="Warm-up: a share of the steps if < 1, else steps.")
    weight_decay: float = setting(0.0, flags="--weight-decay", min=0.0, panel=RUN, help="AdamW weight decay.")
    soft: bool = setting(False, flags="--soft", help="Train on the MC scores (binary cross-entropy) instead of hard labels.")
    seed: int = setting(0, flags="--seed", help="Seed of the head's initialisation and the shuffle.")
    max_length: int = setting(2048, flags="--max-length", min=8, help="Tokens per response; labels past it are dropped.")
    step_tag: str = setting(PRMFormat.step_tag, flags="--step-tag", help=(
        "Token written after each step (added to the tokenizer if needed)."))
    system_prompt: Optional[str] = setting(PRMFormat.system_prompt, flags="--system-prompt", parse=_none_if_empty,
                                           help="System turn of the PRM's input ('' for none).")
    head: str = setting("qwen", flags="--head", help=lambda: PRM_HEADS.help())
    key_weight: float = setting(1.0, flags="--key-weight", min=0.0, help=(
        "--head critic: loss weight of the critique's tokens inside --key-pattern matches (the verdict)."))
    key_pattern: str = setting(VERDICT_PATTERN, flags="--key-pattern", help=(
        "--head critic: regular expression over the critique marking the tokens --key-weight weighs."))
    format: str = setting(AUTO, flags="--format", help=lambda: READERS.help())
    eval: Optional[str] = setting(None, flags="--eval", panel=EVAL, help="Eval set (same formats as DATA).")
    eval_split: float = setting(0.0, flags="--eval-split", min=0.0, max=0.99, panel=EVAL, help=(
        "Hold out this share of DATA's problems for evaluation."))
    eval_every: Optional[int] = setting(None, flags="--eval-every", min=1, panel=EVAL, help=(
        "Evaluate every N steps (default: --save-every)."))
    save_every: int = setting(50, flags="--save-every", min=1, panel=RUN, help=(
        "Write a checkpoint-N folder every N steps (in OUTPUT.checkpoints/)."))
    save_total_limit: Optional[int] = setting(2, flags="--save-total-limit", min=1, panel=RUN, help=(
        "Checkpoints kept (the best one besides)."))
    patience: Optional[int] = setting(None, flags="--patience", min=1, panel=EVAL, help=(
        "Stop after N evaluations without a better F1."))
    group_by_length: bool = setting(True, flags="--group-by-length/--no-group-by-length", panel=RUN, help=(
        "Batch responses of similar length (less padding)."))
    gradient_checkpointing: bool = setting(False, flags="--gradient-checkpointing", panel=RUN, help=(
        "Recompute activations in the backward pass (less memory)."))
    precision: str = setting("auto", flags="--precision", panel=RUN, help=(
        "auto (bf16 on a GPU that has it, else fp32), bf16 or fp32."))
    report_to: str = setting("none", flags="--report-to", panel=RUN, help="none, tensorboard or wandb.")
    resume: bool = setting(False, flags="--resume", panel=RUN, help=(
        "Continue from the last complete checkpoint of an interrupted run."))
    overwrite: bool = setting(False, flags="--overwrite", help="Replace a non-empty output directory and earlier checkpoints.")
    log_every: int = setting(50, flags="--log-every", min=1, help="Print the mean loss every N steps.")
    quiet: bool = declare(QUIET, False)


@dataclass
class TrainResult:
    output: str
    examples: int
    labels: int
    skipped: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    first_loss: float = 0.0  # the loss of the first step
    last_loss: float = 0.0  # the last logged one (mean of `log_every` steps)
    seconds: float = 0.0
    eval_examples: int = 0
    eval: dict[str, float] = field(default_factory=dict)  # the saved model's eval metrics
    best_step: int | None = None
    seconds_to_best: float | None = None  # training wall time until the best evaluation
    threshold: float | None = None
    resumed_from: str | None = None
    pad_share: float = 0.0  # share of the training batches' tokens that were padding (this process)
    tokens: int = 0  # real (non-pad) tokens in this process's training batches
    train_seconds: float = 0.0  # first step's start to last step's end (no loading, setup, final eval or save)
    processes: int = 1
    cache_seconds: float = 0.0  # a likelihood PRM's one reading of the texts by its frozen LM (read_once)


def check_config(cfg: TrainConfig) -> None:
    if cfg.steps is not None and cfg.epochs is not None:
        raise UsageError("give --steps or --epochs, not both")
    if cfg.eval and cfg.eval_split:
        raise UsageError("give --eval FILE or --eval-split FRACTION, not both")
    if not 0.0 <= cfg.eval_split < 1.0:
        raise UsageError(f"--eval-split must be in [0, 1), got {cfg.eval_split}")
    if cfg.precision not in ("auto", "bf16", "fp32"):
        raise UsageError(f"--precision {cfg.precision}: choose auto, bf16 or fp32")
    if PRM_HEADS.named(cfg.head).critic:
        for flag, given in (("--soft", cfg.soft), ("--format", cfg.format != AUTO),
                            ("--step-tag", cfg.step_tag != PRMFormat.step_tag),
                            ("--system-prompt", cfg.system_prompt != PRMFormat.system_prompt)):
            if given:
                raise UsageError(f"{flag}: --head critic trains on critic rows in the base's chat template; it has "
                                 "no step labels, tags or PRM system turn")
        try:
            re.compile(cfg.key_pattern)
        except re.error as exc:
            raise UsageError(f"--key-pattern {cfg.key_pattern!r}: not a regular expression ({exc})") from None
    elif cfg.key_weight != 1.0 or cfg.key_pattern != VERDICT_PATTERN:
        raise UsageError("--key-weight and --key-pattern weigh a critique's tokens: they need --head critic")
    if PRM_HEADS.named(cfg.head).response_start and cfg.gradient_checkpointing:
        raise UsageError(f"--head {cfg.head} trains no LM weights: --gradient-checkpointing does not apply")
    if cfg.report_to not in REPORTERS:
        raise UsageError(f"--report-to {cfg.report_to}: choose from {', '.join(REPORTERS)}")
    modules = REPORTERS[cfg.report_to]
    if modules and not any(importlib.util.find_spec(m) for m in modules):
        raise UsageError(f"--report-to {cfg.report_to} needs the `{modules[0]}` package: pip install {modules[0]}")
    eval_every = cfg.eval_every or cfg.save_every
    if cfg.save_every % eval_every:
        raise UsageError(f"--save-every {cfg.save_every} must be a multiple of --eval-every {eval_every}: the best "
                         "model is chosen among the checkpoints")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.batch_size % (world * cfg.grad_accum):
        raise UsageError(f"--batch-size {cfg.batch_size} is not a multiple of {world} processes x --grad-accum "
                         f"{cfg.grad_accum}")


@dataclass(frozen=True)
class Paths:
    output: Path
    checkpoints: Path
    partial: Path

    @classmethod
    def of(cls, output: str) -> "Paths":
        out = Path(output)
        return cls(out, out.with_name(f"{out.name}.checkpoints"), out.with_name(f".{out.name}.partial"))


def complete_checkpoints(folder: Path) -> list[Path]:
    """checkpoint-N folders whose trainer_state.json (the Trainer's last write) reads, oldest first."""
    found = []
    for sub in folder.glob("checkpoint-*") if folder.is_dir() else []:
        try:
            json.loads((sub / "trainer_state.json").read_text())
            found.append((int(sub.name.split("-")[-1]), sub))
        except (OSError, ValueError):
            continue
    return [p for _, p in sorted(found)]


def _settings(cfg: TrainConfig) -> dict[str, Any]:
    return {k: v for k, v in asdict(cfg).items() if k not in RESUME_FREE}


def _has_checkpoints(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("checkpoint-*"))


def check_folders(cfg: TrainConfig, paths: Paths) -> str | None:
    """Check the output and the checkpoints against --overwrite and --resume, changing nothing;
    the checkpoint to resume from (or None)."""
    out, ckpts = paths.output, paths.checkpoints
    if out.exists() and any(out.iterdir()) and not cfg.overwrite:
        raise UsageError(f"{out} is not empty (use --overwrite to replace it)")
    if not cfg.resume:
        if _has_checkpoints(ckpts) and not cfg.overwrite:
            raise UsageError(f"{ckpts} holds checkpoints of an earlier run: --resume to continue it, or --overwrite "
                             "to start over")
        return None
    done = complete_checkpoints(ckpts)
    saved = ckpts / "train_config.json"
    if done and saved.is_file():
        before = json.loads(saved.read_text())
        changed = sorted(k for k, v in _settings(cfg).items() if before.get(k) != v)
        if changed:
            raise UsageError(f"--resume: {', '.join(changed)} differ from the run in {ckpts}; resume with the same "
                             "settings, or start over with --overwrite")
    return str(done[-1]) if done else None


def claim_folders(cfg: TrainConfig, paths: Paths, resume_from: str | None) -> None:
    """On the main process, once the data has been read: clear what --overwrite replaces (or, on
    resume, the checkpoints the kill cut short, which would later pass for finished ones), and
    record the settings a --resume must repeat."""
    ckpts = paths.checkpoints
    if resume_from is None and ckpts.exists():
        shutil.rmtree(ckpts)
    for sub in ckpts.glob("checkpoint-*"):
        if sub not in complete_checkpoints(ckpts):
            shutil.rmtree(sub, ignore_errors=True)
    ckpts.mkdir(parents=True, exist_ok=True)
    (ckpts / "train_config.json").write_text(json.dumps(_settings(cfg), indent=2) + "\n")


def _device_settings(cfg: TrainConfig) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    if cfg.precision == "bf16" and not (cuda and torch.cuda.is_bf16_supported()):
        raise UsageError("--precision bf16 needs a GPU with bfloat16 (on CPU training runs in float32)")
    bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and cuda and torch.cuda.is_bf16_supported())
    # use_cpu: accelerate makes a multi-process CPU run (gloo) only when told the device is the CPU.
    return {"bf16": bf16, "dataloader_pin_memory": cuda, "use_cpu": not cuda}


def training_arguments(cfg: TrainConfig, paths: Paths, has_eval: bool) -> Any:
    """The Trainer's arguments; built before the model so DeepSpeed ZeRO-3 can shard its loading.
    A PRM's best checkpoint has the best eval F1; a critic's the lowest eval token loss (its
    verdicts need decoding: `judge` and `evaluate --min-f1` read them)."""
    from transformers import TrainingArguments

    critic = PRM_HEADS[cfg.head].critic
    best = {"metric_for_best_model": "token_loss" if critic else "f1", "greater_is_better": not critic} if has_eval \
        else {"metric_for_best_model": None, "greater_is_better": None}

    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_device = cfg.batch_size // (world * cfg.grad_accum)
    steps = cfg.steps if cfg.steps is not None else (-1 if cfg.epochs is not None else DEFAULT_STEPS)
    eval_every = cfg.eval_every or cfg.save_every
    logging_steps = min(cfg.log_every, steps) if steps > 0 else cfg.log_every  # a run shorter than one
    return TrainingArguments(
        output_dir=str(paths.checkpoints), per_device_train_batch_size=per_device,
        per_device_eval_batch_size=per_device, gradient_accumulation_steps=cfg.grad_accum,
        learning_rate=cfg.lr, weight_decay=cfg.weight_decay, max_grad_norm=1.0, lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=cfg.warmup, max_steps=steps, num_train_epochs=cfg.epochs or 1.0,
        gradient_checkpointing=cfg.gradient_checkpointing, gradient_checkpointing_kwargs={"use_reentrant": False},
        eval_strategy="steps" if has_eval else "no", eval_steps=eval_every, save_strategy="steps",
        save_steps=cfg.save_every, save_total_limit=cfg.save_total_limit, load_best_model_at_end=has_eval, **best,
        logging_steps=logging_steps, logging_first_step=True,
        report_to=[] if cfg.report_to == "none" else [cfg.report_to], seed=cfg.seed, data_seed=cfg.seed,
        disable_tqdm=cfg.quiet, label_names=["labels", "loss_weights" if critic else "step_labels"],
        ddp_find_unused_parameters=False,
        # The features are the collator's (positions, targets), not the forward's arguments.
        remove_unused_columns=False, **_device_settings(cfg))


def load_base(base: str, fmt: PRMFormat) -> tuple[Any, Any]:
    """The PRM (the base's Qwen2 backbone, a new head) in float32 and the tokenizer with the step
    tag as one token. The embeddings grow only when the tag's id does not fit in them (a Qwen base
    pads its embedding matrix past the tokenizer), so config and weights always agree."""
    import torch
    from transformers import AutoTokenizer

    from prm_annotate.prm.model import Qwen2ForProcessRewardModel

    path = Path(base).expanduser()
    if not (path / "config.json").is_file():
        raise UsageError(f"--base {base}: no such checkpoint directory")
    if json.loads((path / "config.json").read_text()).get("model_type") != "qwen2":
        raise UsageError(f"--base {base}: not a Qwen2 checkpoint (the PRM vLLM serves is Qwen2ForProcessRewardModel)")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = Qwen2ForProcessRewardModel.from_pretrained(path, dtype=torch.float32)
    if len(tokenizer.encode(fmt.step_tag, add_special_tokens=False)) != 1:
        tokenizer.add_tokens([fmt.step_tag], special_tokens=True)
    rows = model.get_input_embeddings().num_embeddings  # not weight.shape: 0 for a ZeRO-3 partition
    if step_tag_id(tokenizer, fmt.step_tag) >= rows:
        model.resize_token_embeddings(len(tokenizer))
    model.config.prm_annotate = {"step_tag": fmt.step_tag, "step_tag_id": step_tag_id(tokenizer, fmt.step_tag),
                                 "system_prompt": fmt.system_prompt}
    return model, tokenizer


def load_likelihood_base(base: str, fmt: PRMFormat, head_type: str = "step-stats") -> tuple[Any, Any]:
    """The PRM of `--head likelihood` (prm/likelihood.py): any causal LM, frozen, and a new step
    head on its token log-probabilities; the tokenizer with the step tag as one token (the LM's
    embeddings do not grow: the LM never reads the tag)."""
    from transformers import AutoTokenizer

    from prm_annotate.prm.likelihood import build

    path = causal_lm_dir(base, "--head likelihood reads a causal LM's log-probabilities")
    tokenizer = AutoTokenizer.from_pretrained(path)
    if len(tokenizer.encode(fmt.step_tag, add_special_tokens=False)) != 1:
        tokenizer.add_tokens([fmt.step_tag], special_tokens=True)
    model = build(str(path), tokenizer, fmt, head_type)
    model.config.prm_annotate = {"step_tag": fmt.step_tag, "step_tag_id": step_tag_id(tokenizer, fmt.step_tag),
                                 "system_prompt": fmt.system_prompt, "step_separator": fmt.separator}
    return model, tokenizer


@dataclass(frozen=True)
class Head:
    """A kind of PRM `train` makes.

    Attributes:
        load: (base, format) -> (model, tokenizer).
        separator: written between a step and its tag (PRMFormat.separator).
        response_start: the features carry where the response begins (the likelihood head's first step).
        critic: not a PRM: the base causal LM fine-tuned on critic rows (prm/critic.py), a judge.
    """
    name: str
    summary: str
    load: Any
    separator: str = ""
    response_start: bool = False
    critic: bool = False


PRM_HEADS: Registry[Head] = Registry("--head", "What train makes: a PRM, or a critic", "docs/training.md", (
    Head("qwen", "the base fine-tuned as Qwen2ForProcessRewardModel", load_base),
    # The steps' own separator stays in the text, so the LM reads the response as it was written.
    Head("likelihood", "a step head on the frozen base's token log-probabilities", load_likelihood_base,
         separator=DEFAULT_SEP, response_start=True),
    # The per-token scorer (prm/likelihood.py "token-score"): not shown better than "step-stats" at
    # ordering responses on the world, worse at locating the first error (docs/world-prm.md).
    Head("likelihood-tokens", "a per-token scorer pooled over each step, on the frozen base's log-probabilities",
         functools.partial(load_likelihood_base, head_type="token-score"), separator=DEFAULT_SEP,
         response_start=True),
    Head("critic", "not a PRM: the base causal LM fine-tuned on `export --format critic` rows, a judge (prm/critic.py)", None, critic=True),
))


def _sources(cfg: TrainConfig) -> tuple[list[Example], list[Example]]:
    splits = read_examples(cfg.data, cfg.format, cfg.soft)
    train_rows = splits["train"]
    if cfg.eval:
        other = read_examples(cfg.eval, cfg.format, cfg.soft)
        return train_rows, other.get("test") or other["train"]
    if cfg.eval_split:
        return split_by_problem(train_rows, cfg.eval_split)
    return train_rows, splits.get("test", [])


def load_data(cfg: TrainConfig, model_of: Any = None) -> tuple[Data, Any, Any]:
    """The encoded train and eval sets, with the model and tokenizer they were encoded for (a
    tokens export names its own step tag and has no system turn)."""
    head = PRM_HEADS[cfg.head]
    model_of = model_of or head.load
    train_rows, eval_rows = _sources(cfg)
    fmt = PRMFormat(step_tag=cfg.step_tag, system_prompt=cfg.system_prompt, separator=head.separator)
    tokenized = [e for e in train_rows + eval_rows if e.input_ids is not None]
    if tokenized and head.response_start:
        raise UsageError(f"{cfg.data}: --head {cfg.head} builds its own text (the steps with their separator); "
                         "give a trl or hf export, not a tokens one")
    if tokenized:
        if len(tokenized) < len(train_rows) + len(eval_rows):
            raise UsageError("--eval: a tokens export and a text export do not mix (one is tokenized already)")
        from transformers import AutoTokenizer

        tag = marker_tag(tokenized, AutoTokenizer.from_pretrained(Path(cfg.base).expanduser()), cfg.data)
        fmt = PRMFormat(step_tag=tag, system_prompt=None)
    model, tokenizer = model_of(cfg.base, fmt)
    skipped: dict[str, int] = {}
    train_set = encode(train_rows, tokenizer, fmt, cfg.max_length, skipped, head.response_start)
    eval_set = encode(eval_rows, tokenizer, fmt, cfg.max_length, {}, head.response_start)
    if not train_set:
        raise UsageError(f"{cfg.data}: no example left to train on ({skipped})")
    rows = model.get_input_embeddings().num_embeddings
    tag = step_tag_id(tokenizer, fmt.step_tag)
    read = (lambda ids: [i for i in ids if i != tag]) if head.response_start \
        else (lambda ids: ids)  # the likelihood PRM's LM never reads the tag
    if any(max(read(f["input_ids"]), default=0) >= rows for f in train_set + eval_set):
        raise UsageError(f"{cfg.data}: token ids past the --base embeddings ({rows}): export with the base's tokenizer")
    eval_set.sort(key=lambda f: len(f["input_ids"]))  # less padding; the metrics do not depend on order
    return Data(train_set, eval_set, fmt, skipped), model, tokenizer


def train(cfg: TrainConfig, readings: Any = None) -> TrainResult:
    """`readings`: a likelihood PRM's LM readings kept from earlier PRMs on the same LM (read_once)."""
    from accelerate import PartialState
    from transformers import set_seed

    from prm_annotate.prm.critic import (CriticCollator, critic_data, critic_metrics, critic_trainer_class,
                                         token_losses)
    from prm_annotate.prm.trainer import build_trainer, run_trainer

    started = time.monotonic()
    check_config(cfg)
    if cfg.quiet:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # the base's load report and the save progress bars
        hf_logging.disable_progress_bar()
    paths = Paths.of(cfg.output)
    has_eval = bool(cfg.eval or cfg.eval_split or _hf_has_test(cfg))
    args = training_arguments(cfg, paths, has_eval)
    state = PartialState()
    resume_from = check_folders(cfg, paths)
    set_seed(cfg.seed)  # the head's initialisation, the same on every process
    critic = PRM_HEADS[cfg.head].critic
    data, model, tokenizer = critic_data(cfg) if critic else load_data(cfg)
    if has_eval and not data.eval:
        raise UsageError("the eval set is empty after encoding")
    cache_seconds = read_once(cfg, model, data, state, readings)
    if state.is_main_process:
        claim_folders(cfg, paths, resume_from)
    state.wait_for_everyone()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    collator = CriticCollator(pad_id) if critic else StepCollator(pad_id)
    trainer = build_trainer(cfg, args, model, tokenizer, data, collator, *(
        (critic_trainer_class(), (critic_metrics, token_losses)) if critic else ()))
    result = TrainResult(**run_trainer(trainer, cfg, data, collator, resume_from, started), cache_seconds=cache_seconds)
    save_final(trainer, cfg, paths, data.fmt, result, state)
    return result


def read_once(cfg: TrainConfig, model: Any, data: Data, state: Any, readings: Any = None) -> float:
    """A likelihood PRM's LM is frozen: it reads every training and eval text once, here, and the
    Trainer trains the head on what it read (prm/likelihood.py cache_token_logprobs), instead of
    reading each text again at every epoch and evaluation; `readings` (likelihood.LMReadings) keeps
    them for the next PRM on the same LM. Seconds taken (0 for other heads)."""
    if not PRM_HEADS[cfg.head].response_start:
        return 0.0
    from prm_annotate.prm.likelihood import cache_token_logprobs

    began = time.monotonic()
    model.to(state.device)
    cache_token_logprobs(model, data.train + data.eval, readings)
    return round(time.monotonic() - began, 1)


def _hf_has_test(cfg: TrainConfig) -> bool:
    return Path(cfg.data).is_dir() and (Path(cfg.data) / "test").is_dir()


def save_final(trainer: Any, cfg: TrainConfig, paths: Paths, fmt: PRMFormat, result: TrainResult,
               state: Any) -> None:
    """Every process calls save_model (FSDP and ZeRO-3 gather the weights collectively); the main
    one writes into the partial directory, then renames it into place."""
    model = trainer.model
    rows = model.get_input_embeddings().num_embeddings
    if cfg.head == "qwen" and model.config.vocab_size != rows:
        raise AssertionError(f"config vocab_size {model.config.vocab_size} != {rows} embedding rows")
    trained = {"train": {k: v for k, v in asdict(cfg).items() if k not in RESUME_FREE},
               "result": {k: v for k, v in asdict(result).items() if k != "output"}}
    if PRM_HEADS[cfg.head].critic:
        model.config.prm_annotate = {"critic": {**model.config.prm_annotate["critic"], **trained}}
    else:
        model.config.prm_annotate = {**model.config.prm_annotate, "threshold": result.threshold, **trained}
    if state.is_main_process:
        shutil.rmtree(paths.partial, ignore_errors=True)
    state.wait_for_everyone()
    trainer.save_model(str(paths.partial))
    state.wait_for_everyone()
    if state.is_main_process:
        # The pickled TrainingArguments belong to the run's checkpoints, not to the model.
        (paths.partial / "training_args.bin").unlink(missing_ok=True)
        if paths.output.exists():
            shutil.rmtree(paths.output)
        os.replace(paths.partial, paths.output)
    state.wait_for_everyone()
