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
from dataclasses import dataclass
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
from prm_annotate.registry import Registry

FEATURES = 8  # per step of the "step-stats" head (step_features)


@strict
class StepLikelihoodConfig(PreTrainedConfig):
    """Attributes:
        base_config: the causal LM's own config.
        step_tag_id: the tag token the head reads at.
        head_type: which head reads the LM's statistics (LIKELIHOOD_HEADS); a config without it is the
            first one's, "step-stats".
        head_hidden: "step-stats": width of its hidden layer.
        token_inputs: "token-score": what its per-token MLP reads, in order (TOKEN_INPUTS).
        token_hidden: "token-score": width of the per-token MLP's hidden layer.
        token_channels: "token-score": scores the per-token MLP gives each token.
        pools: "token-score": how each channel is pooled over a step's tokens, in order (POOLS).
    """
    model_type = "step_likelihood_prm"
    sub_configs = {"base_config": AutoConfig}

    base_config: dict | PreTrainedConfig | None = None
    step_tag_id: int = 0
    head_type: str = "step-stats"
    head_hidden: int = 64
    token_inputs: list[str] | None = None
    token_hidden: int = 16
    token_channels: int = 4
    pools: list[str] | None = None

    def __post_init__(self, **kwargs: Any) -> None:
        if isinstance(self.base_config, dict):
            self.base_config = CONFIG_MAPPING[self.base_config["model_type"]](**self.base_config)
        super().__post_init__(**kwargs)


def _compress(logp: torch.Tensor) -> torch.Tensor:
    return -torch.log1p(-logp.clamp(max=0.0))


@dataclass(frozen=True)
class TokenStats:
    """What the LM thought of each token of a batch, and where the steps are.

    Attributes:
        own: log p of each token given the ones before it (0 at position 0).
        gap: that minus the best token's log p (0: the LM's favourite).
        entropy: the entropy (nats) of the LM's prediction of the token: low where the LM was sure,
            so a token it was sure of but did not expect is a contradiction, not a choice.
        is_tag: where the step tags are.
        member: the tokens a step is made of (in the response, not a tag, not a step's last token).
        step: the index, within its response, of the step a token belongs to.
    """
    own: torch.Tensor
    gap: torch.Tensor
    entropy: torch.Tensor
    is_tag: torch.Tensor
    member: torch.Tensor
    step: torch.Tensor

    @property
    def steps(self) -> int:
        """Steps per row of the per-step tables (the most any row has, at least 1)."""
        return int(self.step.max().item()) + 1 if self.step.numel() else 1

    def flat_step(self) -> torch.Tensor:
        """Each token's row in a (B * steps) per-step table."""
        b = self.step.shape[0]
        return (torch.arange(b, device=self.step.device)[:, None] * self.steps + self.step).flatten()

    def at_tags(self, table: torch.Tensor) -> torch.Tensor:
        """(B * steps, F) per-step values -> (B, T, F): each tag's step's values, zeros elsewhere."""
        b, t = self.step.shape
        at = table.view(b, self.steps, -1).gather(1, self.step[..., None].expand(b, t, table.shape[-1]))
        return at * self.is_tag[..., None]


def token_logprobs(logits: torch.Tensor, read: torch.Tensor,
                   is_tag: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log p of each token given the ones before it, that minus the best token's log p, the
    entropy of that prediction), from the logits of the LM that read `read` with the tags masked
    out: a token is predicted at the position before it, or two before when that one is a tag (tags
    are never adjacent). 0 at position 0."""
    b, t = read.shape
    prev = torch.arange(t, device=read.device)[None].expand(b, t) - 1
    prev = prev - torch.cat([is_tag.new_zeros((b, 1)), is_tag[:, :-1]], dim=1).long()
    source = logits.gather(1, prev.clamp(min=0)[..., None].expand(b, t, logits.shape[-1]))
    logp = torch.log_softmax(source.float(), dim=-1)
    own = logp.gather(-1, read[..., None])[..., 0]
    gap = own - logp.max(dim=-1).values
    entropy = -(logp.exp() * logp).sum(dim=-1)
    valid = prev >= 0
    return own * valid, gap * valid, entropy * valid


def step_stats(own: torch.Tensor, gap: torch.Tensor, entropy: torch.Tensor, is_tag: torch.Tensor,
               in_response: torch.Tensor) -> TokenStats:
    """The LM's token statistics (token_logprobs) placed in their steps."""
    step = torch.cumsum(is_tag.long(), dim=1) - is_tag.long()  # the step a token belongs to
    # A step's last token is left out: it holds the separator (".\n\n") unless the step ends the
    # text, and a training text ends at its first error, so with it a step would read differently
    # when the response goes on after it than when it was cut there.
    last = torch.zeros_like(is_tag)
    last[:, :-1] = is_tag[:, 1:]
    return TokenStats(own, gap, entropy, is_tag, in_response & ~is_tag & ~last, step)


