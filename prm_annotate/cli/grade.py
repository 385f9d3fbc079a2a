from __future__ import annotations

import typer

from prm_annotate.cli.app import CommonRunOptions, FormatOpt, InputArg, OutputOpt, PANEL_LABEL, StepSepOpt, app, handled
from prm_annotate.io.inputs import AUTO
from prm_annotate.cli.executor_options import GraderExecutorOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.stages.grade import GradeConfig
from prm_annotate.steps import decode_sep


@app.command(rich_help_panel=PANEL_LABEL)
@option_groups
def grade(input: InputArg, output: OutputOpt = "-", format: FormatOpt = AUTO, step_sep: StepSepOpt = r"\n\n", *,
          config: GradeConfig, run_opts: CommonRunOptions = CommonRunOptions(batch_size=256),
          executor_opts: GraderExecutorOptions) -> None:
    """Re-grade the final answers of existing responses (sets final_answer and correct)."""
    from prm_annotate.stages.grade import GradeStage

    with handled():
        opts = run_opts.run_options(input, output, format=format)
        sep = decode_sep(step_sep)
        _, summary = executor_opts.make().run(
            lambda _engine: GradeStage(step_sep=sep, reference_field=config.reference_field, baseline=config.baseline),
            None, opts, start=None)
    raise typer.Exit(summary.exit_code)

