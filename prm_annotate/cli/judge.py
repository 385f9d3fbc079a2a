from __future__ import annotations

from prm_annotate.cli.app import InputArg, OutputOpt, PANEL_LABEL, app, handled
from prm_annotate.cli.model_stage import ModelStageOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.stages.config import JudgeConfig


@app.command(rich_help_panel=PANEL_LABEL)
@option_groups
def judge(input: InputArg, output: OutputOpt = "-", *, config: JudgeConfig,
          stage_opts: ModelStageOptions) -> None:
    """LLM-as-a-judge: find the first wrong step of each response (strictly parsed, never guessed)."""
    from prm_annotate.judging import load_judge_prompt
    from prm_annotate.stages.cascade import Cascade
    from prm_annotate.stages.judge import JudgeStage

    with handled():
        run = stage_opts.prepare(input, output, seed=config.run_seed)
        prompt = load_judge_prompt(config.prompt_choice, config.style)  # before the engine starts
        cascade = None
        if config.escalate_from is not None:  # the first file read whole, its budget made a threshold
            cascade = Cascade.make(config.escalate_from, config.confidence, config.escalate_below, config.budget)
            cascade.first.check_resume(output, cascade.threshold)

    run.start(lambda e: JudgeStage(e, config, prompt=prompt, engine_info=run.engine.describe(), cascade=cascade),
              input_model=JudgeStage.input_model)

