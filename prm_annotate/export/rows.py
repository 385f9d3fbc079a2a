"""Labelled examples -> the rows of an export format (the formats: EXPORT_FORMATS).

Every row starts with the response `id` (trainers ignore extra columns) and, with --keep-scores,
ends with the MC `scores` of its steps. `soft=True` puts the MC scores of the kept steps in place
of the hard labels, for the formats that take them. In the tagged formats steps are stripped of
surrounding whitespace, and with a tokenizer every label is placed as its reader places it
(placement.py): a row where one would not land on the token ending its step stops the export.
"""
from __future__ import annotations

from typing import Any, Iterator

from prm_annotate.errors import InputError, UsageError
from prm_annotate.export.examples import Example, ExportSummary, read_examples
from prm_annotate.export.formats import ExportOptions
from prm_annotate.export.placement import Misplaced, TokenCheck


def to_row(example: Example, opts: ExportOptions, check: TokenCheck | None = None) -> dict[str, Any] | str:
    """One output row, or the reason the example cannot be written in this format."""
    if opts.soft:
        if example.scores is None or any(s is None for s in example.scores):
            return "no MC score for every kept step (--soft)"
        values: list[Any] = list(example.scores)
    else:
        values = list(example.labels)
    steps = example.steps
    if opts.export_format.tagged:
        # Whitespace around a step would sit next to its tag, where a tokenizer can fold the tag
        # into a whitespace piece and shift every later label: the tagged texts never keep it.
        steps = [s.strip() for s in steps]
        # (a step-end marker inside the text is harmless: those labels are explicit)
        if opts.tag is not None and any(opts.tag in t for t in [example.problem, *steps]):
            return f"text already contains the step tag {opts.tag!r}"
    row: dict[str, Any] = {"id": example.id, **opts.export_format.fields(example.problem, steps, values, opts, check)}
    if opts.keep_scores:
        row["scores"] = example.scores
    return row


def iter_rows(path: str, opts: ExportOptions, summary: ExportSummary, tokenizer: Any = None) -> Iterator[dict[str, Any]]:
    """The rows of `path` in the format, made as the records are read (`summary` counts them);
    with a tokenizer, every label is placed as the format's consumer will place it, and the first
    row where it would not land on the token ending its step stops the export (exit 2: the writer
    puts nothing in place)."""
    fmt = opts.export_format
    own = fmt.own_rows(path, opts, tokenizer, summary)
    if own is not None:
        return own
    check = fmt.token_check(opts, tokenizer) if tokenizer is not None else None
    if check is None and fmt.needs_tokenizer:
        raise UsageError(f"--format {fmt.name} needs --tokenizer")
    if check is not None:
        summary.step_end = check.step_end
    return _example_rows(path, opts, summary, check)


def _example_rows(path: str, opts: ExportOptions, summary: ExportSummary,
                  check: TokenCheck | None) -> Iterator[dict[str, Any]]:
    fmt = opts.export_format
    for where, example in read_examples(path, summary, opts.labels == "recovery"):
        try:
            row = to_row(example, opts, check)
            if isinstance(row, str):
                summary.skipped[row] += 1
                continue
            if check is not None:
                fmt.check_placement(row, opts, check)
        except Misplaced as exc:
            raise InputError(path, where, f"{example.id}: {exc} ({fmt.consumer})") from None
        yield row
