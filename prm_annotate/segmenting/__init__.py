"""Segmenters, by name: how a response's text becomes steps. Add one: a module here with a
`Segmenter` subclass (its settings are its dataclass fields), and one entry in SEGMENTERS;
`--segment` lists it with its `summary` and `--segment-option KEY=VALUE` sets its fields.

Every text becomes steps by `segment_text` (texts.py: the cuts from spans, a thought's `<think>`
tags always between steps, `thought_steps` counted): `sample` on its completions, `segment` on a
record's text (`segment_record`), the reward server on an RL client's bare text (by name,
`paragraphs`). Every later stage reads a record's steps (and `step_joins`) and never splits again;
rollout and judge read them back as a thought and an answer with `record_trace`.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Mapping, Sequence

from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry
from prm_annotate.segmenting.base import Segmentation, Segmented, SegmentError, Segmenter, segment_text
from prm_annotate.segmenting.confidence import Confidence
from prm_annotate.segmenting.merge import Merge
from prm_annotate.segmenting.paragraphs import Paragraphs
from prm_annotate.segmenting.reflection import Reflection
from prm_annotate.segmenting.texts import record_trace, segment_record, segment_trace

DEFAULT_SEGMENTER = "paragraphs"

SEGMENTERS: Registry[type[Segmenter]] = Registry("--segment", "How a response is cut into steps", "docs/pipeline.md", (
    Paragraphs,
    Merge,
    Reflection,
    Confidence,
))


def _convert(name: str, key: str, value: Any, hint: Any) -> Any:
    """A setting given as text on the command line, as its field's type."""
    if not isinstance(value, str):
        return tuple(value) if typing.get_origin(hint) is tuple else value
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if typing.get_origin(hint) is typing.Union else hint
    if value.lower() == "none" and type(None) in typing.get_args(hint):
        return None
    try:
        if typing.get_origin(base) is tuple:
            return tuple(v.strip() for v in value.split(",") if v.strip())
        if base is bool:
            return {"true": True, "false": False}[value.lower()]
        return base(value)
    except (KeyError, ValueError, TypeError):
        raise UsageError(f"--segment {name}: {key}={value!r} is not a {getattr(base, '__name__', base)}") from None


def get_segmenter(name: str, settings: Mapping[str, Any] | None = None) -> Segmenter:
    """The segmenter `name` with `settings` (field -> value, values may be text as typed)."""
    cls = SEGMENTERS.named(name)
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in (settings or {}).items():
        if key not in fields:
            raise UsageError(f"--segment {name} has no setting {key!r} (its settings: {', '.join(fields) or 'none'})")
        kwargs[key] = _convert(name, key, value, hints[key])
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise UsageError(f"--segment {str(exc)}") from None


def parse_options(options: Sequence[str]) -> dict[str, str]:
    """`--segment-option KEY=VALUE` pairs as a dict."""
    out = {}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--segment-option {option!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def from_record(data: Mapping[str, Any] | None) -> Segmenter:
    """The segmenter a record or manifest names (`segmenter`); absent: today's paragraphs rule."""
    if not data:
        return Paragraphs()
    settings = {k: v for k, v in data.items() if k != "name"}
    return get_segmenter(str(data.get("name")), settings)


__all__ = ["DEFAULT_SEGMENTER", "SEGMENTERS", "SegmentError", "Segmentation", "Segmented", "Segmenter", "from_record",
           "get_segmenter", "parse_options", "record_trace", "segment_record", "segment_text",
           "segment_trace"]
