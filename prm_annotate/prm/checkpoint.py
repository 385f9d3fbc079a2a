"""What `train` and `score` share about a Process Reward Model checkpoint.

The architecture is Qwen2.5-Math-PRM's `Qwen2ForProcessRewardModel`, which vLLM serves: a Qwen2
backbone (`model.*` weights) and a head `score.0` Linear(h, h), ReLU, `score.2` Linear(h, 2),
read at the token that ends each step. Label 1 is "right": a step's score is softmax(logits)[1].

The text a PRM reads is Qwen's convention: a chat of the system prompt, the problem as the user
turn, and the steps as the assistant turn, each step followed by the step tag (`<extra_0>`), put
through the tokenizer's chat template. Training and scoring build it with the same function
(`prm_token_ids`), so the tag tokens a trainer labels are the tokens a scorer reads.

`train` records its choices in the checkpoint's config.json under `prm_annotate` (step tag and its
token id, system prompt); a checkpoint without that block (Qwen2.5-Math-PRM itself) gets Qwen's
defaults. torch and transformers are imported inside the functions that need them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prm_annotate.errors import UsageError
from prm_annotate.export import QWEN_SYSTEM, QWEN_TAG as STEP_TAG

ARCHITECTURE = "Qwen2ForProcessRewardModel"


@dataclass(frozen=True)
class PRMFormat:
    step_tag: str = STEP_TAG
    system_prompt: str | None = QWEN_SYSTEM

    @classmethod
    def of_checkpoint(cls, path: str | Path) -> "PRMFormat":
        try:
            config = json.loads((Path(path) / "config.json").read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: not a PRM checkpoint (cannot read config.json: {exc})") from None
        ours = config.get("prm_annotate") or {}
        return cls(step_tag=ours.get("step_tag", STEP_TAG), system_prompt=ours.get("system_prompt", QWEN_SYSTEM))


def step_tag_id(tokenizer: Any, tag: str) -> int:
    """The tag's token id; the tag must be one token, or step ends cannot be found."""
    ids = tokenizer.encode(tag, add_special_tokens=False)
    if len(ids) != 1:
        raise UsageError(f"the step tag {tag!r} is {len(ids)} tokens for this tokenizer; it must be one")
    return ids[0]


def prm_token_ids(tokenizer: Any, fmt: PRMFormat, problem: str, steps: list[str]) -> list[int]:
    """Token ids of the PRM's input for one response: one step tag after each step."""
    response = "".join(f"{step}{fmt.step_tag}" for step in steps)
    messages = [{"role": "user", "content": problem}, {"role": "assistant", "content": response}]
    if fmt.system_prompt:
        messages.insert(0, {"role": "system", "content": fmt.system_prompt})
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    else:
        text = "\n\n".join(m["content"] for m in messages)
    return tokenizer.encode(text, add_special_tokens=False)


def tag_in_text(fmt: PRMFormat, problem: str, steps: list[str]) -> bool:
    """A tag inside the text would add a step end the labels do not know about."""
    return fmt.step_tag in problem or any(fmt.step_tag in s for s in steps)


def build_model(config: Any) -> Any:
    """A Qwen2 backbone with the PRM head (randomly initialised), as a torch module whose
    state_dict names are the checkpoint's."""
    import torch
    from transformers import Qwen2Model

    class Qwen2ForProcessRewardModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = Qwen2Model(config)
            h = config.hidden_size
            self.score = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, 2))

        def forward(self, input_ids: Any, attention_mask: Any = None) -> Any:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return self.score(hidden)

    return Qwen2ForProcessRewardModel()


def load_model(path: str | Path) -> tuple[Any, Any, PRMFormat]:
    """(model in float32 eval mode, tokenizer, format) of a checkpoint `train` wrote, read with plain
    transformers/torch: the reference `score`'s vLLM results are checked against."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, Qwen2Config

    path = Path(path)
    config = Qwen2Config.from_pretrained(path)
    model = build_model(config)
    weights = load_file(str(path / "model.safetensors"))
    model.load_state_dict({k: v.float() for k, v in weights.items()}, strict=True)
    model.float().eval()
    return model, AutoTokenizer.from_pretrained(path), PRMFormat.of_checkpoint(path)


def transformers_step_scores(model: Any, tokenizer: Any, fmt: PRMFormat, problem: str,
                             steps: list[str]) -> list[float]:
    """P(right) at each step tag, computed directly with transformers (one response, no padding)."""
    import torch

    ids = prm_token_ids(tokenizer, fmt, problem, steps)
    tag = step_tag_id(tokenizer, fmt.step_tag)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    positions = [i for i, t in enumerate(ids) if t == tag]
    return torch.softmax(logits[positions].float(), dim=-1)[:, 1].tolist()
