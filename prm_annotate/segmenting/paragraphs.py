"""paragraphs: today's rule and the default — a step per piece between separators (`\\n\\n`);
whitespace-only pieces are dropped into the join around them, nothing else is lost."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.segmenting.base import Segmenter, Span, paragraph_spans


@dataclass(frozen=True)
class Paragraphs(Segmenter):
    """Attributes:
        sep: the separator between steps.
    """

    name = "paragraphs"
    summary = "a step per paragraph; the default"
    sep: str = "\n\n"

    def spans(self, text: str, tokens: Sequence[TokenLogprob] | None) -> list[Span]:
        return paragraph_spans(text, self.sep)
