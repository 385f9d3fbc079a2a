"""A scripted stand-in for an engine, for unit tests of pure logic (label arithmetic, voting,
failure handling). It implements the engine protocol; `script(request)` returns the text, or an
exception to report that request as failed. Every request is kept for inspection."""
from __future__ import annotations

from typing import Callable, Sequence

from prm_annotate.engines.base import BatchEngine, GenerationRequest, GenerationResult


class ScriptedEngine(BatchEngine):
    def __init__(self, script: Callable[[GenerationRequest], str | Exception], model: str = "scripted"):
        super().__init__()
        self.model = model
        self.script = script
        self.requests: list[GenerationRequest] = []
        self.calls = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        self.calls += 1
        out = {}
        for r in requests:
            self.requests.append(r)
            text = self.script(r)
            if isinstance(text, Exception):
                out[r.key] = GenerationResult(key=r.key, error=str(text))
            else:
                out[r.key] = GenerationResult(key=r.key, texts=[text], finish_reasons=["stop"], prompt_tokens=10,
                                              generated_tokens=len(text.split()))
        return out

    def close(self) -> None:
        pass
