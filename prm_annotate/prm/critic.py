"""`train --head critic`: a generative verifier (a causal LM that writes a critique, then a
verdict), fine-tuned on `export --format critic|critic-hf` rows on the same Trainer stack as the
PRMs (prm/train.py: folders, resume, devices, schedule; prm/trainer.py: the sampler and the log).

- Rows: `messages` = [user: the judge prompt the judge saw, assistant: its critique]. Only rows
  whose verdict agrees with the consensus (`agrees`, true in every `--votes agreeing` export) are
  trained on: a `--votes all` export's disagreeing critiques are wrong answers, counted and left out.
- Text: the base's own chat template renders the conversation; the prompt is the template's
  rendering of the user turn with the generation prompt, and the loss is on every token after it
  (the critique and the template's end of turn, so the critic learns to stop; a template that
  leaves the last turn open gets the tokenizer's eos token after the critique). A template that
  renders the user turn differently once the answer follows is refused (no assistant tokens to
  tell apart).
- Loss: next-token cross-entropy on the assistant tokens, each weighted (`--key-weight W` on the
  tokens inside matches of `--key-pattern`, by default the verdict `\\boxed{...}`; 1 elsewhere),
  summed over the global batch and divided by its count of assistant tokens, so one process and N
  processes at the same global batch take the same step.
- Best checkpoint: by the eval token loss (the same weighted loss over all the eval rows' assistant
  tokens), the cheap measure a run can take every `--eval-every` steps; beside it the share of the
  key tokens (the verdict) predicted exactly under teacher forcing. The verdicts themselves are
  decoded by `judge --model` and checked with `evaluate --min-f1` (docs/training.md).

The output is the base's causal LM, fine-tuned (float32 safetensors), with its tokenizer and chat
template: `judge --model OUTPUT --prompt <the rows' judge prompt> --protocol strict` runs it in
process or behind `vllm serve`. Its config records `prm_annotate.critic` (the judge prompt(s) the
rows were written with, the training settings and result).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prm_annotate.errors import InputError, UsageError
from prm_annotate.prm.checkpoint import causal_lm_dir
from prm_annotate.prm.data import IGNORE, Data, PaddedBatches, dataset_splits, split_by_problem
from prm_annotate.evaluation.labels import read_rows

# The verdict a strict judge prompt asks for (`\boxed{index}`): the tokens `--key-weight` weighs by default.
VERDICT_PATTERN = r"\\boxed\{[^{}]*\}"
DISAGREEING = "critiques whose verdict is not the consensus first error (--votes all rows): not trained on"
TOO_LONG = "rows over --max-length tokens"


@dataclass
class CriticRow:
    id: str
    group: str  # the problem: an eval split never parts a problem's responses
    messages: list[dict[str, str]]
    judge_prompt: str | None = None


def critic_row(obj: dict[str, Any], bad: Any, where: str, skipped: dict[str, int]) -> CriticRow | None:
    messages = obj.get("messages")
    if not isinstance(messages, list) or len(messages) < 2 or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        raise bad("not a critic export row (needs `messages`: role/content turns ending with the critique)")
    if messages[-1]["role"] != "assistant" or not messages[-1]["content"].strip():
        raise bad("the last message must be the assistant's critique (a non-empty text)")
    agrees = obj.get("agrees", True)
    if not isinstance(agrees, bool):
        raise bad("`agrees` must be true or false")
    if not agrees:
        skipped[DISAGREEING] = skipped.get(DISAGREEING, 0) + 1
        return None
    rid = str(obj["id"]) if obj.get("id") is not None else where
    prompt = obj.get("judge_prompt")
    return CriticRow(rid, rid.rsplit("/", 1)[0], [{"role": m["role"], "content": m["content"]} for m in messages],
                     prompt if isinstance(prompt, str) else None)


def read_critic(path: str, skipped: dict[str, int]) -> dict[str, list[CriticRow]]:
    """The rows of a critic export: JSONL or Parquet (one `train` split), or a critic-hf directory."""
    if Path(path).is_dir():
        splits = dataset_splits(path, "critic-hf")
        return {name: [r for i, obj in enumerate(splits[name]) if (r := critic_row(
            obj, lambda m, w=f"{name} row {i + 1}": InputError(path, w, m), f"{name}/{i}", skipped)) is not None]
            for name in splits.keys()}
    rows = []
    for where, obj in read_rows(path):
        row = critic_row(obj, lambda m, w=where: InputError(path, w, m), where, skipped)
        if row is not None:
            rows.append(row)
    return {"train": rows}


def critic_sources(cfg: Any, skipped: dict[str, int]) -> tuple[list[CriticRow], list[CriticRow]]:
    """(train, eval) rows, as `train` splits a PRM's: --eval FILE, --eval-split by problem, or the
    critic-hf export's own `test` split."""
    splits = read_critic(cfg.data, skipped)
    train_rows = splits["train"]
    if cfg.eval:
        other = read_critic(cfg.eval, {})
        return train_rows, other.get("test") or other["train"]
    if cfg.eval_split:
        return split_by_problem(train_rows, cfg.eval_split)  # type: ignore[arg-type]
    return train_rows, splits.get("test", [])


