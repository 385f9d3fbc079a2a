"""reflection: a cut where the trace turns — a step starts at each paragraph (or, with
at="sentence", each sentence) that opens with one of the markers ("Wait", "Alternatively", ...);
the paragraphs between two turns are one step."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.segmenting.base import Segmenter, Span, cut_spans, group_spans, paragraph_spans

DEFAULT_MARKERS = ("Wait", "But wait", "Alternatively", "Hmm", "Let me check", "Let me verify",
                   "Let me double-check", "On second thought")
PLACES = ("paragraph", "sentence")


@dataclass(frozen=True)
class Reflection(Segmenter):
    """Attributes:
        markers: words that open a turn (matched case-sensitively, as whole words).
        at: "paragraph" (a turn opens a paragraph) or "sentence" (also a sentence inside one).
        sep: the paragraph separator.
    """

    name = "reflection"
    summary = "a cut where the trace turns: Wait, Alternatively and the like"
    markers: tuple[str, ...] = DEFAULT_MARKERS
    at: str = "paragraph"
    sep: str = "\n\n"

    def __post_init__(self) -> None:
        if self.at not in PLACES:
            raise ValueError(f"reflection: at={self.at!r} is not one of {', '.join(PLACES)}")
        if not self.markers or not all(m.strip() for m in self.markers):
            raise ValueError("reflection: markers must be a non-empty list of words")

    def _opens(self) -> re.Pattern:
        words = "|".join(re.escape(m.strip()) for m in sorted(self.markers, key=len, reverse=True))
        return re.compile(rf"(?:{words})(?![\w])")

    def spans(self, text: str, tokens: Sequence[TokenLogprob] | None) -> list[Span]:
        opens = self._opens()
        units = paragraph_spans(text, self.sep)
        if self.at == "sentence":
            inside = re.compile(rf"(?<=[.!?])\s+(?={opens.pattern})")
            units = cut_spans(text, units, [m.end() for m in inside.finditer(text)])
        # A unit opens a turn when its text (past any markdown emphasis) starts with a marker.
        starts = [bool(opens.match(text[s:e].lstrip("*_ \t"))) for s, e in units]
        return group_spans(units, starts)
