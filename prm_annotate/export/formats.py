"""What an export format is, and the registry `export --format` chooses from.

A format is one object: what it takes (soft labels, a step tag, a step-end marker, a test split),
its text conventions (the text before the first step and between steps), who reads it (named in
errors), and the few things that differ from format to format: the row's fields, the one-token
checks its consumer makes, where its consumer puts each label, and how it is written. Options are
validated by asking the format (`ExportOptions`), so no other code names a format.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry
from prm_annotate.settings import setting
from prm_annotate.steps import decode_optional_sep
from prm_annotate.export.placement import TokenCheck
from prm_annotate.export.writing import write_rows

if TYPE_CHECKING:
    from prm_annotate.export.examples import ExportSummary

VOTES = ("agreeing", "all")  # critic: the critiques whose verdict is the consensus first error, or every parsed one


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
    summary: str = ""  # one line, for the docs' table of formats
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
    critiques: bool = False  # its rows are the judge's critiques, not step labels (--votes, --judged)
    card: bool = False  # writes a dataset card for the Hub (--license)

    def own_rows(self, path: str, opts: ExportOptions, tokenizer: Any,
                 summary: ExportSummary) -> Iterator[dict[str, Any]] | None:
        """The rows of `path`, made as they are read (counted in `summary`), for a format whose rows
        are not one per labelled example (critic: one per critique of the judge); None, the
        default: one per example, made by `fields`."""
        return None

    def fields(self, problem: str, steps: list[str], values: list[Any], opts: ExportOptions,
               check: TokenCheck | None) -> dict[str, Any]:
        """A row's fields after `id`: `values` are the labels (bools, or floats with --soft)."""
        raise NotImplementedError

    def token_check(self, opts: ExportOptions, tokenizer: Any) -> TokenCheck:
        """The one-token checks the consumer makes before reading any row (exit 2 here instead of
        an assertion in the trainer)."""
        return TokenCheck(tokenizer)

    def check_placement(self, row: dict[str, Any], opts: ExportOptions, check: TokenCheck) -> None:
        """Raise placement.Misplaced if a label would not land on the token ending its step."""

    def label_positions(self, row: dict[str, Any], opts: ExportOptions, tokenizer: Any,
                        max_completion_length: int | None) -> list[int | None]:
        """The token position of each label as the consumer reads the row, for --max-length (None:
        cut off by `max_completion_length` first)."""
        raise UsageError(f"--max-length: the {self.name} format has no length check")

    def write(self, rows: Iterable[dict[str, Any]], output: str, opts: ExportOptions,
              finish: Callable[[int], Provenance]) -> None:
        """Write the rows as they come; `finish(count)`, once they are all made and before the
        output is put in place, may refuse the set (raise: nothing written) and says what it was
        made from."""
        write_rows(rows, output, finish)


EXPORT_FORMATS: Registry[ExportFormat] = Registry("--format", "The trainer's format", "docs/export.md", listing="names")


def register(fmt: ExportFormat) -> ExportFormat:
    """Add a format to `EXPORT_FORMATS` (in the order `--format` lists them)."""
    if not isinstance(fmt, ExportFormat):
        raise TypeError(f"not an ExportFormat: {fmt!r}")
    return EXPORT_FORMATS.register(fmt)


def format_names(where: Callable[[ExportFormat], bool], sep: str = " or ") -> str:
    """The registered formats for which `where` holds, for messages and help."""
    return EXPORT_FORMATS.where(where, sep)


LABEL_CHOICES = ("first-error", "recovery")
LICENSE = re.compile(r"[a-z0-9][a-z0-9.+-]*")  # the Hub's licence ids: apache-2.0, cc-by-nc-sa-4.0, llama3.1, other


