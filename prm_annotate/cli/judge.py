from __future__ import annotations

import typer

from prm_annotate.cli.app import CommonRunOptions, InputArg, OutputOpt, app, handled
from prm_annotate.cli.engine_options import EngineOptions
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.stages.config import JudgeConfig


@app.command()
@option_groups
def judge(
    input: InputArg,
    output: OutputOpt = "-",
    *,
    config: JudgeConfig,
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=256),
    engine_opts: EngineOptions,
    executor_opts: ExecutorOptions,
) -> None:
    """LLM-as-a-judge: find the first wrong step of each response (strictly parsed, never guessed)."""
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.judging import load_judge_prompt
    from prm_annotate.stages.judge import JudgeStage

    with handled():
        opts = run_opts.run_options(input, output)
        ray = executor_opts.ray()
        engine = engine_opts.config(seed=config.run_seed)
        prompt = load_judge_prompt(config.prompt_choice, config.style)  # before the engine starts

    def report_parsing(stage, summary) -> None:
        if stage.stats["votes"]:
            typer.echo(f"judge: {stage.stats['parse_failures']} of {stage.stats['votes']} verdicts could not be "
                       f"parsed; {stage.stats['no_verdict']} responses have no verdict", err=True)

    run_model_stage(engine, lambda e: JudgeStage(e, config, prompt=prompt, engine_info=engine.describe()), opts,
                    report_parsing, ray=ray, input_model=JudgeStage.input_model)
