from __future__ import annotations

import typer

from prm_annotate.cli.app import (BatchOpt, FormatOpt, InputArg, LimitOpt, OutputOpt, QuietOpt, ShardOpt,
                                  SkipInvalidOpt, StepSepOpt, app, handled, run_options)
from prm_annotate.runner import report, run_stage
from prm_annotate.steps import decode_sep


@app.command()
def grade(
    input: InputArg,
    output: OutputOpt = "-",
    format: FormatOpt = "auto",
    step_sep: StepSepOpt = r"\n\n",
    limit: LimitOpt = None,
    batch_size: BatchOpt = 256,
    skip_invalid: SkipInvalidOpt = False,
    quiet: QuietOpt = False,
    shard: ShardOpt = None,
) -> None:
    """Re-grade the final answers of existing responses (sets final_answer and correct)."""
    from prm_annotate.stages.grade import GradeStage

    with handled():
        opts = run_options(input, output, format=format, limit=limit, batch_size=batch_size,
                           skip_invalid=skip_invalid, quiet=quiet, shard=shard)
        stage = GradeStage(step_sep=decode_sep(step_sep))
        summary = run_stage(stage, opts)
        report(summary)
        graded = summary.written
        if graded:
            print(f"grade: {stage.stats['correct']} of {graded} correct "
                  f"({stage.stats['grade_errors']} could not be graded)", file=typer.get_text_stream("stderr"))
    raise typer.Exit(summary.exit_code)
