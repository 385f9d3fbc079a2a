"""What every segmenter shares: the (steps, joins) it returns and cuts turned into steps (the join
that gives the text back is `steps.join_steps`).

A segmentation of a text is `steps` (each with something besides white space in it) and `joins`, the
exact text between steps[i] and steps[i+1] (len(steps) - 1 of them): `join_steps(steps, joins)` is the
text from the first step's first character to the last step's last, and what lies outside it is white
space only (the paragraphs rule's dropped pieces at either end). Nothing else is ever lost.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple, Sequence

from prm_annotate.engines.sampling import TokenLogprob

Segmentation = tuple[list[str], list[str]]


class SegmentError(ValueError):
    """A text this segmenter cannot cut as asked (a confidence cut with no log-probabilities)."""


class Span(NamedTuple):
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Segmenter:
    """A named way to cut a text into steps; its dataclass fields are its settings (recorded).

    Subclasses set `name`, `summary` and `needs_logprobs`, and implement `spans`.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    needs_logprobs: ClassVar[bool] = False

    def spans(self, text: str, tokens: Sequence[TokenLogprob] | None) -> list[Span]:
        raise NotImplementedError

    def segment(self, text: str, tokens: Sequence[TokenLogprob] | None = None) -> Segmentation:
        """(steps, joins) of `text`; `tokens` are the sampled tokens' (offset, logprob), where known."""
        if self.needs_logprobs and tokens is None:
            raise SegmentError(f"segmenter {self.name} needs the sampled tokens' log-probabilities")
        return from_spans(text, self.spans(text, tokens))

    def record(self) -> dict[str, Any]:
        """What records and manifests write: the name, then every setting."""
        out: dict[str, Any] = {"name": self.name}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def from_spans(text: str, spans: Sequence[Span]) -> Segmentation:
    steps = [text[s:e] for s, e in spans]
    joins = [text[a.end:b.start] for a, b in zip(spans, spans[1:])]
    return steps, joins


def paragraph_spans(text: str, sep: str = "\n\n") -> list[Span]:
    """The paragraphs rule's pieces: `text` split at `sep`, whitespace-only pieces dropped (their text
    goes into the join around them), every other piece verbatim."""
    spans, pos = [], 0
    for piece in text.split(sep):
        if piece.strip():
            spans.append(Span(pos, pos + len(piece)))
        pos += len(piece) + len(sep)
    return spans


def cut_spans(text: str, spans: Sequence[Span], cuts: Sequence[int]) -> list[Span]:
    """`spans` cut again at the character offsets `cuts`: the white space at a cut goes into the
    join, and a cut that would leave a part with no text in it is not made."""
    out: list[Span] = []
    cuts = sorted(set(cuts))
    i = 0
    for start, end in spans:
        while i < len(cuts) and cuts[i] <= start:
            i += 1
        s = start
        while i < len(cuts) and cuts[i] < end:
            c = cuts[i]
            i += 1
            left = len(text[s:c].rstrip())
            right = c + (len(text[c:end]) - len(text[c:end].lstrip()))
            if left == 0 or right >= end:
                continue
            out.append(Span(s, s + left))
            s = right
        out.append(Span(s, end))
    return out


def group_spans(spans: Sequence[Span], starts: Sequence[bool]) -> list[Span]:
    """Consecutive spans joined into one, a new group starting where `starts` is true."""
    out: list[Span] = []
    for span, new in zip(spans, starts):
        if new or not out:
            out.append(span)
        else:
            out[-1] = Span(out[-1].start, span.end)
    return out
