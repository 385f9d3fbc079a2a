"""A record's longest prompt measured against the model's context before its first request
(engines/context.py says the rule): sample's problem, the judge's prompt, the rollout's longest
prefix. The stages
call `ContextCheck.fit` in their job and either go on with the budget it gives, clamped where it
had to be, or refuse the record for good (`Outcome.refused`) before anything is spent on it.

An engine that cannot tell its context or count a prompt (a test double; a server that reports
no context and was given no --max-model-len) is not checked: its requests run as before.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from prm_annotate.engines.base import Engine, GenerationRequest
from prm_annotate.engines.context import MIN_ROOM, Context, Fit, fit


class ContextCheck:
    """The engine's context, asked once, and the fit of one record's longest prompt in it."""

    def __init__(self, engine: Engine | None) -> None:
        self.engine = engine
        self._context: tuple[Context | None] | None = None

    def context(self) -> Context | None:
        if self._context is None:
            ask = getattr(self.engine, "context", None)
            self._context = (ask() if ask is not None else None,)
        return self._context[0]

    def fit(self, request: GenerationRequest, stats: Counter, *, reserve: int = 0, what: str = "the prompt") -> Fit | None:
        """How `request`'s budget fits beside its prompt (None: not checked); counts the clamped and
        refused records in `stats` (`max_tokens_clamped`, `refused_over_context`)."""
        context = self.context()
        count = getattr(self.engine, "prompt_tokens", None)
        if context is None or count is None:
            return None
        tokens = count(request)
        if tokens is None:
            stats["context_not_checked"] += 1  # the server could not count it this time
            return None
        result = fit(tokens, request.sampling.max_tokens, context, reserve=reserve, what=what)
        if result.refused:
            stats["refused_over_context"] += 1
        elif result.clamped:
            stats["max_tokens_clamped"] += 1
        return result

    def as_sent(self, request: GenerationRequest, *, what: str = "the prompt") -> GenerationRequest | None:
        """`request` as its record's job sends it after `fit` (for a probe sent before the run): its
        budget clamped where it had to be, None where the record is refused. Counted by the job, not here."""
        fitted = self.fit(request, Counter(), what=what)
        if fitted is not None and fitted.refused:
            return None
        return request if fitted is None or not fitted.clamped else clamp(request, fitted.max_tokens)

    def settings(self) -> dict[str, Any]:
        """What the manifest records: the context checked against (null: none known), the least room."""
        context = self.context()
        return {"context": None if context is None else context.describe(), "min_room": MIN_ROOM}


def clamp(request: GenerationRequest, max_tokens: int | None) -> GenerationRequest:
    """`request` with its completion budget lowered to `max_tokens` (None: as it is)."""
    return request if max_tokens is None else replace(request, sampling=replace(request.sampling, max_tokens=max_tokens))
