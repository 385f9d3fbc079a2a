from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import InputArg, app, handled


@app.command()
def export(
    input: InputArg,
    output: Annotated[str, typer.Option("-o", "--output", help="Output: JSONL, Parquet if it ends with .parquet, or - (JSONL).")],
    format: Annotated[str, typer.Option("--format", help="trl|openrlhf|qwen|math-shepherd")],
    soft: Annotated[bool, typer.Option("--soft", help="MC scores as labels instead of hard labels (openrlhf, qwen).")] = False,
    keep_scores: Annotated[bool, typer.Option("--keep-scores", help="Add a `scores` column with the MC scores of the kept steps.")] = False,
    step_sep: Annotated[Optional[str], typer.Option("--step-sep", help="Text between tagged steps (default: the format's own; for trl, the trainer's step_separator used by the length check).")] = None,
    placeholder: Annotated[Optional[str], typer.Option("--placeholder", help="Step tag (default ки; <extra_0> for qwen).")] = None,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="Tokenizer (local path) for the --max-length check.")] = None,
    max_length: Annotated[Optional[int], typer.Option("--max-length", min=1, help="Trainer's maximum length in tokens: count labels it would cut off.")] = None,
    max_completion_length: Annotated[Optional[int], typer.Option("--max-completion-length", min=1, help="trl: PRMConfig.max_completion_length for the length check.")] = None,
    drop_truncated: Annotated[bool, typer.Option("--drop-truncated", help="Leave out rows that would lose labels at --max-length.")] = False,
) -> None:
    """Consensus (or rollout, judged, ProcessBench) records -> a PRM training set."""
    from prm_annotate.errors import UsageError
    from prm_annotate.export import ExportOptions, build_rows, check_truncation, load_tokenizer, write_rows
    from prm_annotate.jsonl import check_input
    from prm_annotate.output import check_output
    from prm_annotate.steps import decode_sep

    with handled():
        if (tokenizer is None) != (max_length is None):
            raise UsageError("--tokenizer and --max-length go together")
        if max_completion_length is not None and (format != "trl" or max_length is None):
            raise UsageError("--max-completion-length is TRL's; it goes with --format trl, --tokenizer and --max-length")
        if drop_truncated and max_length is None:
            raise UsageError("--drop-truncated needs --tokenizer and --max-length")
        check_input(input)
        check_output(output, [input])
        opts = ExportOptions(format=format, soft=soft, keep_scores=keep_scores,
                             step_sep=None if step_sep is None else decode_sep(step_sep), placeholder=placeholder)
        rows, summary = build_rows(input, opts)
        if max_length is not None:
            trl_sep = opts.step_sep if opts.step_sep is not None else "\n"
            trunc = check_truncation(rows, opts, load_tokenizer(tokenizer), max_length, trl_sep, max_completion_length)
            if trunc.rows:
                action = "left out (--drop-truncated)" if drop_truncated else "kept; a trainer will cut these labels off"
                print(f"export: warning: {trunc.rows} of {len(rows)} rows lose {trunc.labels_lost} of "
                      f"{trunc.labels_total} step labels at --max-length {max_length} ({action})", file=sys.stderr)
                if drop_truncated:
                    rows = [r for r in rows if r["id"] not in trunc.lost_by_row]
                    summary.skipped["labels past --max-length"] += trunc.rows
        write_rows(rows, output)
    skipped = "; ".join(f"{n} {why}" for why, n in summary.skipped.items())
    print(f"export: {len(rows)} {format} rows from {summary.read} records to {output}"
          + (f" (skipped: {skipped})" if skipped else ""), file=sys.stderr)