def encode_row(row: CriticRow, tokenizer: Any, key: re.Pattern[str] | None, key_weight: float) -> dict[str, Any]:
    """input_ids, labels (IGNORE on the prompt) and a loss weight per token, the chat template's
    rendering split at the generation prompt."""
    prompt = tokenizer.apply_chat_template(row.messages[:-1], tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(row.messages, tokenize=False)
    if full.rstrip().endswith(row.messages[-1]["content"].rstrip()):
        # A template that leaves the last assistant turn open (for continue_final_message) writes no
        # end of turn: the critic learns the token generation stops at, or it would never stop.
        if not tokenizer.eos_token:
            raise UsageError("the base's chat template leaves the critique's turn open and its tokenizer has no "
                             "eos token: the critic could not learn to stop")
        full += tokenizer.eos_token
    if not full.startswith(prompt):
        raise UsageError("the base's chat template renders the user turn differently once the critique follows: "
                         "the critique's tokens cannot be told from the prompt's")
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids = enc["input_ids"]
    if ids[: len(prompt_ids)] != prompt_ids:
        raise UsageError("the prompt's tokens change when the critique follows it (the tokenizer merges across "
                         "the generation prompt's end): the critique's tokens cannot be told apart")
    spans: list[tuple[int, int]] = []
    critique = row.messages[-1]["content"]
    at = full.find(critique, len(prompt))
    if key is not None and at >= 0:
        spans = [(at + m.start(), at + m.end()) for m in key.finditer(critique)]
    weights = [key_weight if any(s < b and a < e for s, e in spans) else 1.0 for a, b in enc["offset_mapping"]]
    n = len(prompt_ids)
    return {"input_ids": ids, "labels": [IGNORE] * n + ids[n:], "loss_weights": [0.0] * n + weights[n:]}


def encode_rows(rows: list[CriticRow], tokenizer: Any, cfg: Any, skipped: dict[str, int]) -> list[dict[str, Any]]:
    key = re.compile(cfg.key_pattern) if cfg.key_weight != 1.0 else None
    out = []
    for row in rows:
        feature = encode_row(row, tokenizer, key, cfg.key_weight)
        if len(feature["input_ids"]) > cfg.max_length:
            # A cut critique would teach the critic to stop before its verdict.
            skipped[TOO_LONG] = skipped.get(TOO_LONG, 0) + 1
            continue
        out.append(feature)
    return out


class CriticCollator(PaddedBatches):
    """Right-padded `input_ids`, `attention_mask`, `labels` (IGNORE off the assistant tokens) and
    `loss_weights`."""

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        ids, mask, width = self.pad(features)
        labels = torch.full((len(features), width), IGNORE, dtype=torch.long)
        weights = torch.zeros((len(features), width))
        for b, f in enumerate(features):
            n = len(f["input_ids"])
            labels[b, :n] = torch.tensor(f["labels"])
            weights[b, :n] = torch.tensor(f["loss_weights"])
        return {"input_ids": ids, "attention_mask": mask, "labels": labels, "loss_weights": weights}


def weighted_token_loss(logits: Any, labels: Any, weights: Any, num_items: Any = None) -> Any:
    """Next-token cross-entropy weighted per token, summed and divided by `num_items` (the Trainer's
    count of labelled tokens in the whole accumulated, all-process batch) or this batch's count."""
    import torch.nn.functional as F

    logits, labels, weights = logits[:, :-1], labels[:, 1:], weights[:, 1:]
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1), ignore_index=IGNORE,
                         reduction="none").view(labels.shape)
    count = num_items if num_items is not None else (labels != IGNORE).sum().clamp(min=1)
    return (ce * weights * (labels != IGNORE)).sum() / count


