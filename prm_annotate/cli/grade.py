from __future__ import annotations

from typing import Annotated

import typer

from prm_annotate.cli.app import CommonRunOptions, FormatOpt, InputArg, OutputOpt, StepSepOpt, app, handled
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.runner import close_stage, report, run_stage
from prm_annotate.steps import decode_sep


@app.command()
@option_groups
def grade(
    input: InputArg,
    output: OutputOpt = "-",
    format: FormatOpt = "auto",
    step_sep: StepSepOpt = r"\n\n",
    *,
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=256),
    reference_field: Annotated[str, typer.Option(help="A boolean field with a reference verdict to report agreement with.")] = "final_answer_correct",
    executor_opts: ExecutorOptions,
) -> None:
    """Re-grade the final answers of existing responses (sets final_answer and correct)."""
    from prm_annotate.stages.grade import GradeStage

    with handled():
        opts = run_opts.run_options(input, output, format=format)
        sep = decode_sep(step_sep)
        ray = executor_opts.ray()
        if ray is not None:
            from prm_annotate.executors.ray_executor import run_stage_on_ray

            stage, summary = run_stage_on_ray(lambda _engine: GradeStage(step_sep=sep, reference_field=reference_field), None, opts, ray)
        else:
            stage = GradeStage(step_sep=sep, reference_field=reference_field)
            try:
                summary = run_stage(stage, opts)
            finally:
                close_stage(stage)  # the grader's worker, also when a signal stops the run
        report(summary)
        graded, stats = summary.done, stage.stats
        if graded:
            print(f"grade: {stats['correct']} of {graded} correct "
                  f"({stats['grade_errors']} could not be graded)", file=typer.get_text_stream("stderr"))
        if stats["with_reference"]:
            share = 100 * stats["agree_with_reference"] / stats["with_reference"]
            print(f"grade: agrees with {reference_field} on {stats['agree_with_reference']} of "
                  f"{stats['with_reference']} ({share:.1f}%)", file=typer.get_text_stream("stderr"))
    raise typer.Exit(summary.exit_code)
