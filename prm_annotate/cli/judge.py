from __future__ import annotations

from typing import Annotated

import typer

from prm_annotate.cli.app import InputArg, OutputOpt, app, handled
from prm_annotate.cli.model_stage import ModelStageOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.cli.stage_options import JUDGE_OPTIONS
from prm_annotate.stages.config import JudgeConfig


@app.command()
@option_groups
def judge(input: InputArg, output: OutputOpt = "-", *, config: Annotated[JudgeConfig, JUDGE_OPTIONS],
          stage_opts: ModelStageOptions) -> None:
    """LLM-as-a-judge: find the first wrong step of each response (strictly parsed, never guessed)."""
    from prm_annotate.judging import load_judge_prompt
    from prm_annotate.stages.judge import JudgeStage

    with handled():
        run = stage_opts.prepare(input, output, seed=config.run_seed)
        prompt = load_judge_prompt(config.prompt_choice, config.style)  # before the engine starts

    def report_parsing(stage, summary) -> None:
        for line in judge_report(stage.stats, stage.reasons):
            typer.echo(line, err=True)

    run.start(lambda e: JudgeStage(e, config, prompt=prompt, engine_info=run.engine.describe()), report_parsing,
              input_model=JudgeStage.input_model)


def judge_report(stats, reasons) -> list[str]:
    """What the judge cost and how much of it was read: the lines after the run's summary."""
    votes = stats["votes"]
    if not votes:
        return []

    def share(n: int) -> str:
        return f"{100.0 * n / votes:.1f}%"

    lines = [f"judge: {stats['parse_failures']} of {votes} verdicts could not be parsed ({share(stats['parse_failures'])}); "
             f"{stats['no_verdict']} responses have no verdict"]
    if reasons:
        lines.append("judge: not parsed: " + ", ".join(f"{n} {kind}" for kind, n in reasons.most_common()))
    generated = f"{stats['generated_tokens']:,} generated"
    if stats["reasoning_untold"]:
        generated += f" (the reasoning's share untold for {stats['reasoning_untold']} requests)"
    elif stats["reasoning_tokens"]:
        generated += (f" ({stats['reasoning_tokens']:,} reasoning, "
                      f"{stats['generated_tokens'] - stats['reasoning_tokens']:,} answer)")
    lines.append(f"judge: cost {stats['prompt_tokens']:,} prompt tokens, {generated}; {stats['cut_votes']} of {votes} "
                 f"votes cut at --max-tokens ({share(stats['cut_votes'])})")
    return lines