@dataclass(frozen=True)
class ExportOptions:
    """How `export` writes rows: each field is an option of the command (its setting says which).

    Attributes:
        format: a name in EXPORT_FORMATS.
        soft: MC scores as labels (the formats that take soft labels).
        step_sep: the text between tagged steps; None: the format's own.
        placeholder: the step tag; None: the format's own.
        step_end: tokens: the marker carrying each step's label; None: one that is one token.
        votes: critic: which critiques (VOTES; None: agreeing).
        labels: which step labels (LABEL_CHOICES): "first-error" (the paper's: right before the
            first error, wrong at it, the steps after it left out) or "recovery" (every step,
            from the record's recovery: a slip wrong, wrong while a slip is uncorrected, right
            again from its correction on; records without one are skipped, counted).
    """

    format: str = setting(flags="--format", help=EXPORT_FORMATS.help)
    soft: bool = setting(False, flags="--soft/--no-soft", help=lambda: (
        f"MC scores as labels instead of hard labels ({format_names(lambda f: f.soft, ', ')})."))
    keep_scores: bool = setting(False, flags="--keep-scores/--no-keep-scores",
                                help="Add a `scores` column with the MC scores of the kept steps.")
    step_sep: str | None = setting(None, flags="--step-sep", parse=decode_optional_sep, help=(
        "Text between tagged steps (default: the format's own; for trl, the trainer's step_separator used by "
        "the length check)."))
    placeholder: str | None = setting(None, flags="--placeholder", help=(
        "Step tag (default ки; <extra_0> for qwen). Must be one token for --tokenizer: docs/export.md says which "
        "for Qwen/Llama-3."))
    step_end: str | None = setting(None, flags="--step-end", parse=decode_optional_sep, help=(
        "tokens: the marker after each step that carries its label (default: the first one-token of <extra_0>, "
        "ки, \\n\\n, \\n)."))
    test_split: float = setting(0.0, flags="--test-split", min=0.0, max=0.99,
                                help="hf: share of problems held out as a test split (by problem).")
    votes: str | None = setting(None, flags="--votes", metavar="agreeing|all", help=lambda: (
        f"{format_names(lambda f: f.critiques, ', ')}: the critiques to keep: agreeing with the consensus "
        "(default), or all (the others as negatives)."))
    judged: str | None = setting(None, flags="--judged", help=lambda: (
        f"{format_names(lambda f: f.critiques, ', ')}: the judged file the consensus input was made from "
        "(the steps the judge saw)."))
    license: str | None = setting(None, flags="--license", metavar="ID", help=lambda: (
        f"{format_names(lambda f: f.card, ', ')}: the dataset's licence, as the Hub names it (apache-2.0, mit, "
        "cc-by-4.0, ...); without it the dataset card says the licence is missing."))
    labels: str = setting("first-error", flags="--labels", metavar="first-error|recovery", help=(
        "Step labels: first-error (the paper's cut at the first error) or recovery (every step: a slip wrong, "
        "wrong until corrected, right again from its correction; from the record's recovery)."))

    def __post_init__(self) -> None:
        if self.labels not in LABEL_CHOICES:
            raise UsageError(f"--labels {self.labels}: choose {' or '.join(LABEL_CHOICES)}")
        fmt = EXPORT_FORMATS.get(self.format)
        if fmt is None:
            raise UsageError(f"unknown export format {self.format!r}; choose from {', '.join(EXPORT_FORMATS)}")
        if self.soft and not fmt.soft:
            raise UsageError(fmt.hard_only or
                             f"--soft: the {self.format} format takes hard labels only (soft labels go to "
                             f"{format_names(lambda f: f.soft)}; --keep-scores adds a `scores` column)")
        if self.placeholder is not None and not self.placeholder.strip():
            raise UsageError("--placeholder must not be blank")
        if self.placeholder is not None and fmt.default_tag is None:
            raise UsageError(f"--placeholder: the {self.format} format has no step tag"
                             + (" (its step-end marker is --step-end)" if fmt.step_end else ""))
        if self.step_end is not None and not fmt.step_end:
            raise UsageError(f"--step-end goes with --format {format_names(lambda f: f.step_end)}")
        if self.step_end is not None and not self.step_end:
            raise UsageError("--step-end must not be empty")
        if not 0.0 <= self.test_split < 1.0:
            raise UsageError(f"--test-split must be in [0, 1), got {self.test_split}")
        if self.test_split and not fmt.test_split:
            raise UsageError(f"--test-split goes with --format {format_names(lambda f: f.test_split)}")
        for option, value in (("--votes", self.votes), ("--judged", self.judged)):
            if value is not None and not fmt.critiques:
                raise UsageError(f"{option} goes with --format {format_names(lambda f: f.critiques)}")
        if self.labels == "recovery" and (self.soft or fmt.critiques):
            raise UsageError("--labels recovery writes step labels: " + (
                "--soft writes MC scores instead" if self.soft else f"--format {self.format} writes critiques"))
        if self.license is not None and not fmt.card:
            raise UsageError(f"--license goes with --format {format_names(lambda f: f.card)}")
        if self.license is not None and not LICENSE.fullmatch(self.license):
            raise UsageError(f"--license {self.license!r}: a licence id as the Hub names it, e.g. apache-2.0, mit, "
                             "cc-by-4.0 (lower case, no spaces)")
        if self.votes is not None and self.votes not in VOTES:
            raise UsageError(f"--votes {self.votes}: choose {' or '.join(VOTES)}")

    @property
    def export_format(self) -> ExportFormat:
        return EXPORT_FORMATS[self.format]

    @property
    def sep(self) -> str:
        return self.export_format.step_sep if self.step_sep is None else self.step_sep

    @property
    def tag(self) -> str | None:
        """The step tag: --placeholder, or the format's own (None for a format without one)."""
        return self.export_format.default_tag if self.placeholder is None else self.placeholder


@dataclass(frozen=True)
class ExportRun:
    """`export`'s options: the format's (`options`, checked when made) and the run's own.

    Attributes:
        options: the rows' format and what goes in them.
        output: JSONL, Parquet (a name ending in .parquet), "-", or a directory (hf).
        tokenizer: a local tokenizer to check label positions with; needed by tokens and max_length.
    """

    options: ExportOptions
    output: str = setting("-", flags=("-o", "--output"), help=(
        "Output: JSONL, Parquet if it ends with .parquet, or - (JSONL on standard output); a directory for hf."))
    tokenizer: str | None = setting(None, flags="--tokenizer", help=(
        "Tokenizer (local path) to check that every label lands on its step's last token; needed by tokens and "
        "--max-length."))
    max_length: int | None = setting(None, flags="--max-length", min=1, help=(
        "Trainer's maximum length in tokens: count labels it would cut off."))
    max_completion_length: int | None = setting(None, flags="--max-completion-length", min=1, help=(
        "trl: PRMConfig.max_completion_length for the length check."))
    drop_truncated: bool = setting(False, flags="--drop-truncated/--no-drop-truncated", help=(
        "Leave out rows that would lose labels at --max-length."))
