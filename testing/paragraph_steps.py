"""A text's steps by the default rule (`paragraphs`), as `sample` cuts a completion: how tests make
records' steps from a text."""
from __future__ import annotations

from prm_annotate.segmenting import segment_text
from prm_annotate.segmenting.paragraphs import Paragraphs
from prm_annotate.steps import DEFAULT_SEP


def split_steps(text: str, sep: str = DEFAULT_SEP) -> list[str]:
    return segment_text(text, Paragraphs(sep=sep)).steps
