from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import InputArg, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.export import EXPORT_FORMATS, ExportOptions, format_names
from prm_annotate.steps import decode_sep


@dataclass(frozen=True)
class ExportCommandOptions:
    """`export`'s options as one group (see option_groups), in their --help order. The library's
    `ExportOptions` is built from them by `export_options`, after the checks on files, so a bad
    input file is said before a bad option combination."""

    format: Annotated[str, typer.Option("--format", help=" | ".join(EXPORT_FORMATS))]
    output: Annotated[str, typer.Option("-o", "--output", help="Output: JSONL, Parquet if it ends with .parquet, or - (JSONL on standard output); a directory for hf.")] = "-"
    soft: Annotated[bool, typer.Option("--soft/--no-soft", metavar="", help=f"MC scores as labels instead of hard labels ({format_names(lambda f: f.soft, ', ')}).")] = False
    keep_scores: Annotated[bool, typer.Option("--keep-scores/--no-keep-scores", metavar="", help="Add a `scores` column with the MC scores of the kept steps.")] = False
    step_sep: Annotated[Optional[str], typer.Option("--step-sep", help="Text between tagged steps (default: the format's own; for trl, the trainer's step_separator used by the length check).")] = None
    placeholder: Annotated[Optional[str], typer.Option("--placeholder", help="Step tag (default ки; <extra_0> for qwen). Must be one token for --tokenizer: docs/export.md says which for Qwen/Llama-3.")] = None
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="Tokenizer (local path) to check that every label lands on its step's last token; needed by tokens and --max-length.")] = None
    step_end: Annotated[Optional[str], typer.Option("--step-end", help="tokens: the marker after each step that carries its label (default: the first one-token of <extra_0>, ки, \\n\\n, \\n).")] = None
    test_split: Annotated[float, typer.Option("--test-split", min=0.0, max=0.99, help="hf: share of problems held out as a test split (by problem).")] = 0.0
    max_length: Annotated[Optional[int], typer.Option("--max-length", min=1, help="Trainer's maximum length in tokens: count labels it would cut off.")] = None
    max_completion_length: Annotated[Optional[int], typer.Option("--max-completion-length", min=1, help="trl: PRMConfig.max_completion_length for the length check.")] = None
    drop_truncated: Annotated[bool, typer.Option("--drop-truncated/--no-drop-truncated", metavar="", help="Leave out rows that would lose labels at --max-length.")] = False
    judged: Annotated[Optional[str], typer.Option("--judged", help=f"{format_names(lambda f: f.critiques, ', ')}: the judged file the consensus input was made from (the steps the judge saw).")] = None
    votes: Annotated[Optional[str], typer.Option("--votes", metavar="agreeing|all", help=f"{format_names(lambda f: f.critiques, ', ')}: the critiques to keep: agreeing with the consensus (default), or all (the others as negatives).")] = None

    def export_options(self) -> ExportOptions:
        """The export format's options; raises UsageError."""
        return ExportOptions(format=self.format, soft=self.soft, keep_scores=self.keep_scores,
                             step_sep=None if self.step_sep is None else decode_sep(self.step_sep),
                             placeholder=self.placeholder,
                             step_end=None if self.step_end is None else decode_sep(self.step_end),
                             test_split=self.test_split, votes=self.votes, judged=self.judged)


@app.command()
@option_groups
def export(input: InputArg, *, options: ExportCommandOptions) -> None:
    """Consensus (or rollout, judged, ProcessBench) records -> a PRM training set."""
    from prm_annotate.errors import UsageError
    from prm_annotate.export import Provenance, build_rows, check_truncation, load_tokenizer
    from prm_annotate.io.jsonl import check_input
    from prm_annotate.io.output import check_output

    with handled():
        fmt = EXPORT_FORMATS.get(options.format)  # None: ExportOptions says so, after the checks on files
        if options.max_length is not None and options.tokenizer is None:
            raise UsageError("--max-length needs --tokenizer")
        if options.max_completion_length is not None and (fmt is None or not fmt.completion_limit or options.max_length is None):
            raise UsageError("--max-completion-length is TRL's; it goes with --format "
                             f"{format_names(lambda f: f.completion_limit)}, --tokenizer and --max-length")
        if options.drop_truncated and options.max_length is None:
            raise UsageError("--drop-truncated needs --tokenizer and --max-length")
        check_input(input)
        if options.judged is not None:
            check_input(options.judged)
        check_output(options.output, [input, options.judged], directory=fmt is not None and fmt.directory)
        opts = options.export_options()
        tok = None if options.tokenizer is None else load_tokenizer(options.tokenizer)
        rows, summary = build_rows(input, opts, tok)
        if options.max_length is not None:
            trunc = check_truncation(rows, opts, tok, options.max_length, options.max_completion_length)
            if trunc.rows:
                action = "left out (--drop-truncated)" if options.drop_truncated else "kept; a trainer will cut these labels off"
                print(f"export: warning: {trunc.rows} of {len(rows)} rows lose {trunc.labels_lost} of "
                      f"{trunc.labels_total} step labels at --max-length {options.max_length} ({action})", file=sys.stderr)
                if options.drop_truncated:
                    rows = [r for r in rows if r["id"] not in trunc.lost_by_row]
                    summary.skipped["labels past --max-length"] += trunc.rows
        skipped = "; ".join(f"{n} {why}" for why, n in summary.skipped.items())
        if not rows:
            # A trainer cannot use an empty set, and a cron job must notice: refuse, leave any
            # earlier output as it was.
            raise UsageError(f"export: no {options.format} rows from {summary.read} records of {input}"
                             + (f" (skipped: {skipped})" if skipped else "") + f"; {options.output} not written")
        source = Provenance(input, summary.read, ("prm-annotate", *sys.argv[1:]))
        opts.export_format.write(rows, options.output, opts, source)
    print(f"export: {len(rows)} {options.format} rows from {summary.read} records to {options.output}"
          + (f" with step end {summary.step_end!r}" if summary.step_end is not None else "")
          + (f" (skipped: {skipped})" if skipped else ""), file=sys.stderr)
