"""`Qwen2ForProcessRewardModel` as a transformers model, so that `Trainer`/accelerate (DDP, FSDP,
DeepSpeed), `save_pretrained`/`from_pretrained` and gradient checkpointing handle it like any other.

The layout is Qwen2.5-Math-PRM's, the one vLLM's `qwen2_rm.py` loads unchanged: the Qwen2 backbone
under `model.*` and the head `score.0` Linear(h, h), ReLU, `score.2` Linear(h, 2). The config is a
plain `Qwen2Config` (`model_type` "qwen2", which vLLM and `AutoConfig` need to read it); the class
name is what `save_pretrained` writes into `architectures`.

Training targets ride in `labels`, one float per token: the probability that the step ending at
that token is right (1/0 for hard labels, an MC score for soft ones), IGNORE (-100) on every other
token. This module imports torch and transformers: import it only where a model is needed.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Qwen2Config, Qwen2Model
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.models.qwen2.modeling_qwen2 import Qwen2PreTrainedModel

IGNORE = -100  # transformers' ignore index: a token with no step label
LABELS = {0: "wrong", 1: "right"}


def step_loss(logits: torch.Tensor, labels: torch.Tensor, num_items: Any = None) -> torch.Tensor:
    """Cross-entropy of the two logits at the labelled tokens against (1 - target, target); a sum
    over `num_items` labels when the Trainer gives that count for the whole (accumulated, all-rank)
    batch, so that any split of a batch over devices and accumulation steps gives one gradient."""
    mask = labels != IGNORE
    target = labels[mask].float()
    picked = logits[mask].float()
    total = F.cross_entropy(picked, torch.stack([1 - target, target], dim=1), reduction="sum")
    count = num_items if num_items is not None else mask.sum().clamp(min=1)
    return total / count


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    config_class = Qwen2Config
    # The forward takes `num_items_in_batch`: the Trainer then normalises the loss by the labels of
    # the global batch instead of averaging per-device means (see step_loss).
    accepts_loss_kwargs = True

    def __init__(self, config: Qwen2Config) -> None:
        config.id2label, config.label2id = dict(LABELS), {v: k for k, v in LABELS.items()}
        super().__init__(config)
        self.model = Qwen2Model(config)
        h = config.hidden_size
        self.score = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # The head starts as torch's own Linear does (uniform, +-1/sqrt(fan_in)), not the backbone's
        # normal(0, initializer_range): for a small hidden size the latter starts the logits so
        # close to 0 that the head learns several times slower; for a 7B (h = 3584) they are alike.
        if isinstance(module, nn.Linear) and any(module is m for m in self.score):
            module.reset_parameters()
            return
        super()._init_weights(module)

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.model.embed_tokens = value

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, step_labels: torch.Tensor | None = None,
                num_items_in_batch: Any = None, **kwargs: Any) -> TokenClassifierOutput:
        # step_labels (the hard labels) are only carried through to the eval metrics.
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                            **kwargs).last_hidden_state
        logits = self.score(hidden)
        loss = step_loss(logits, labels, num_items_in_batch) if labels is not None else None
        return TokenClassifierOutput(loss=loss, logits=logits)
