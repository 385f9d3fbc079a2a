from __future__ import annotations

from prm_annotate.cli.app import (PANEL_LABEL, AnswerFieldOpt, FormatOpt, IdFieldOpt, InputArg, OutputOpt, ProblemFieldOpt, app,
                                  handled)
from prm_annotate.io.inputs import AUTO, FieldMap
from prm_annotate.cli.model_stage import ModelStageOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.stages.config import SampleConfig


@app.command(rich_help_panel=PANEL_LABEL)
@option_groups
def sample(input: InputArg, output: OutputOpt = "-", format: FormatOpt = AUTO, id_field: IdFieldOpt = FieldMap.id,
           problem_field: ProblemFieldOpt = FieldMap.problem, answer_field: AnswerFieldOpt = FieldMap.answer, *,
           config: SampleConfig, stage_opts: ModelStageOptions) -> None:
    """Sample n step-by-step responses per problem; split into steps and grade the final answers."""
    from prm_annotate.stages.common import system_prompt_file
    from prm_annotate.stages.sample import SampleStage

    with handled():
        run = stage_opts.prepare(input, output, seed=config.sampling.seed, format=format, id_field=id_field,
                                 problem_field=problem_field, answer_field=answer_field)
        system_prompt_file(config.system_prompt)  # a missing prompt file is said before the engine starts
        config.segmenter()  # so is a segmenter setting that is wrong

    run.start(lambda e: SampleStage(e, config, engine_info=run.engine.describe()), input_model=SampleStage.input_model)
