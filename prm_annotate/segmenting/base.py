"""What every segmenter shares: the (steps, joins) it returns, cuts turned into steps (the join that
gives the text back is `steps.join_steps`), and `segment_text`, the one function that cuts any text,
a thought's tags kept between steps (texts.py says how).

A segmentation of a text is `steps` (each with something besides white space in it) and `joins`, the
exact text between steps[i] and steps[i+1] (len(steps) - 1 of them): `join_steps(steps, joins)` is the
text from the first step's first character to the last step's last, and what lies outside it is white
space only (the paragraphs rule's dropped pieces at either end) and `<think>` tags. Nothing else is
ever lost.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple, Sequence

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.steps import record_joins
from prm_annotate.thinking.tags import END, tag_spans

Segmentation = tuple[list[str], list[str]]


class SegmentError(ValueError):
    """A text this segmenter cannot cut as asked (a confidence cut with no log-probabilities)."""


class Span(NamedTuple):
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Segmenter:
    """A named way to cut a text into steps; its dataclass fields are its settings (recorded).

    Subclasses set `name`, `summary` and `needs_logprobs`, and implement `spans` (the cuts of a text
    with no `<think>` tag in it: texts.segment_text hands them the text between tags).
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    needs_logprobs: ClassVar[bool] = False

    def spans(self, text: str, tokens: Sequence[TokenLogprob] | None) -> list[Span]:
        raise NotImplementedError

    def segment(self, text: str, tokens: Sequence[TokenLogprob] | None = None) -> Segmentation:
        """(steps, joins) of `text` (no thought in it; `segment_text`, which never cuts across a
        `<think>` tag); `tokens` are the sampled tokens' (offset, logprob), where known."""
        cut = segment_text(text, self, tokens)
        return cut.steps, cut.joins

    def record(self) -> dict[str, Any]:
        """What records and manifests write: the name, then every setting."""
        out: dict[str, Any] = {"name": self.name}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclasses.dataclass(frozen=True)
class Segmented:
    """A text cut into steps: their spans in `text`, and how many of them are the thought's."""

    text: str
    spans: tuple[Span, ...]
    thought_steps: int

    @property
    def steps(self) -> list[str]:
        return [self.text[s:e] for s, e in self.spans]

    @property
    def joins(self) -> list[str]:
        return [self.text[a.end:b.start] for a, b in zip(self.spans, self.spans[1:])]

    @property
    def record_joins(self) -> list[str] | None:
        """The joins as a record keeps them (`step_joins`; None: every one is the separator)."""
        return record_joins(self.joins)

    def record_tokens(self, tokens: Sequence[TokenLogprob]) -> list[list[Any]]:
        """Tokens as a record keeps them: offsets into the text its steps join to, which starts at the
        first step (what lies before it, white space or the thought's `<think>`, is not part of it)."""
        shift = self.spans[0].start if self.spans else 0
        return [[None if t.offset is None or t.offset < shift else t.offset - shift, t.logprob] for t in tokens]


def _regions(text: str, thinks: bool) -> list[Span]:
    """The parts of `text` cut apart: whole when it has no tag and no thought, else the text between
    tags, each stripped of its edge white space (empty ones left out)."""
    tags = tag_spans(text)
    if not tags and not thinks:
        return [Span(0, len(text))]
    out, pos = [], 0
    for start, end in [*tags, (len(text), len(text))]:
        part = text[pos:start]
        if part.strip():
            lead = len(part) - len(part.lstrip())
            out.append(Span(pos + lead, pos + lead + len(part.strip())))
        pos = end
    return out


def _moved(tokens: Sequence[TokenLogprob] | None, region: Span) -> list[TokenLogprob] | None:
    """`tokens` with offsets into `region` (None for a token that starts outside it)."""
    if tokens is None:
        return None
    return [TokenLogprob(t.offset - region.start if t.offset is not None and region.start <= t.offset <= region.end
                         else None, t.logprob) for t in tokens]


def segment_text(text: str, segmenter: Segmenter, tokens: Sequence[TokenLogprob] | None = None,
                 thinks: bool = False) -> Segmented:
    """`text` cut by `segmenter` (module docstring); `tokens` the sampled tokens' offsets into `text`
    and log-probabilities, where known; `thinks`: the text holds a thought (thinking.tags.read_trace)."""
    if segmenter.needs_logprobs and tokens is None:
        raise SegmentError(f"segmenter {segmenter.name} needs the sampled tokens' log-probabilities")
    spans: list[Span] = []
    for region in _regions(text, thinks):
        part = text[region.start:region.end]
        spans += [Span(region.start + s, region.start + e) for s, e in segmenter.spans(part, _moved(tokens, region))]
    if not thinks:
        return Segmented(text, tuple(spans), 0)
    end = text.find(END)
    thought = len(spans) if end < 0 else sum(span.end <= end for span in spans)
    return Segmented(text, tuple(spans), thought)


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
