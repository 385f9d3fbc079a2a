r"""A step head that reads the base's own token log-probabilities: `train --head likelihood`.

The idea is the implicit PRM's (the policy's likelihood of what it reads says where it is
surprised): a frozen causal LM (any: `AutoModelForCausalLM`) reads the response, and at each step
tag a small trained head sees what the LM thought of that step's tokens:

    per token t of a step   log p(t | before), and log p(t | before) - max_v log p(v | before)
                            (0 when t is what the LM would have written)
    per step                their minimum and mean, the step's length (log), its index (log),
                            each log-probability compressed by -log(1 - x) (monotone, tames tails)

A step is the tokens after the previous tag (the first step: after the start of the response,
`response_start`) up to its tag, less its last token; padding, the prompt and the tags are left
out. The text keeps the steps' own separator between a step and its tag (`PRMFormat.separator`,
"\n\n"; not after the last step, where the response ends), and the LM reads it with the tags
masked out of attention and positions, so it reads the response exactly as it was written (a BPE
tokenizer often merges the separator into a step's last token, ".\n\n": stripped steps would be a
text the LM never wrote). That last token is left out because a training text ends at its first
error: the token is ".\n\n" where the response goes on and "." where it was cut, and a step must
read the same either way.

Only the head trains; the LM's weights are saved unchanged with it, so the checkpoint
(`StepLikelihoodPRM`, config `step_likelihood_prm`) is self-contained. Its outputs are the PRM's: two logits (wrong, right)
at every tag, zeros elsewhere, so the loss, the metrics, the threshold and `score`'s reading are
those of `Qwen2ForProcessRewardModel`.

vLLM's pooling runner does not load it (its poolers read hidden states, not vocabulary
log-probabilities at every token); `score` reads it in process with transformers
(`LikelihoodScorer`, scorer kind `likelihood-prm`). This module imports torch and transformers.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import AutoModelForCausalLM, PreTrainedConfig, PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.models.auto import CONFIG_MAPPING, AutoConfig

from prm_annotate.prm.checkpoint import (LIKELIHOOD_ARCHITECTURE as ARCHITECTURE, Checkpoint, PRMFormat, prm_token_ids,
                                         response_start, step_tag_id)
from prm_annotate.prm.model import LABELS, step_loss

FEATURES = 8  # per step (step_features)


@strict
class StepLikelihoodConfig(PreTrainedConfig):
    """Attributes:
        base_config: the causal LM's own config.
        step_tag_id: the tag token the head reads at.
        head_hidden: width of the head's hidden layer.
    """
    model_type = "step_likelihood_prm"
    sub_configs = {"base_config": AutoConfig}

    base_config: dict | PreTrainedConfig | None = None
    step_tag_id: int = 0
    head_hidden: int = 64

    def __post_init__(self, **kwargs: Any) -> None:
        if isinstance(self.base_config, dict):
            self.base_config = CONFIG_MAPPING[self.base_config["model_type"]](**self.base_config)
        super().__post_init__(**kwargs)


def _compress(logp: torch.Tensor) -> torch.Tensor:
    return -torch.log1p(-logp.clamp(max=0.0))


def token_logprobs(logits: torch.Tensor, read: torch.Tensor, is_tag: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p of each token given the ones before it, that minus the best token's log p), from the
    logits of the LM that read `read` with the tags masked out: a token is predicted at the position
    before it, or two before when that one is a tag (tags are never adjacent). 0 at position 0."""
    b, t = read.shape
    prev = torch.arange(t, device=read.device)[None].expand(b, t) - 1
    prev = prev - torch.cat([is_tag.new_zeros((b, 1)), is_tag[:, :-1]], dim=1).long()
    source = logits.gather(1, prev.clamp(min=0)[..., None].expand(b, t, logits.shape[-1]))
    logp = torch.log_softmax(source.float(), dim=-1)
    own = logp.gather(-1, read[..., None])[..., 0]
    gap = own - logp.max(dim=-1).values
    valid = prev >= 0
    return own * valid, gap * valid


