"""confidence: a cut before the policy's least confident sampled tokens (AdaptiveStep, arXiv
2502.13943; EDU-PRM, 2503.22233): the `cuts` tokens of lowest log-probability, or every token below
`threshold`. Cuts fall only where a sampled token starts (never inside a token, so never inside a
character: a token that ends inside a multi-byte character has no offset and is never a cut); the
white space at a cut goes into the join."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.segmenting.base import Segmenter, Span, cut_spans

DEFAULT_CUTS = 15


@dataclass(frozen=True)
class Confidence(Segmenter):
    """Attributes:
        cuts: how many cuts at most (the least confident tokens); ignored when `threshold` is set.
        threshold: cut before every token whose log-probability is below this (natural log).
    """

    name = "confidence"
    summary = "a cut before the least confident tokens; needs log-probabilities"
    needs_logprobs = True
    cuts: int = DEFAULT_CUTS
    threshold: Optional[float] = None

    def __post_init__(self) -> None:
        if self.cuts < 0:
            raise ValueError(f"confidence: cuts {self.cuts} is below 0")

    def spans(self, text: str, tokens: Sequence[TokenLogprob] | None) -> list[Span]:
        stripped = text.strip()
        if not stripped:
            return []
        start = len(text) - len(text.lstrip())
        whole = [Span(start, start + len(stripped))]
        # A cut must leave text on both sides; ties go to the earlier token, so cuts are stable.
        candidates = [(t.logprob, t.offset) for t in tokens or ()
                      if t.offset is not None and whole[0].start < t.offset < whole[0].end]
        if self.threshold is not None:
            chosen = [o for lp, o in candidates if lp < self.threshold]
        else:
            chosen = [o for lp, o in sorted(candidates)[: self.cuts]]
        return cut_spans(text, whole, chosen)