def reduce_steps(stats: TokenStats, values: torch.Tensor, how: str, fill: float) -> torch.Tensor:
    """(B, T, C) per-token values -> (B * steps, C): each step's `how` ("sum", "amin", "amax") over
    its member tokens, `fill` for a step without any."""
    c = values.shape[-1]
    m = stats.member.flatten()
    index = stats.flat_step()[m][:, None].expand(-1, c)
    out = values.new_full((stats.step.shape[0] * stats.steps, c), fill)
    return out.scatter_reduce(0, index, values.reshape(-1, c)[m], reduce=how, include_self=True)


def position_features(stats: TokenStats, count: torch.Tensor) -> torch.Tensor:
    """(B * steps, 4): the step's length (log), whether it has no token, its index (log), whether
    it is the first."""
    index = torch.arange(stats.steps, device=count.device, dtype=count.dtype).repeat(stats.step.shape[0])[:, None]
    return torch.cat([torch.log1p(count), (count == 0).to(count.dtype), torch.log1p(index),
                      (index == 0).to(count.dtype)], dim=1)


def step_features(stats: TokenStats, raw: bool = False) -> torch.Tensor:
    """(B, T, FEATURES): at each tag the "step-stats" features of the step it ends (module
    docstring), zeros elsewhere; `raw`: the log-probabilities not compressed (the first: the
    step's lowest)."""
    own, gap = stats.own[..., None], stats.gap[..., None]
    count = reduce_steps(stats, torch.ones_like(own), "sum", 0.0)
    per_step = [reduce_steps(stats, own, "amin", 0.0), reduce_steps(stats, own, "sum", 0.0) / count.clamp(min=1),
                reduce_steps(stats, gap, "amin", 0.0), reduce_steps(stats, gap, "sum", 0.0) / count.clamp(min=1)]
    table = torch.cat([v if raw else _compress(v) for v in per_step] + [position_features(stats, count)], dim=1)
    return stats.at_tags(table)


class StepStatsHead(nn.Sequential):
    """"step-stats": per step the minimum and mean of each token's log p and of its gap to the best
    token (compressed), the step's length and index (FEATURES numbers) through a small MLP."""

    name, summary = "step-stats", "the minimum and mean of each step's token log p and gap, through a small MLP"

    def __init__(self, config: StepLikelihoodConfig) -> None:
        super().__init__(nn.Linear(FEATURES, config.head_hidden), nn.ReLU(), nn.Linear(config.head_hidden, 2))

    @property
    def final(self) -> nn.Linear:
        return self[-1]

    def logits(self, stats: TokenStats) -> torch.Tensor:
        return self(step_features(stats)) * stats.is_tag[..., None]


# What the "token-score" head's per-token MLP may read (config.token_inputs names them).
TOKEN_INPUTS = {
    "log_p": lambda s: _compress(s.own),
    "log_p_gap": lambda s: _compress(s.gap),
    "entropy": lambda s: torch.log1p(s.entropy),
}