def step_features(own: torch.Tensor, gap: torch.Tensor, is_tag: torch.Tensor, in_response: torch.Tensor,
                  raw: bool = False) -> torch.Tensor:
    """(B, T, FEATURES): at each tag the features of the step it ends (module docstring), zeros
    elsewhere; `raw`: the log-probabilities not compressed (the first: the step's lowest)."""
    b, t = own.shape
    before = torch.cumsum(is_tag.long(), dim=1) - is_tag.long()  # the step a token belongs to
    steps = int(before.max().item()) + 1 if t else 1
    # A step's last token is left out: it holds the separator (".\n\n") unless the step ends the
    # text, and a training text ends at its first error, so with it a step would read differently
    # when the response goes on after it than when it was cut there.
    last = torch.zeros_like(is_tag)
    last[:, :-1] = is_tag[:, 1:]
    member = in_response & ~is_tag & ~last
    index = (torch.arange(b, device=own.device)[:, None] * steps + before).flatten()
    m = member.flatten()

    def reduce(values: torch.Tensor, how: str, fill: float) -> torch.Tensor:
        out = values.new_full((b * steps,), fill)
        return out.scatter_reduce(0, index[m], values.flatten()[m], reduce=how, include_self=True)

    count = reduce(torch.ones_like(own), "sum", 0.0)
    per_step = [reduce(own, "amin", 0.0), reduce(own, "sum", 0.0) / count.clamp(min=1),
                reduce(gap, "amin", 0.0), reduce(gap, "sum", 0.0) / count.clamp(min=1)]
    table = torch.stack([v if raw else _compress(v) for v in per_step] + [torch.log1p(count), (count == 0).float()],
                        dim=1)
    at = table.view(b, steps, -1).gather(1, before[..., None].expand(b, t, table.shape[1]))
    k = torch.log1p(before.float())[..., None]
    feats = torch.cat([at, k, (before == 0).float()[..., None]], dim=-1)
    return feats * is_tag[..., None]


