"""What the model-using stages share: calling the engine without losing a batch to one exception."""
from __future__ import annotations

from typing import Sequence

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult


def generate(engine: Engine, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
    """Every request gets a result; a request the engine failed (or left out, or an engine call
    that raised) gets one with `error` set, so the stage leaves its record for a rerun."""
    if not requests:
        return {}
    try:
        results = dict(engine.generate(requests))
    except Exception as exc:  # the engine's own failure: no record of this call is finished
        message = f"engine failed: {type(exc).__name__}: {exc}"
        return {r.key: GenerationResult(key=r.key, error=message) for r in requests}
    for r in requests:
        got = results.get(r.key)
        if got is None:
            results[r.key] = GenerationResult(key=r.key, error="the engine returned no result")
        elif got.ok and len(got.texts) != r.n:
            results[r.key] = GenerationResult(key=r.key, error=f"the engine returned {len(got.texts)} of {r.n} texts")
    return results


def chat(system_prompt: str | None, problem: str, partial: str | None = None) -> tuple[dict, ...]:
    """The conversation a policy (or completer) sees; `partial` is an assistant turn to continue."""
    messages: list[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": problem})
    if partial is not None:
        messages.append({"role": "assistant", "content": partial})
    return tuple(messages)
