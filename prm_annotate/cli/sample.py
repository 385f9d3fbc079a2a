from __future__ import annotations

from typing import Annotated

import typer

from prm_annotate.cli.app import AnswerFieldOpt, FormatOpt, IdFieldOpt, InputArg, OutputOpt, ProblemFieldOpt, app, handled
from prm_annotate.cli.model_stage import ModelStageOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.cli.stage_options import SAMPLE_OPTIONS
from prm_annotate.stages.config import SampleConfig


@app.command()
@option_groups
def sample(input: InputArg, output: OutputOpt = "-", format: FormatOpt = "auto", id_field: IdFieldOpt = "id",
           problem_field: ProblemFieldOpt = "problem", answer_field: AnswerFieldOpt = "answer", *,
           config: Annotated[SampleConfig, SAMPLE_OPTIONS], stage_opts: ModelStageOptions) -> None:
    """Sample n step-by-step responses per problem; split into steps and grade the final answers."""
    from prm_annotate.stages.common import system_prompt_file
    from prm_annotate.stages.sample import SampleStage

    with handled():
        run = stage_opts.prepare(input, output, seed=config.sampling.seed, format=format, id_field=id_field,
                                 problem_field=problem_field, answer_field=answer_field)
        system_prompt_file(config.system_prompt)  # a missing prompt file is said before the engine starts

    def report_correct(stage, summary) -> None:
        if stage.stats["responses"]:
            typer.echo(f"sample: {stage.stats['correct']} of {stage.stats['responses']} responses correct, "
                       f"{stage.stats['truncated']} cut at --max-tokens", err=True)
        if stage.stats["unfinished_thoughts"] or stage.stats["two_answers"]:
            typer.echo(f"sample: {stage.stats['unfinished_thoughts']} unfinished thoughts (no </think>: never graded or "
                       f"labelled), {stage.stats['two_answers']} with two different answers (refused)", err=True)

    run.start(lambda e: SampleStage(e, config, engine_info=run.engine.describe()), report_correct,
              input_model=SampleStage.input_model)
