"""Joining a record's steps back into text (segmenting/ cuts them, and is the only place that does).

A record's steps come with their joins (`step_joins`, the exact text between steps[i] and
steps[i+1]; absent when every join is the separator): `join_steps(steps, joins)` gives back the
text they were cut from, from the first step's first character to the last step's last. Every
stage that needs a record's text joins it here (segmenting/ cuts the steps, thinking/tags.py reads them
as a thought and an answer).
"""
from __future__ import annotations

from typing import Any, Sequence

from prm_annotate.settings import Setting

DEFAULT_SEP = "\n\n"


def join_steps(steps: Sequence[str], joins: Sequence[str] | None = None, sep: str = DEFAULT_SEP) -> str:
    """The text `steps` were cut from (None joins: every join is `sep`, today's records)."""
    if joins is None:
        return sep.join(steps)
    if len(joins) != max(len(steps) - 1, 0):
        raise ValueError(f"{len(joins)} joins for {len(steps)} steps (need {max(len(steps) - 1, 0)})")
    out = [steps[0]] if steps else []
    for join, step in zip(joins, steps[1:]):
        out += [join, step]
    return "".join(out)


def join_record(record: Any) -> str:
    """The text a record's steps were cut from: its `steps` joined by its `step_joins`, else by its
    segmenter's `sep`, else by "\\n\\n" (a dict or a record model alike)."""
    get = record.get if isinstance(record, dict) else (lambda k, d=None: getattr(record, k, d))
    seg = get("segmenter") or {}
    sep = seg.get("sep", DEFAULT_SEP) if isinstance(seg, dict) else DEFAULT_SEP
    return join_steps(get("steps"), get("step_joins"), sep)


def prefix_text(steps: Sequence[str], joins: Sequence[str] | None, j: int, sep: str = DEFAULT_SEP) -> str:
    """Steps 0..j with the join after step j: the text a rollout continues from step j + 1. After the
    last step there is no join of the record's; `sep` stands in for it (as today)."""
    head = join_steps(steps[: j + 1], None if joins is None else joins[:j], sep)
    after = sep if joins is None or j >= len(joins) else joins[j]
    return head + after


def record_joins(joins: Sequence[str], sep: str = DEFAULT_SEP) -> list[str] | None:
    """Joins as a record keeps them: None (field left out) when every one is `sep`, so records of
    today's rule stay as they were. Stages pass the default: a record cut at another separator
    keeps its joins, and a later stage run with the default `--step-sep` still rebuilds its text."""
    return None if all(j == sep for j in joins) else list(joins)


def decode_sep(sep: str) -> str:
    """Let users write `--step-sep '\\n'` in a shell: backslash escapes are decoded, other text kept.

    `unicode_escape` reads bytes as Latin-1, so the text goes in as Latin-1 with every other
    character written as its own `\\u` escape (UTF-8 bytes would come back as mojibake: ' ки' as ' ÐºÐ¸')."""
    return sep.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in sep else sep


def decode_optional_sep(sep: str | None) -> str | None:
    """`decode_sep`, None kept (an option whose default is another's)."""
    return None if sep is None else decode_sep(sep)


# `--step-sep` as the records' separator, declared once for every command that splits responses.
STEP_SEP = Setting(help="Step separator (backslash escapes allowed).", flags=("--step-sep",), parse=decode_sep,
                   show_default=r"\n\n")
