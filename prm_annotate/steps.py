"""Splitting a response into steps and joining steps back into text."""
from __future__ import annotations

from prm_annotate.settings import Setting

DEFAULT_SEP = "\n\n"


def split_steps(text: str, sep: str = DEFAULT_SEP) -> list[str]:
    """Split on `sep`, dropping empty (or whitespace-only) pieces.

    Pieces are kept verbatim, so `join_steps(split_steps(t)) == t` for any text without empty
    pieces — the prefix a rollout continues is then exactly the text the model wrote.
    """
    return [piece for piece in text.split(sep) if piece.strip()]


def join_steps(steps: list[str], sep: str = DEFAULT_SEP) -> str:
    return sep.join(steps)


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
