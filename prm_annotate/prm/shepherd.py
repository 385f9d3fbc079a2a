"""Math-Shepherd-style PRMs: a causal LM read at each step tag, `peiyi9979/math-shepherd-mistral-7b-prm`'s
way (its model card):

    input       question + " " + "Step 1: <step> ки\\nStep 2: <step> ки..." (each step stripped,
                numbered, followed by a space and the tag; steps joined by "\\n"), tokenized with the
                tokenizer's special tokens (Mistral's BOS)
    tag         the positions whose token is `encode("ки")[-1]`
    score       softmax over the LM's logits of the two candidate tokens `encode("+ -")` (the card
                drops the BOS with `[1:]`; here no special tokens are asked for, the same two ids),
                index 0: P(+), at each tag

The card's numbering ("Step k: ") is kept: it is the text the model was trained on. How
ProcessBench's authors formatted its steps for this model is not published; this is the card's
form. Read with transformers (on a GPU if there is one), not vLLM: vLLM's pooling path for a
causal LM does not read vocabulary logits at a token (vLLM issue #16545). Responses are
right-padded into batches of up to `TOKENS_PER_FORWARD` tokens, and only the tag positions go
through the LM head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from prm_annotate.engines.defaults import resolve_dtype
from prm_annotate.errors import UsageError
from prm_annotate.export.math_shepherd import SHEPHERD_TAG
from prm_annotate.prm.checkpoint import DEFAULT_THRESHOLD, Checkpoint

TOKENS_PER_FORWARD = 16384  # padded tokens in one forward pass


@dataclass(frozen=True)
class ShepherdFormat:
    step_tag: str = SHEPHERD_TAG
    good: str = "+"
    bad: str = "-"
    threshold: float = DEFAULT_THRESHOLD

    def text(self, problem: str, steps: list[str]) -> str:
        return f"{problem} " + "\n".join(f"Step {k}: {step.strip()} {self.step_tag}" for k, step in enumerate(steps, 1))


def reading_ids(tokenizer: Any, fmt: ShepherdFormat) -> tuple[int, list[int]]:
    """(the tag's token id, the ids of the good and bad tokens), as the card finds them."""
    tag_id = tokenizer.encode(fmt.step_tag, add_special_tokens=False)[-1]
    candidates = tokenizer.encode(f"{fmt.good} {fmt.bad}", add_special_tokens=False)
    if len(candidates) != 2:
        raise UsageError(f"{fmt.good!r} and {fmt.bad!r} are {len(candidates)} tokens for this tokenizer, not one each")
    return tag_id, candidates


def padded_batches(prompts: Sequence[list[int]], budget: int = TOKENS_PER_FORWARD) -> list[list[int]]:
    """Indices of `prompts` in batches of similar length, each at most `budget` padded tokens (a
    prompt longer than that alone)."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(prompts[i]) * (len(batches[-1]) + 1) <= budget:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


class ShepherdScorer:
    kind = "math-shepherd"

    def __init__(self, checkpoint: Checkpoint, *, dtype: str | None = None, max_model_len: int | None = None,
                 progress: bool = True) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        if not progress:
            hf_logging.disable_progress_bar()  # the weight-loading bar

        self.checkpoint, self.model = checkpoint, checkpoint.name
        self.format = ShepherdFormat()
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
        self.step_tag_id, self.candidates = reading_ids(self.tokenizer, self.format)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        # float32 on CPU, the checkpoint's own dtype on a GPU, as the generation engines choose.
        self.dtype = resolve_dtype(dtype, cpu=self.device == "cpu")
        self.lm = AutoModelForCausalLM.from_pretrained(
            checkpoint.path, dtype="auto" if self.dtype == "auto" else getattr(torch, self.dtype)).to(self.device)
        self.lm.eval()
        positions = getattr(self.lm.config, "max_position_embeddings", None) or 4096
        self.max_model_len = min(max_model_len or positions, positions)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def token_ids(self, problem: str, steps: list[str]) -> list[int]:
        return self.tokenizer.encode(self.format.text(problem, steps))

    def step_probabilities(self, prompts: Sequence[list[int]]) -> list[list[float] | str]:
        out: list[list[float] | str] = [[] for _ in prompts]
        for batch in padded_batches(prompts):
            for i, scores in zip(batch, self._forward([prompts[i] for i in batch])):
                out[i] = scores
        return out

    def _forward(self, prompts: list[list[int]]) -> list[list[float]]:
        """P(+) at each tag of each prompt, from one right-padded forward pass."""
        import torch

        width = max(len(ids) for ids in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, :len(p)], mask[row, :len(p)] = torch.tensor(p), 1
        tags = (ids == self.step_tag_id) & mask.bool()
        keep = tags.any(dim=0).nonzero().flatten()  # the LM head runs at these positions only
        with torch.no_grad():
            logits = self.lm(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                             logits_to_keep=keep.to(self.device), use_cache=False).logits
        good = logits[:, :, self.candidates].float().softmax(dim=-1)[:, :, 0].cpu()
        return [good[row][tags[row, keep]].tolist() for row in range(len(prompts))]

    def settings(self) -> dict[str, Any]:
        return {**self.checkpoint.describe(), "step_tag": self.format.step_tag, "step_tag_id": self.step_tag_id,
                "candidates": dict(zip((self.format.good, self.format.bad), self.candidates)),
                "input": "problem + ' ' + 'Step k: <step> ки' joined by '\\n'", "dtype": self.dtype,
                "device": self.device}

    def record(self) -> dict[str, Any]:
        return {"scorer": self.kind}

    def close(self) -> None:
        self.lm = None
