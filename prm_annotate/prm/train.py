"""Train a Process Reward Model from an export, with plain transformers and torch.

    result = train(TrainConfig(data="train.trl.jsonl", base="path/to/policy", output="prm/"))

Input: the `trl` export of prm-annotate, one row per response: `prompt`, `completions` (the
labelled steps), `labels` (true = right), and for soft labels `scores` (`export --format trl
--keep-scores`). The model: the base checkpoint's Qwen2 backbone plus the PRM head (see prm.py),
the loss: cross-entropy of the head's two logits at each step tag against the label, hard (1 for
right, 0 for wrong) or soft (the MC score as the probability of right, i.e. binary cross-entropy
on the scores). Steps after a first error carry no label in the export and are not in the text.

The output directory is a `Qwen2ForProcessRewardModel` checkpoint (float32 safetensors, config,
tokenizer with the step tag) that vLLM loads with `runner="pooling"` and `score` reads. When the
base tokenizer has no single token for the step tag it is added and the embeddings grow by one
row. A fixed number of optimiser steps over a seeded shuffle makes a run repeatable on one machine.

Where it fits: on CPU, tiny models only (the arithmetic world's 1M-parameter policy trains at a
few steps per second on 2 cores). On one GPU the same code trains a 0.5-1.5B backbone in float32
with AdamW (about 16 bytes per parameter: 1.5B needs ~24 GB before activations); a 7B backbone
needs sharding or 8-bit optimisers, which this trainer does not do.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prm_annotate.errors import InputError, UsageError
from prm_annotate.reports.labels import read_raw
from prm_annotate.prm.checkpoint import ARCHITECTURE, PRMFormat, build_model, prm_token_ids, step_tag_id, tag_in_text


@dataclass
class TrainConfig:
    data: str
    base: str
    output: str
    steps: int = 200
    batch_size: int = 8
    lr: float = 2e-5
    soft: bool = False
    seed: int = 0
    max_length: int = 2048
    step_tag: str = PRMFormat.step_tag
    system_prompt: str | None = PRMFormat.system_prompt
    overwrite: bool = False
    log_every: int = 50
    quiet: bool = False


@dataclass
class Example:
    id: str
    prompt: str
    steps: list[str]
    targets: list[float]  # probability that each step is right: 1/0 (hard) or the MC score (soft)


@dataclass
class TrainResult:
    output: str
    examples: int
    labels: int
    skipped: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    first_loss: float = 0.0  # mean loss of the first `log_every` steps
    last_loss: float = 0.0  # mean loss of the last `log_every` steps
    seconds: float = 0.0


def read_trl(path: str, soft: bool) -> list[Example]:
    """Rows of a `trl` export; a malformed row is an input error naming its line."""
    examples = []
    for where, obj in read_raw(path):
        def bad(message: str) -> InputError:
            return InputError(path, where, message)

        rid, prompt, steps, labels = obj.get("id"), obj.get("prompt"), obj.get("completions"), obj.get("labels")
        if not isinstance(prompt, str) or not isinstance(steps, list) or not isinstance(labels, list):
            raise bad("not a trl export row (needs `prompt`, `completions`, `labels`)")
        if not steps or not all(isinstance(s, str) and s.strip() for s in steps):
            raise bad("`completions` must be a non-empty list of non-empty steps")
        if len(labels) != len(steps) or not all(isinstance(x, bool) for x in labels):
            raise bad(f"`labels` must be {len(steps)} true/false values, one per step")
        if soft:
            scores = obj.get("scores")
            if not isinstance(scores, list) or len(scores) != len(steps) or not all(
                    isinstance(s, (int, float)) and not isinstance(s, bool) and 0 <= s <= 1 for s in scores):
                raise bad("--soft needs `scores` in [0, 1], one per step (export with --keep-scores)")
            targets = [float(s) for s in scores]
        else:
            targets = [1.0 if x else 0.0 for x in labels]
        examples.append(Example(str(rid) if rid is not None else where, prompt, steps, targets))
    if not examples:
        raise InputError(path, "line 0", "no training rows")
    return examples


def _encode(examples: list[Example], tokenizer: Any, fmt: PRMFormat, max_length: int,
            skipped: dict[str, int]) -> list[tuple[list[int], list[int], list[float]]]:
    """(token ids, step-tag positions, targets) per example, cut at `max_length` tokens: labels past
    the cut are lost (counted), an example with none left is skipped."""
    tag = step_tag_id(tokenizer, fmt.step_tag)
    out = []
    for ex in examples:
        if tag_in_text(fmt, ex.prompt, ex.steps):
            skipped["text contains the step tag"] = skipped.get("text contains the step tag", 0) + 1
            continue
        ids = prm_token_ids(tokenizer, fmt, ex.prompt, ex.steps)
        positions = [i for i, t in enumerate(ids) if t == tag]
        assert len(positions) == len(ex.targets), "one tag per step"
        kept = [i for i, p in enumerate(positions) if p < max_length]
        if len(kept) < len(positions):
            skipped["labels cut by --max-length"] = skipped.get("labels cut by --max-length", 0) + len(positions) - len(kept)
        if not kept:
            skipped["no label within --max-length"] = skipped.get("no label within --max-length", 0) + 1
            continue
        out.append((ids[:max_length], [positions[i] for i in kept], [ex.targets[i] for i in kept]))
    return out


def _load_base(base: str, tag: str) -> tuple[Any, Any]:
    """The base checkpoint's backbone (float32) and tokenizer, the step tag made one token."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(base).expanduser()
    if not path.is_dir():
        raise UsageError(f"--base {base}: no such checkpoint directory")
    tokenizer = AutoTokenizer.from_pretrained(path)
    causal = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if len(tokenizer.encode(tag, add_special_tokens=False)) != 1:
        tokenizer.add_tokens([tag], special_tokens=True)
        causal.resize_token_embeddings(len(tokenizer))
    return causal.model, tokenizer


