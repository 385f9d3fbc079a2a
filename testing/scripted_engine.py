"""A scripted stand-in for an engine, for unit tests of pure logic (label arithmetic, voting,
failure handling). It implements the engine protocol; `script(request)` returns the text, a list
of `request.n` texts, a `GenerationResult` (to set finish reasons), or an exception to report that
request as failed. Every request is kept for inspection."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from prm_annotate.engines.base import BatchEngine, GenerationRequest, GenerationResult

Scripted = str | list[str] | GenerationResult | Exception


class ScriptedEngine(BatchEngine):
    def __init__(self, script: Callable[[GenerationRequest], Scripted], model: str = "scripted"):
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
            answer = self.script(r)
            if isinstance(answer, Exception):
                out[r.key] = GenerationResult(key=r.key, error=str(answer))
            elif isinstance(answer, GenerationResult):
                out[r.key] = replace(answer, key=r.key)
            else:
                texts = answer if isinstance(answer, list) else [answer]
                assert len(texts) == r.n, f"request {r.key!r} asks for {r.n} texts, the script gave {len(texts)}"
                out[r.key] = GenerationResult(key=r.key, texts=texts, finish_reasons=["stop"] * len(texts),
                                              prompt_tokens=10, generated_tokens=sum(len(t.split()) for t in texts))
        return out

    def close(self) -> None:
        pass
