"""A real engine made to write given texts: each request it passes on carries a structured-output
regular expression that matches one text, the one `script(request)` names. With a model whose
every logit is 0 (testing/tiny_model.py, `reasoning=True`), greedy decoding then writes exactly
that text, through the engine's whole path (vLLM's sampler, detokenizer and, behind `vllm serve
--reasoning-parser`, the server's reasoning parser)."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult, Streaming

_SPECIAL = set(".^$*+?()[]{}|\\/\"")


def literal_regex(text: str) -> str:
    """A regular expression matching exactly `text` (as xgrammar reads one)."""
    out = []
    for c in text:
        if c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c in _SPECIAL:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


class ForcingEngine(Streaming):
    def __init__(self, engine: Engine, script: Callable[[GenerationRequest], str]) -> None:
        self.engine, self.script = engine, script
        self.model = engine.model

    def submit(self, requests: Sequence[GenerationRequest]) -> None:
        self.engine.submit([replace(r, guided_regex=literal_regex(self.script(r))) for r in requests])

    def poll(self) -> list[GenerationResult]:
        return self.engine.poll()

    def in_flight(self) -> int:
        return self.engine.in_flight()

    def cancel(self, keys: Sequence[str]) -> int:
        return self.engine.cancel(keys)

    def close(self) -> None:
        self.engine.close()

    def __getattr__(self, name: str):
        # What the wrapped engine tells beyond the protocol (chat_template_thinks, tokenizer).
        return getattr(self.engine, name)