def _pool_min(stats: TokenStats, u: torch.Tensor, count: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    return reduce_steps(stats, u, "amin", 0.0)


def _pool_mean(stats: TokenStats, u: torch.Tensor, count: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    return reduce_steps(stats, u, "sum", 0.0) / count.clamp(min=1)


def _pool_softmin(stats: TokenStats, u: torch.Tensor, count: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """-tau log mean exp(-u / tau) over the step's tokens: between the minimum (tau -> 0) and the
    mean (tau -> inf), with a gradient for every token, not only the lowest."""
    low = reduce_steps(stats, u.detach(), "amin", 0.0)
    shifted = torch.exp(-(u - stats_rows(stats, low)) / tau)
    total = reduce_steps(stats, shifted, "sum", 0.0)
    return (low - tau * torch.log(total.clamp(min=1e-30) / count.clamp(min=1))) * (count > 0)


def stats_rows(stats: TokenStats, table: torch.Tensor) -> torch.Tensor:
    """(B * steps, C) per-step values -> (B, T, C): each token's step's values."""
    b, t = stats.step.shape
    return table.view(b, stats.steps, -1).gather(1, stats.step[..., None].expand(b, t, table.shape[-1]))


POOLS = {"min": _pool_min, "softmin": _pool_softmin, "mean": _pool_mean}
DEFAULT_TOKEN_INPUTS = ["log_p", "log_p_gap", "entropy"]
DEFAULT_POOLS = ["min", "softmin", "mean"]


class TokenScoreHead(nn.Module):
    """"token-score": a small MLP scores every token of a step from what the LM thought of it
    (config.token_inputs: by default its log p, its gap to the best token, and the LM's entropy
    there), `token_channels` scores per token; each is pooled over the step (config.pools: by
    default min, soft-min and mean), and a linear layer reads them with the step's length and index.
    Trained on step labels only, the MLP learns which surprises are errors: a low-probability token
    where the LM was sure (low entropy) contradicts it; one where many were likely is a choice."""

    name, summary = "token-score", "a per-token MLP's scores pooled over each step (min, soft-min, mean)"

    def __init__(self, config: StepLikelihoodConfig) -> None:
        super().__init__()
        self.inputs, self.pools = list(config.token_inputs), list(config.pools)
        unknown = [n for n in self.inputs if n not in TOKEN_INPUTS] + [n for n in self.pools if n not in POOLS]
        if unknown:
            raise ValueError(f"token-score head: unknown token input or pool {unknown}")
        c = config.token_channels
        self.token = nn.Sequential(nn.Linear(len(self.inputs), config.token_hidden), nn.ReLU(),
                                   nn.Linear(config.token_hidden, c))
        self.log_tau = nn.Parameter(torch.zeros(c))  # the soft-min's temperature, per channel
        self.out = nn.Linear(c * len(self.pools) + 4, 2)

    @property
    def final(self) -> nn.Linear:
        return self.out

    def logits(self, stats: TokenStats) -> torch.Tensor:
        u = self.token(torch.stack([TOKEN_INPUTS[n](stats) for n in self.inputs], dim=-1))
        count = reduce_steps(stats, torch.ones_like(u[..., :1]), "sum", 0.0)
        tau = self.log_tau.exp()
        pooled = [POOLS[p](stats, u, count, tau) for p in self.pools]
        return stats.at_tags(self.out(torch.cat(pooled + [position_features(stats, count)], dim=1)))


LIKELIHOOD_HEADS: Registry[type[nn.Module]] = Registry(
    "head_type", "Which head reads the LM's statistics (a checkpoint's config.head_type)", "docs/world-prm.md",
    (StepStatsHead, TokenScoreHead))


class StepLikelihoodPRM(PreTrainedModel):
    config_class = StepLikelihoodConfig
    base_model_prefix = "prm"
    accepts_loss_kwargs = True  # as Qwen2ForProcessRewardModel: num_items_in_batch normalises the loss
    supports_gradient_checkpointing = False  # the LM is frozen and run without a graph

    def __init__(self, config: StepLikelihoodConfig, lm: Any = None) -> None:
        config.id2label, config.label2id = dict(LABELS), {v: k for k, v in LABELS.items()}
        if config.head_type not in LIKELIHOOD_HEADS:
            raise ValueError(f"head_type {config.head_type!r}: choose from {', '.join(LIKELIHOOD_HEADS)}")
        super().__init__(config)
        self.lm = lm if lm is not None else AutoModelForCausalLM.from_config(config.base_config)
        self.lm.requires_grad_(False)
        self.score = LIKELIHOOD_HEADS[config.head_type](config)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # The LM keeps its weights (loaded, or its own class's initialisation); the head starts as
        # torch's Linear does, but for its last layer, which starts at zero: every step scores
        # alike until the labels say otherwise, so which way the LM's surprise points is learnt,
        # never a random opinion of the initialisation (a control on shuffled labels relies on it).
        if isinstance(module, nn.Linear) and any(module is m for m in self.score.modules()):
            module.reset_parameters()
            if module is self.score.final:
                nn.init.zeros_(module.weight)
                nn.init.zeros_(module.bias)

    def train(self, mode: bool = True) -> "StepLikelihoodPRM":
        super().train(mode)
        self.lm.eval()  # frozen: no dropout, whatever the Trainer asks
        return self

    def get_input_embeddings(self) -> nn.Module:
        return self.lm.get_input_embeddings()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                response_start: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                step_labels: torch.Tensor | None = None, num_items_in_batch: Any = None,
                token_logprobs: torch.Tensor | None = None, **kwargs: Any) -> TokenClassifierOutput:
        """`token_logprobs`: the LM's reading of these inputs (`read_tokens`), computed before:
        the LM is not run again (`train` reads each text once: cache_token_logprobs)."""
        logits = self.score.logits(self.token_stats(input_ids, attention_mask, response_start, token_logprobs))
        loss = step_loss(logits, labels, num_items_in_batch) if labels is not None else None
        return TokenClassifierOutput(loss=loss, logits=logits)

    def read_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(B, T, 3): what the frozen LM thought of each token (token_logprobs: log p, gap to the
        best, entropy), no graph."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        is_tag = (input_ids == self.config.step_tag_id) & attention_mask.bool()
        with torch.no_grad():
            # The LM reads the response without the tags (masked, and left out of the positions):
            # with the separator kept in the text (PRMFormat.separator), exactly as it was written.
            read = torch.where(is_tag, 0, input_ids)
            lm_mask = attention_mask * ~is_tag
            out = self.lm(input_ids=read, attention_mask=lm_mask, position_ids=(lm_mask.cumsum(1) - 1).clamp(min=0),
                          use_cache=False)
            return torch.stack(token_logprobs(out.logits, read, is_tag), dim=-1)

    def token_stats(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                    response_start: torch.Tensor | None, read: torch.Tensor | None = None) -> TokenStats:
        """What the frozen LM thought of each token (`read`, or the LM run now), and where the steps are."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        is_tag = (input_ids == self.config.step_tag_id) & attention_mask.bool()
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        start = response_start[:, None] if response_start is not None else torch.zeros_like(positions)
        in_response = attention_mask.bool() & (positions >= start)
        if read is None:
            read = self.read_tokens(input_ids, attention_mask)
        own, gap, entropy = read.unbind(-1)
        return step_stats(own, gap, entropy, is_tag, in_response)

    def step_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                    response_start: torch.Tensor | None, raw: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(the "step-stats" features at every token, zeros off the tags; where the tags are)."""
        stats = self.token_stats(input_ids, attention_mask, response_start)
        return step_features(stats, raw), stats.is_tag


def build(base: str, tokenizer: Any, fmt: PRMFormat, head_type: str = "step-stats") -> StepLikelihoodPRM:
    """The PRM over the causal LM at `base` (float32), the head new. The tag must be a token of
    the tokenizer; the LM's embeddings are not grown for it (it never reads the tag)."""
    lm = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    # A copy: the outer config's set-up resets its sub-configs' attention implementation.
    config = StepLikelihoodConfig(base_config=copy.deepcopy(lm.config), step_tag_id=step_tag_id(tokenizer, fmt.step_tag),
                                  head_type=head_type, token_inputs=list(DEFAULT_TOKEN_INPUTS),
                                  pools=list(DEFAULT_POOLS))
    config.architectures = [ARCHITECTURE]
    return StepLikelihoodPRM(config, lm=lm)


def load(path: Any, dtype: Any = torch.float32) -> StepLikelihoodPRM:
    model = StepLikelihoodPRM.from_pretrained(path, dtype=dtype)
    model.eval()
    return model


class LikelihoodScorer:
    """`score`'s reader of a StepLikelihoodPRM, in process (transformers; a GPU if there is one)."""
    kind = "likelihood-prm"

    def __init__(self, checkpoint: Checkpoint, *, max_model_len: int | None = None, progress: bool = True,
                 readings: LMReadings | None = None) -> None:
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
        self.readings = readings

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
            for i, scores in zip(batch, step_probabilities(self.prm, rows, starts, self.pad_id, self.device,
                                                           self.readings)):
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


class LMReadings:
    """The frozen LM's reading (`read_tokens`) of each token sequence, kept: PRMs on one LM (the
    sources and seeds of the lab's world PRM experiment) read a text once, in training and in scoring alike. Bound to
    the first LM it reads with; another LM is refused (its weights' fingerprint differs)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, ...], torch.Tensor] = {}
        self._lm: str | None = None
        self._checked: Any = None  # the LM object last checked (a scorer asks once per batch)

    def of(self, model: "StepLikelihoodPRM", sequences: Sequence[Sequence[int]],
           batch_size: int = 64) -> list[torch.Tensor]:
        """(len, 3) per sequence: what `model`'s LM thought of each token, read now or before."""
        if model.lm is not self._checked:
            lm = _fingerprint(model.lm)
            if self._lm not in (None, lm):
                raise ValueError("LMReadings: these readings are another LM's")
            self._lm, self._checked = lm, model.lm
        missing = sorted({tuple(s) for s in sequences} - self._kept.keys(), key=len)
        device = next(model.lm.parameters()).device
        for start in range(0, len(missing), batch_size):
            rows = missing[start:start + batch_size]  # of similar length: sorted
            ids, mask = right_padded([list(r) for r in rows], 0)
            # right padding: on a causal LM a row's values are its own, as one at a time
            read = model.read_tokens(ids.to(device), mask.to(device)).cpu()
            for i, row in enumerate(rows):
                self._kept[row] = read[i, :len(row)].clone()
        return [self._kept[tuple(s)] for s in sequences]


def _fingerprint(lm: Any) -> str:
    """A hash of a strided sample of every weight (cheap for a large LM too)."""
    import hashlib

    digest = hashlib.sha256()
    for name, weight in lm.named_parameters():
        flat = weight.detach().flatten()
        sample = flat[::max(1, flat.numel() // 4096)].float().cpu().contiguous()
        digest.update(name.encode() + str(tuple(weight.shape)).encode() + sample.numpy().tobytes())
    return digest.hexdigest()


def padded_readings(reads: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """(B, width, 3): readings of right-padded rows, zeros on the padding."""
    out = torch.zeros((len(reads), width, reads[0].shape[-1]))
    for row, r in enumerate(reads):
        out[row, :len(r)] = r
    return out


def cache_token_logprobs(model: StepLikelihoodPRM, features: list[dict[str, Any]],
                         readings: LMReadings | None = None) -> None:
    """Give each feature (`input_ids`) its `token_logprobs`: the frozen LM's reading, once (or
    from `readings`, kept from PRMs on the same LM before). Training then runs only the head,
    whatever the number of epochs and evaluations."""
    readings = readings if readings is not None else LMReadings()
    for f, read in zip(features, readings.of(model, [f["input_ids"] for f in features])):
        f["token_logprobs"] = read


def step_probabilities(model: Any, prompts: list[list[int]], starts: list[int], pad_id: int,
                       device: str = "cpu", readings: LMReadings | None = None) -> list[list[float]]:
    """P(right) at each tag of each prompt, from one right-padded forward pass (the LM's part
    from `readings` when given)."""
    ids, mask = right_padded(prompts, pad_id)
    read = padded_readings(readings.of(model, prompts), ids.shape[1]).to(device) if readings is not None else None
    with torch.inference_mode():
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                       response_start=torch.tensor(starts, device=device), token_logprobs=read).logits
    probs = torch.softmax(logits.float(), dim=-1)[..., 1].cpu()
    tags = (ids == model.config.step_tag_id) & mask.bool()
    return [probs[row][tags[row]].tolist() for row in range(len(prompts))]


# Untrained step scores (`untrained_step_probabilities`): per token a log-probability-like value,
# whose lowest over a step, exponentiated, is the step's score.
UNTRAINED = {
    # the written token's probability
    "lowest": lambda s: s.own,
    # its surprise beyond the LM's expected surprise there (log p + entropy, at most 0): a token the
    # LM was sure of and did not expect scores low; one among many likely ones does not
    "beyond-entropy": lambda s: (s.own + s.entropy).clamp(max=0.0),
}


def untrained_step_probabilities(base: Any, responses: list[tuple[str, list[str]]], statistic: str = "lowest",
                                 step_tag: str = PRMFormat.step_tag,
                                 system_prompt: str | None = None) -> list[list[float]]:
    """No training: per step of each (problem, steps), exp of the lowest UNTRAINED[statistic] of
    the step's tokens, read as `StepLikelihoodPRM` reads (its text, its masking, its statistics)."""
    from transformers import AutoTokenizer

    from prm_annotate.prm.shepherd import padded_batches
    from prm_annotate.steps import DEFAULT_SEP

    value = UNTRAINED[statistic]
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
            stats = model.token_stats(ids, mask, torch.tensor([starts[i] for i in batch]))
            lowest = stats.at_tags(reduce_steps(stats, value(stats)[..., None], "amin", 0.0))[..., 0]
        for r, i in enumerate(batch):
            out[i] = torch.exp(lowest[r][stats.is_tag[r]]).tolist()
    return out


def lowest_token_probabilities(base: Any, responses: list[tuple[str, list[str]]], step_tag: str = PRMFormat.step_tag,
                               system_prompt: str | None = None) -> list[list[float]]:
    """No training: per step of each (problem, steps), the LM's lowest probability of one of the
    step's tokens (untrained_step_probabilities' "lowest")."""
    return untrained_step_probabilities(base, responses, "lowest", step_tag, system_prompt)
