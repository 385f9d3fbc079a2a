"""The one small protocol every stage uses to talk to a model.

A stage builds a batch of `GenerationRequest`s, hands the whole batch to `Engine.generate`, and
gets back a dict keyed by `request.key` — so no stage ever relies on the order of results.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass(frozen=True)
class GenerationRequest:
    key: str
    # Chat messages ({"role", "content"}). With `continue_final`, the last message is an assistant
    # turn holding a partial answer that the model extends in place (chat template applied with the
    # assistant turn left open, not a new turn) — how rollouts extend a step prefix.
    messages: tuple[dict, ...]
    continue_final: bool = False
    n: int = 1
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    # Per-request seed: the same seed and model give the same text whatever else is in the batch.
    seed: int | None = None
    # Optional structured output: the completion must match this regular expression.
    guided_regex: str | None = None


@dataclass
class GenerationResult:
    key: str
    texts: list[str] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    # Prompt tokens served from the prefix cache; None when the engine does not tell.
    cached_prompt_tokens: int | None = None
    generated_tokens: int = 0
    # Set when the request failed (after retries): then `texts` is empty — never invented.
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Engine(Protocol):
    model: str

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        ...

    def close(self) -> None:
        ...


def check_keys(requests: Sequence[GenerationRequest]) -> None:
    """Raise ValueError on a duplicate key: results are keyed, so keys must be unique in a batch."""
    seen: set[str] = set()
    for r in requests:
        if r.key in seen:
            raise ValueError(f"duplicate request key {r.key!r}")
        seen.add(r.key)