def train(cfg: TrainConfig) -> TrainResult:
    import torch
    import torch.nn.functional as F

    started = time.monotonic()
    out = Path(cfg.output)
    if out.exists() and any(out.iterdir()) and not cfg.overwrite:
        raise UsageError(f"{out} is not empty (use --overwrite to replace it)")
    examples = read_trl(cfg.data, cfg.soft)
    fmt = PRMFormat(step_tag=cfg.step_tag, system_prompt=cfg.system_prompt)
    torch.manual_seed(cfg.seed)
    backbone, tokenizer = _load_base(cfg.base, cfg.step_tag)
    skipped: dict[str, int] = {}
    data = _encode(examples, tokenizer, fmt, cfg.max_length, skipped)
    if not data:
        raise UsageError(f"{cfg.data}: no example left to train on ({skipped})")

    model = build_model(backbone.config)
    model.model.load_state_dict(backbone.state_dict())
    model.float().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rng = random.Random(cfg.seed)
    order: list[int] = []
    losses: list[float] = []
    for step in range(cfg.steps):
        if len(order) < cfg.batch_size:
            shuffled = list(range(len(data)))
            rng.shuffle(shuffled)
            order += shuffled
        batch = [data[i] for i in order[:cfg.batch_size]]
        del order[:cfg.batch_size]
        width = max(len(ids) for ids, _, _ in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        rows, cols, targets = [], [], []
        for b, (tokens, positions, ys) in enumerate(batch):
            ids[b, :len(tokens)] = torch.tensor(tokens)
            mask[b, :len(tokens)] = 1  # right padding: a tag's logits never see the padding
            rows += [b] * len(positions)
            cols += positions
            targets += ys
        logits = model(ids, mask)[rows, cols]
        y = torch.tensor(targets)
        loss = F.cross_entropy(logits, torch.stack([1 - y, y], dim=1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if not cfg.quiet and (step + 1) % cfg.log_every == 0:
            recent = losses[-cfg.log_every:]
            print(f"train: step {step + 1}/{cfg.steps} loss {sum(recent) / len(recent):.4f}", file=sys.stderr, flush=True)

    window = max(1, min(cfg.log_every, len(losses) // 2 or 1))
    result = TrainResult(output=str(out), examples=len(data), labels=sum(len(t) for _, _, t in data),
                         skipped=skipped, steps=cfg.steps,
                         first_loss=sum(losses[:window]) / window, last_loss=sum(losses[-window:]) / window,
                         seconds=round(time.monotonic() - started, 1))
    save(model, tokenizer, backbone.config, cfg, result)
    return result


def save(model: Any, tokenizer: Any, config: Any, cfg: TrainConfig, result: TrainResult) -> None:
    """Write the checkpoint into a temporary directory beside the output, then move it into place:
    an interrupted run leaves no half-written checkpoint."""
    from safetensors.torch import save_file

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        save_file({k: v.detach().float().contiguous() for k, v in model.state_dict().items()},
                  str(tmp / "model.safetensors"))
        tokenizer.save_pretrained(tmp)
        data = config.to_dict()
        data.update(architectures=[ARCHITECTURE], num_labels=2, dtype="float32", vocab_size=len(tokenizer),
                    id2label={"0": "wrong", "1": "right"}, label2id={"wrong": 0, "right": 1})
        settings = {k: v for k, v in asdict(cfg).items() if k not in ("output", "overwrite", "quiet", "log_every")}
        data["prm_annotate"] = {"step_tag": cfg.step_tag, "step_tag_id": step_tag_id(tokenizer, cfg.step_tag),
                                "system_prompt": cfg.system_prompt, "train": settings,
                                "result": {k: v for k, v in asdict(result).items() if k != "output"}}
        (tmp / "config.json").write_text(json.dumps(data, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
