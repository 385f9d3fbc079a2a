from __future__ import annotations

from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import CommonRunOptions, InputArg, OutputOpt, app, handled
from prm_annotate.cli.engine_options import EngineOptions
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.cli.option_groups import option_groups


@app.command()
@option_groups
def judge(
    input: InputArg,
    output: OutputOpt = "-",
    prompt: Annotated[str, typer.Option("--prompt", help="paper | processbench | a template FILE with {problem} and {paragraphs}.")] = "processbench",
    style: Annotated[Optional[str], typer.Option(
        "--style", help="Answer style of a custom --prompt FILE: processbench (\\boxed{index} from 0) or paper "
                        "(<conclusion>, paragraphs from 1). Default: processbench.")] = None,
    votes: Annotated[int, typer.Option("--votes", min=1, help="Verdicts per response; the majority wins, ties go to the earliest error.")] = 1,
    constrained: Annotated[bool, typer.Option("--constrained/--no-constrained", metavar="", help="Force the verdict's format (vLLM structured outputs) so it always parses.")] = False,
    temperature: Annotated[Optional[float], typer.Option("--temperature", min=0.0, help="Default: 0 with one vote, 0.7 with several.")] = None,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0)] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per verdict.")] = 2048,
    seed: Annotated[int, typer.Option("--seed", help="Run seed; each vote's seed derives from it.")] = 0,
    *,
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=256),
    engine_opts: EngineOptions,
    executor_opts: ExecutorOptions,
) -> None:
    """LLM-as-a-judge: find the first wrong step of each response (strictly parsed, never guessed)."""
    from prm_annotate.cli.app import fail
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.judging.parsing import STYLES
    from prm_annotate.prompt_files import JUDGE_PROMPTS, check_judge_template, load_prompt
    from prm_annotate.stages.judge import JudgeStage, style_for

    with handled():
        if style is not None and style not in STYLES:
            raise fail(f"--style {style}: choose {' or '.join(STYLES)}")
        opts = run_opts.run_options(input, output)
        ray = executor_opts.ray()
        config = engine_opts.config(seed=seed)
        template = load_prompt(prompt, JUDGE_PROMPTS)
        check_judge_template(template.text, template.path)
        answer_style = style_for(prompt, style)

    def report_parsing(stage, summary) -> None:
        if stage.stats["votes"]:
            typer.echo(f"judge: {stage.stats['parse_failures']} of {stage.stats['votes']} verdicts could not be "
                       f"parsed; {stage.stats['no_verdict']} responses have no verdict", err=True)

    run_model_stage(config, lambda engine: JudgeStage(
        engine, prompt=template, style=answer_style, votes=votes, temperature=temperature, top_p=top_p,
        max_tokens=max_tokens, seed=seed, constrained=constrained, engine_info=config.describe()),
        opts, report_parsing, ray=ray, input_model=JudgeStage.input_model)
