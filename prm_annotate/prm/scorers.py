"""The ways `score` reads a PRM, in one registry, behind the one interface the score stage calls.

    qwen-prm         a `Qwen2ForProcessRewardModel` (Qwen2.5-Math-PRM, or what `train` writes) in
                     process: vLLM's pooling runner (prm/vllm_scorer.py)
    qwen-prm-served  the same PRM behind `vllm serve --runner pooling`, over HTTP (prm/served.py)
    likelihood-prm   a `StepLikelihoodPRM` (`train --head likelihood`): a step head on a frozen
                     causal LM's token log-probabilities, in process with transformers (prm/likelihood.py)
    math-shepherd    a causal LM read at each ` ки` tag: P(+) against P(-), as
                     `peiyi9979/math-shepherd-mistral-7b-prm`'s card does (prm/shepherd.py)

Which one runs follows from the checkpoint's config.json (its `architectures`) and from whether
`--base-url` is given: the first kind, in the order above, that reads the checkpoint that way.
A new way of scoring is a module with a class following `Scorer` and one entry here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from prm_annotate.engines import EngineConfig
from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry
from prm_annotate.prm.checkpoint import ARCHITECTURE, Checkpoint
from prm_annotate.settings import Group

# The engine settings of a command that reads a PRM (score, reward-server): --model is the PRM, its
# server seldom the policy's (so --base-url reads no environment variable), and one GPU holds it.
PRM_ENGINE = Group(exclude=("tensor_parallel_size", "gpu_memory_utilization", "model_params"), changes={
    "model": {"help": "The PRM: a checkpoint folder, or a hub id found in the local Hugging Face cache (never downloaded)."},
    "base_url": {"envvar": None, "help": (
        "A `vllm serve <prm> --runner pooling --pooler-config '{\"step_tag_id\": N}'` server "
        "(e.g. http://127.0.0.1:8000/v1); without it the PRM runs in process.")}})


class Scorer(Protocol):
    """What the score stage asks of a PRM."""

    kind: str  # the registry's name for it, written into each record's prm.scorer
    model: str  # the checkpoint as the user named it
    format: Any  # .step_tag (refused inside a text) and .threshold (the checkpoint's own)
    max_model_len: int

    def token_ids(self, problem: str, steps: list[str]) -> list[int]:
        """The PRM's input for one response, one step tag after each step."""
        ...

    def step_probabilities(self, prompts: Sequence[list[int]]) -> list[list[float] | str]:
        """Per prompt, P(right) at each step tag in order, or why that prompt has no scores."""
        ...

    def settings(self) -> dict[str, Any]:
        """What the manifest records about the scorer."""
        ...

    def record(self) -> dict[str, Any]:
        """Fields each record's `prm` gets besides the scores."""
        ...

    def close(self) -> None:
        ...


@dataclass(frozen=True)
class ScorerKind:
    name: str
    summary: str
    served: bool  # reached over --base-url
    reads: Callable[[Checkpoint], bool]
    start: Callable[[Checkpoint, EngineConfig], Scorer]


def _is_prm(checkpoint: Checkpoint) -> bool:
    return ARCHITECTURE in checkpoint.architectures


def _is_causal_lm(checkpoint: Checkpoint) -> bool:
    return any(a.endswith("ForCausalLM") for a in checkpoint.architectures)


def _in_process(checkpoint: Checkpoint, config: EngineConfig) -> Scorer:
    from prm_annotate.prm.vllm_scorer import VLLMPRMScorer

    return VLLMPRMScorer(checkpoint, start_timeout=config.start_timeout, **config.vllm_settings())


def _served(checkpoint: Checkpoint, config: EngineConfig) -> Scorer:
    from prm_annotate.prm.served import ServedPRMScorer

    assert config.base_url
    return ServedPRMScorer(checkpoint, config.base_url, api_key_env=config.api_key_env,
                           concurrency=config.concurrency, timeout=config.timeout, max_attempts=config.max_attempts)


def _is_likelihood_prm(checkpoint: Checkpoint) -> bool:
    from prm_annotate.prm.checkpoint import LIKELIHOOD_ARCHITECTURE

    return LIKELIHOOD_ARCHITECTURE in checkpoint.architectures


def _likelihood(checkpoint: Checkpoint, config: EngineConfig) -> Scorer:
    from prm_annotate.prm.likelihood import LikelihoodScorer

    return LikelihoodScorer(checkpoint, max_model_len=config.max_model_len, progress=config.load_progress)


def _shepherd(checkpoint: Checkpoint, config: EngineConfig) -> Scorer:
    from prm_annotate.prm.shepherd import ShepherdScorer

    return ShepherdScorer(checkpoint, dtype=config.dtype, max_model_len=config.max_model_len,
                          progress=config.load_progress)


# Not chosen by a flag: `score` takes the first kind that reads the checkpoint (`scorer_for`).
SCORERS: Registry[ScorerKind] = Registry("prm.scorer", "What reads a PRM checkpoint", "docs/scoring.md", (
    ScorerKind("qwen-prm", f"{ARCHITECTURE} in process (vLLM pooling runner)", False, _is_prm, _in_process),
    ScorerKind("qwen-prm-served", f"{ARCHITECTURE} behind `vllm serve --runner pooling` (--base-url)", True,
               _is_prm, _served),
    ScorerKind("likelihood-prm", "a step head on a causal LM's token log-probabilities (train --head likelihood; "
               "transformers)", False, _is_likelihood_prm, _likelihood),
    ScorerKind("math-shepherd", "a causal LM read at each ' ки' tag, P(+) against P(-) (transformers)", False,
               _is_causal_lm, _shepherd),
))


def scorer_for(checkpoint: Checkpoint, served: bool) -> ScorerKind:
    """The kind of scorer that reads `checkpoint` (over HTTP when `served`); UsageError if none."""
    for kind in SCORERS.values():
        if kind.served == served and kind.reads(checkpoint):
            return kind
    how = "over --base-url" if served else "in process"
    what = "/".join(checkpoint.architectures) or "model without architectures"
    known = "; ".join(f"{k.name}: {k.summary}" for k in SCORERS.values())
    raise UsageError(f"{checkpoint.name}: no scorer reads a {what} {how} (scorers: {known})")
