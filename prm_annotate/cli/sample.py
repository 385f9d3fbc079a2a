from __future__ import annotations

from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import (AnswerFieldOpt, CommonRunOptions, FormatOpt, IdFieldOpt, InputArg, OutputOpt,
                                  ProblemFieldOpt, StepSepOpt, app, handled)
from prm_annotate.cli.engine_options import EngineOptions
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.cli.option_groups import option_groups

SystemPromptOpt = Annotated[Optional[str], typer.Option(
    "--system-prompt", help="System prompt file, or none for no system prompt (default: prompts/sample_system.txt).")]


@app.command()
@option_groups
def sample(
    input: InputArg,
    output: OutputOpt = "-",
    n: Annotated[int, typer.Option("-n", "--num-samples", min=1, help="Responses per problem.")] = 8,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 0.7,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0)] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per response.")] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Run seed; each response's seed derives from it.")] = 0,
    system_prompt: SystemPromptOpt = None,
    step_sep: StepSepOpt = r"\n\n",
    format: FormatOpt = "auto",
    id_field: IdFieldOpt = "id",
    problem_field: ProblemFieldOpt = "problem",
    answer_field: AnswerFieldOpt = "answer",
    *,
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=256),
    engine_opts: EngineOptions,
    executor_opts: ExecutorOptions,
) -> None:
    """Sample n step-by-step responses per problem; split into steps and grade the final answers."""
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.prompt_files import SYSTEM_PROMPTS, load_prompt
    from prm_annotate.stages.sample import SampleStage
    from prm_annotate.steps import decode_sep

    with handled():
        opts = run_opts.run_options(input, output, format=format, id_field=id_field, problem_field=problem_field,
                                    answer_field=answer_field)
        ray = executor_opts.ray()
        config = engine_opts.config(seed=seed)
        prompt = load_prompt(system_prompt or "default", SYSTEM_PROMPTS, allow_none=True)
        sep = decode_sep(step_sep)

    def report_correct(stage, summary) -> None:
        if stage.stats["responses"]:
            typer.echo(f"sample: {stage.stats['correct']} of {stage.stats['responses']} responses correct, "
                       f"{stage.stats['truncated']} cut at --max-tokens", err=True)

    run_model_stage(config, lambda engine: SampleStage(
        engine, n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, step_sep=sep,
        system_prompt=prompt, engine_info=config.describe()), opts, report_correct, ray=ray,
        input_model=SampleStage.input_model)