class StepLikelihoodPRM(PreTrainedModel):
    config_class = StepLikelihoodConfig
    base_model_prefix = "prm"
    accepts_loss_kwargs = True  # as Qwen2ForProcessRewardModel: num_items_in_batch normalises the loss
    supports_gradient_checkpointing = False  # the LM is frozen and run without a graph

    def __init__(self, config: StepLikelihoodConfig, lm: Any = None) -> None:
        config.id2label, config.label2id = dict(LABELS), {v: k for k, v in LABELS.items()}
        super().__init__(config)
        self.lm = lm if lm is not None else AutoModelForCausalLM.from_config(config.base_config)
        self.lm.requires_grad_(False)
        self.score = nn.Sequential(nn.Linear(FEATURES, config.head_hidden), nn.ReLU(), nn.Linear(config.head_hidden, 2))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # The LM keeps its weights (loaded, or its own class's initialisation); the head starts as
        # torch's Linear does.
        if isinstance(module, nn.Linear) and any(module is m for m in self.score):
            module.reset_parameters()

    def train(self, mode: bool = True) -> "StepLikelihoodPRM":
        super().train(mode)
        self.lm.eval()  # frozen: no dropout, whatever the Trainer asks
        return self

    def get_input_embeddings(self) -> nn.Module:
        return self.lm.get_input_embeddings()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                response_start: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                step_labels: torch.Tensor | None = None, num_items_in_batch: Any = None,
                **kwargs: Any) -> TokenClassifierOutput:
        feats, is_tag = self.step_inputs(input_ids, attention_mask, response_start)
        logits = self.score(feats) * is_tag[..., None]
        loss = step_loss(logits, labels, num_items_in_batch) if labels is not None else None
        return TokenClassifierOutput(loss=loss, logits=logits)

    def step_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                    response_start: torch.Tensor | None, raw: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(the head's input at every token, zeros off the tags; where the tags are)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        is_tag = (input_ids == self.config.step_tag_id) & attention_mask.bool()
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        start = response_start[:, None] if response_start is not None else torch.zeros_like(positions)
        in_response = attention_mask.bool() & (positions >= start)
        with torch.no_grad():
            # The LM reads the response without the tags (masked, and left out of the positions):
            # with the separator kept in the text (PRMFormat.separator), exactly as it was written.
            read = torch.where(is_tag, 0, input_ids)
            lm_mask = attention_mask * ~is_tag
            out = self.lm(input_ids=read, attention_mask=lm_mask, position_ids=(lm_mask.cumsum(1) - 1).clamp(min=0),
                          use_cache=False)
            own, gap = token_logprobs(out.logits, read, is_tag)
            feats = step_features(own, gap, is_tag, in_response, raw)
        return feats, is_tag


def build(base: str, tokenizer: Any, fmt: PRMFormat) -> StepLikelihoodPRM:
    """The PRM over the causal LM at `base` (float32), the head new. The tag must be a token of
    the tokenizer; the LM's embeddings are not grown for it (it never reads the tag)."""
    lm = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    # A copy: the outer config's set-up resets its sub-configs' attention implementation.
    config = StepLikelihoodConfig(base_config=copy.deepcopy(lm.config), step_tag_id=step_tag_id(tokenizer, fmt.step_tag))
    config.architectures = [ARCHITECTURE]
    return StepLikelihoodPRM(config, lm=lm)


def load(path: Any, dtype: Any = torch.float32) -> StepLikelihoodPRM:
    model = StepLikelihoodPRM.from_pretrained(path, dtype=dtype)
    model.eval()
    return model


class LikelihoodScorer:
    """`score`'s reader of a StepLikelihoodPRM, in process (transformers; a GPU if there is one)."""
    kind = "likelihood-prm"

    def __init__(self, checkpoint: Checkpoint, *, max_model_len: int | None = None, progress: bool = True) -> None:
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        if not progress:
            hf_logging.disable_progress_bar()
        self.checkpoint, self.model = checkpoint, checkpoint.name
        self.format = PRMFormat.of_config(checkpoint.config)
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.prm = load(checkpoint.path).to(self.device)
        positions = getattr(self.prm.config.base_config, "max_position_embeddings", None) or 4096
        self.max_model_len = min(max_model_len or positions, positions)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._starts: dict[tuple[int, ...], int] = {}

    def token_ids(self, problem: str, steps: list[str]) -> list[int]:
        ids = prm_token_ids(self.tokenizer, self.format, problem, steps)
        self._starts[tuple(ids)] = response_start(self.tokenizer, self.format, problem, ids)
        return ids

    def step_probabilities(self, prompts: Sequence[list[int]]) -> list[list[float] | str]:
        from prm_annotate.prm.shepherd import padded_batches

        out: list[list[float] | str] = [[] for _ in prompts]
        for batch in padded_batches(prompts):
            rows = [prompts[i] for i in batch]
            starts = [self._starts.get(tuple(p), 0) for p in rows]
            for i, scores in zip(batch, step_probabilities(self.prm, rows, starts, self.pad_id, self.device)):
                out[i] = scores
        return out

    def settings(self) -> dict[str, Any]:
        c = self.prm.config
        return {**self.checkpoint.describe(), "step_tag": self.format.step_tag, "step_tag_id": c.step_tag_id,
                "step_separator": self.format.separator, "system_prompt": self.format.system_prompt,
                "device": self.device}

    def record(self) -> dict[str, Any]:
        return {"scorer": self.kind}

    def close(self) -> None:
        self.prm = None


def right_padded(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of the prompts right-padded to the longest."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, :len(p)], mask[row, :len(p)] = torch.tensor(p), 1
    return ids, mask


def step_probabilities(model: Any, prompts: list[list[int]], starts: list[int], pad_id: int,
                       device: str = "cpu") -> list[list[float]]:
    """P(right) at each tag of each prompt, from one right-padded forward pass."""
    ids, mask = right_padded(prompts, pad_id)
    with torch.inference_mode():
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                       response_start=torch.tensor(starts, device=device)).logits
    probs = torch.softmax(logits.float(), dim=-1)[..., 1].cpu()
    tags = (ids == model.config.step_tag_id) & mask.bool()
    return [probs[row][tags[row]].tolist() for row in range(len(prompts))]


def lowest_token_probabilities(base: Any, responses: list[tuple[str, list[str]]], step_tag: str = PRMFormat.step_tag,
                               system_prompt: str | None = None) -> list[list[float]]:
    """No training: per step of each (problem, steps), the LM's lowest probability of one of the
    step's tokens, read as `StepLikelihoodPRM` reads (its text, its masking, its statistics)."""
    from transformers import AutoTokenizer

    from prm_annotate.prm.shepherd import padded_batches
    from prm_annotate.steps import DEFAULT_SEP

    tokenizer = AutoTokenizer.from_pretrained(base)
    if len(tokenizer.encode(step_tag, add_special_tokens=False)) != 1:
        tokenizer.add_tokens([step_tag], special_tokens=True)
    fmt = PRMFormat(step_tag=step_tag, system_prompt=system_prompt, separator=DEFAULT_SEP)
    model = build(str(base), tokenizer, fmt).eval()
    prompts = [prm_token_ids(tokenizer, fmt, p, s) for p, s in responses]
    starts = [response_start(tokenizer, fmt, p, ids) for (p, _), ids in zip(responses, prompts)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out: list[list[float]] = [[] for _ in prompts]
    for batch in padded_batches(prompts):
        ids, mask = right_padded([prompts[i] for i in batch], pad)
        with torch.inference_mode():
            feats, is_tag = model.step_inputs(ids, mask, torch.tensor([starts[i] for i in batch]), raw=True)
        for r, i in enumerate(batch):
            out[i] = torch.exp(feats[r][is_tag[r], 0]).tolist()
    return out
