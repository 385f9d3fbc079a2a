from __future__ import annotations

import sys

from prm_annotate.cli.app import InputArg, PANEL_TRAIN, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.export import ExportRun, format_names


@app.command(rich_help_panel=PANEL_TRAIN)
@option_groups
def export(input: InputArg, *, run: ExportRun) -> None:
    """Consensus (or rollout, judged, ProcessBench) records -> a PRM training set."""
    from prm_annotate.errors import UsageError
    from prm_annotate.export import ExportSummary, Provenance, Truncation, drop_or_count, iter_rows, load_tokenizer
    from prm_annotate.io.jsonl import check_input
    from prm_annotate.io.output import check_output

    opts = run.options  # checked when the options were read: an unknown format or a bad combination is exit 2
    with handled():
        fmt = opts.export_format
        if run.max_length is not None and run.tokenizer is None:
            raise UsageError("--max-length needs --tokenizer")
        if run.max_completion_length is not None and (not fmt.completion_limit or run.max_length is None):
            raise UsageError("--max-completion-length is TRL's; it goes with --format "
                             f"{format_names(lambda f: f.completion_limit)}, --tokenizer and --max-length")
        if run.drop_truncated and run.max_length is None:
            raise UsageError("--drop-truncated needs --tokenizer and --max-length")
        check_input(input)
        if opts.judged is not None:
            check_input(opts.judged)
        check_output(run.output, [input, opts.judged], directory=fmt.directory)
        tok = None if run.tokenizer is None else load_tokenizer(run.tokenizer)
        summary = ExportSummary()
        rows = iter_rows(input, opts, summary, tok)
        trunc = None
        if run.max_length is not None:
            trunc = Truncation(run.max_length)
            rows = drop_or_count(rows, trunc, opts, tok, run.max_completion_length, run.drop_truncated)
        written = 0

        def finish(count: int) -> Provenance:
            """Every row is made: warn of lost labels, refuse an empty set (nothing is in place yet)."""
            nonlocal written
            written = count
            if trunc is not None and trunc.rows:
                action = "left out (--drop-truncated)" if run.drop_truncated else "kept; a trainer will cut these labels off"
                print(f"export: warning: {trunc.rows} of {trunc.rows_seen} rows lose {trunc.labels_lost} of "
                      f"{trunc.labels_total} step labels at --max-length {run.max_length} ({action})", file=sys.stderr)
                if run.drop_truncated:
                    summary.skipped["labels past --max-length"] += trunc.rows
            if not count:
                # A trainer cannot use an empty set, and a cron job must notice: refuse, leave any
                # earlier output as it was.
                raise UsageError(f"export: no {opts.format} rows from {summary.read} records of {input}"
                                 + (f" (skipped: {skipped()})" if summary.skipped else "") + f"; {run.output} not written")
            return Provenance(input, summary.read, ("prm-annotate", *sys.argv[1:]))

        def skipped() -> str:
            return "; ".join(f"{n} {why}" for why, n in summary.skipped.items())

        opts.export_format.write(rows, run.output, opts, finish)
    print(f"export: {written} {opts.format} rows from {summary.read} records to {run.output}"
          + (f" with step end {summary.step_end!r}" if summary.step_end is not None else "")
          + (f" (skipped: {skipped()})" if summary.skipped else ""), file=sys.stderr)
