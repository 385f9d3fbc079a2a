"""What an input format is: how to recognise one of its rows, and how to turn a row into the
generic shape every stage reads (`id`, `problem`, `answer` / `steps`, every other field kept)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from prm_annotate.settings import setting


@dataclass(frozen=True)
class FieldMap:
    """`--id-field/--problem-field/--answer-field`: where a generic file keeps these."""

    id: str = setting("id", flags="--id-field", help="Field holding the id (generic format).")
    problem: str = setting("problem", flags="--problem-field", help="Field holding the problem text.")
    answer: str = setting("answer", flags="--answer-field", help="Field holding the gold answer.")


# (row, file stem, 0-based row index, field map) -> the row in the generic shape
Normalise = Callable[[dict[str, Any], str, int, FieldMap], dict[str, Any]]


@dataclass(frozen=True)
class InputFormat:
    name: str
    normalise: Normalise
    # Whether a row is of this format, for `--format auto` (decided on the first row); None: never
    # chosen automatically. A rule must be strict enough not to claim the generic records the
    # stages write (responses, rollouts, judged records), since every stage reads its input this way.
    detect: Callable[[dict[str, Any]], bool] | None = None
    summary: str = ""  # one line, for the docs' table of formats
