from __future__ import annotations

from typing import Annotated

import typer

from prm_annotate.cli.app import CommonRunOptions, FormatOpt, InputArg, OutputOpt, StepSepOpt, app, handled
from prm_annotate.cli.executor_options import GraderExecutorOptions
from prm_annotate.cli.option_groups import option_groups
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
    baseline: Annotated[bool, typer.Option(help="Beside the agreement, grade the records with a reference verdict by plain math-verify too.")] = True,
    executor_opts: GraderExecutorOptions,
) -> None:
    """Re-grade the final answers of existing responses (sets final_answer and correct)."""
    from prm_annotate.stages.grade import GradeStage

    with handled():
        opts = run_opts.run_options(input, output, format=format)
        sep = decode_sep(step_sep)
        _, summary = executor_opts.make().run(
            lambda _engine: GradeStage(step_sep=sep, reference_field=reference_field, baseline=baseline), None, opts,
            start=None)
    raise typer.Exit(summary.exit_code)