def token_losses(logits: Any, labels: Any) -> Any:
    """`preprocess_logits_for_metrics`: per token, the cross-entropy of its label and whether the
    model's top token is it, placed at the label's position ([batch, length, 2]; 0 at the first)."""
    import torch
    import torch.nn.functional as F

    labels = labels[0]  # (labels, loss_weights)
    shifted = labels[:, 1:]
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)).float(), shifted.reshape(-1),
                         ignore_index=IGNORE, reduction="none").view(shifted.shape)
    right = (logits[:, :-1].argmax(-1) == shifted).float()
    out = torch.zeros((*labels.shape, 2), dtype=torch.float32, device=logits.device)
    out[:, 1:, 0], out[:, 1:, 1] = ce, right
    return out


def critic_metrics(eval_pred: Any) -> dict[str, float]:
    """`compute_metrics`: the weighted token loss over the whole eval set (the training loss's
    definition, so the best checkpoint's measure does not depend on the eval batches or devices),
    and the share of the --key-pattern tokens (the verdict's) predicted exactly under teacher forcing."""
    import numpy as np

    per_token = np.asarray(eval_pred.predictions)
    labels, weights = (np.asarray(x) for x in eval_pred.label_ids)
    mask = labels != IGNORE
    mask[:, 0] = False  # nothing predicts the first token
    ce, right = per_token[..., 0], per_token[..., 1]
    out = {"token_loss": float((ce * weights * mask).sum() / max(1, mask.sum()))}
    key = mask & (weights != 1.0)
    if key.any():
        out["key_accuracy"] = float(right[key].mean())
    return out


def load_critic_base(base: str) -> tuple[Any, Any]:
    """The base causal LM in float32 and its tokenizer, which must have a chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = causal_lm_dir(base, "--head critic fine-tunes a causal LM")
    tokenizer = AutoTokenizer.from_pretrained(path)
    if not getattr(tokenizer, "chat_template", None):
        raise UsageError(f"--base {base}: its tokenizer has no chat template (the critic is trained and served in it)")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model, tokenizer


def critic_data(cfg: Any) -> tuple[Any, Any, Any]:
    """The encoded train and eval sets (prm.train.Data), the model and the tokenizer."""
    skipped: dict[str, int] = {}
    train_rows, eval_rows = critic_sources(cfg, skipped)
    model, tokenizer = load_critic_base(cfg.base)
    train_set = encode_rows(train_rows, tokenizer, cfg, skipped)
    eval_set = encode_rows(eval_rows, tokenizer, cfg, {})
    if not train_set:
        raise UsageError(f"{cfg.data}: no critique left to train on ({skipped})")
    rows = model.get_input_embeddings().num_embeddings
    if any(max(f["input_ids"]) >= rows for f in train_set + eval_set):
        raise UsageError(f"{cfg.data}: token ids past the --base embeddings ({rows})")
    eval_set.sort(key=lambda f: len(f["input_ids"]))
    model.config.prm_annotate = {"critic": {
        "judge_prompts": sorted({r.judge_prompt for r in train_rows if r.judge_prompt}),
        "key_pattern": cfg.key_pattern if cfg.key_weight != 1.0 else None}}
    return Data(train_set, eval_set, None, skipped), model, tokenizer


def critic_trainer_class() -> Any:
    from prm_annotate.prm.trainer import PRMTrainer

    class CriticTrainer(PRMTrainer):
        """PRMTrainer (its sampler, eval collator) with the weighted next-token loss."""

        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            labels, weights = inputs.pop("labels"), inputs.pop("loss_weights")
            outputs = model(**inputs, use_cache=False)
            loss = weighted_token_loss(outputs.logits, labels, weights, num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes  # DDP averages the processes' gradients
            return (loss, outputs) if return_outputs else loss

    return CriticTrainer

