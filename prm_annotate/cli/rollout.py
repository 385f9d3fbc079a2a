from __future__ import annotations

from dataclasses import dataclass, replace

from prm_annotate.cli.app import CommonRunOptions, InputArg, OutputOpt, PANEL_LABEL, app, handled
from prm_annotate.cli.model_stage import ModelStageOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.stages.config import RolloutConfig


@dataclass(frozen=True, kw_only=True)
class RolloutStageOptions(ModelStageOptions):
    # The adaptive strategies hold ~1 request per record: 256 records would leave the engine underfed.
    run: CommonRunOptions = CommonRunOptions(batch_size=1024)


@app.command(rich_help_panel=PANEL_LABEL)
@option_groups
def rollout(input: InputArg, output: OutputOpt = "-", *,
            config: RolloutConfig,
            stage_opts: RolloutStageOptions) -> None:
    """Monte Carlo estimation: K completions from every step prefix, graded against the gold answer."""
    from prm_annotate.engines.defaults import SPECULATE_IN_PROCESS
    from prm_annotate.stages.judged_file import JudgedFile
    from prm_annotate.stages.rollout import CompletionPrompts, RolloutStage, rollout_input_model
    from prm_annotate.strategies import get_strategy

    with handled():
        run = stage_opts.prepare(input, output, seed=config.sampling.seed)
        get_strategy(config.strategy, config.label)  # an unknown strategy is said before the engine starts
        judged = JudgedFile.load(config.judged) if config.judged is not None else None
        if judged is not None:
            judged.check_resume(output)
        # A missing prompt file now, and a response sampled under another prompt in the input's check.
        input_model = rollout_input_model(CompletionPrompts(config.system_prompt, config.force_system_prompt), judged)
        if config.speculate is None:
            config = replace(config, speculate=SPECULATE_IN_PROCESS if run.engine.kind == "vllm" else 0)

    run.start(lambda e: RolloutStage(e, config, engine_info=run.engine.describe(), judged_file=judged),
              input_model=input_model)
