"""What an export format is, and the registry `export --format` chooses from.

A format is one object: what it takes (soft labels, a step tag, a step-end marker, a test split),
its text conventions (the text before the first step and between steps), who reads it (named in
errors), and the few things that differ from format to format: the row's fields, the one-token
checks its consumer makes, where its consumer puts each label, and how it is written. Options are
validated by asking the format (options.py), so no other code names a format.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from prm_annotate.export.placement import TokenCheck
from prm_annotate.export.writing import write_rows

if TYPE_CHECKING:
    from prm_annotate.export.options import ExportOptions


@dataclass(frozen=True)
class Provenance:
    """What a dataset was made from, for a format that describes it (hf's dataset card)."""
    input: str
    read: int  # records read
    argv: tuple[str, ...]  # the command line


@dataclass(frozen=True)
class ExportFormat:
    name: str
    consumer: str  # who reads the labels, named in errors
    lead: str = ""  # between the problem and the first step
    step_sep: str = "\n"  # between steps, unless --step-sep
    default_tag: str | None = None  # the step tag --placeholder replaces; None: the format has no tag
    soft: bool = False  # takes MC scores as labels (--soft)
    hard_only: str | None = None  # why --soft is refused, where the general reason would mislead
    tagged: bool = False  # steps joined into one text (so stripped of surrounding whitespace)
    step_end: bool = False  # a step-end marker after each step carries its label (--step-end)
    needs_tokenizer: bool = False  # its rows are token ids
    test_split: bool = False  # writes a held-out split (--test-split)
    completion_limit: bool = False  # its trainer cuts completions first (--max-completion-length)
    directory: bool = False  # writes a directory, not a file

    def fields(self, problem: str, steps: list[str], values: list[Any], opts: "ExportOptions",
               check: TokenCheck | None) -> dict[str, Any]:
        """A row's fields after `id`: `values` are the labels (bools, or floats with --soft)."""
        raise NotImplementedError

    def token_check(self, opts: "ExportOptions", tokenizer: Any) -> TokenCheck:
        """The one-token checks the consumer makes before reading any row (exit 2 here instead of
        an assertion in the trainer)."""
        return TokenCheck(tokenizer)

    def check_placement(self, row: dict[str, Any], opts: "ExportOptions", check: TokenCheck) -> None:
        """Raise placement.Misplaced if a label would not land on the token ending its step."""

    def label_positions(self, row: dict[str, Any], opts: "ExportOptions", tokenizer: Any,
                        max_completion_length: int | None) -> list[int | None]:
        """The token position of each label as the consumer reads the row (None: cut off before
        the length limit applies)."""
        raise NotImplementedError

    def write(self, rows: list[dict[str, Any]], output: str, opts: "ExportOptions", source: Provenance) -> None:
        write_rows(rows, output)


EXPORT_FORMATS: dict[str, ExportFormat] = {}


def register(fmt: ExportFormat) -> ExportFormat:
    """Add a format to `EXPORT_FORMATS` (in the order `--format` lists them)."""
    if not isinstance(fmt, ExportFormat):
        raise TypeError(f"not an ExportFormat: {fmt!r}")
    if fmt.name in EXPORT_FORMATS:
        raise ValueError(f"export format {fmt.name!r} is registered already")
    EXPORT_FORMATS[fmt.name] = fmt
    return fmt


def format_names(where: Callable[[ExportFormat], bool], sep: str = " or ") -> str:
    """The registered formats for which `where` holds, for messages and help."""
    return sep.join(name for name, fmt in EXPORT_FORMATS.items() if where(fmt))
