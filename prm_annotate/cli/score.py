from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from prm_annotate.cli.app import CommonRunOptions, FormatOpt, InputArg, OutputOpt, PANEL_TRAIN, app, handled
from prm_annotate.io.inputs import AUTO
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.engines import EngineConfig
from prm_annotate.prm.scorers import PRM_ENGINE
from prm_annotate.stages.score import ScoreConfig, ScoreStage


@app.command(rich_help_panel=PANEL_TRAIN)
@option_groups
def score(
    input: InputArg,
    output: OutputOpt = "-",
    format: FormatOpt = AUTO,
    *,
    config: ScoreConfig,
    engine: Annotated[EngineConfig, PRM_ENGINE],
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=64),
) -> None:
    """Score each step with a Process Reward Model: prm.scores and prm.first_error. Reads
    Qwen2ForProcessRewardModel PRMs (Qwen2.5-Math-PRM, `train`'s) in process or behind `vllm serve`
    (--base-url), and Math-Shepherd-style causal LMs (P(+) at each ' ки' tag)."""
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.prm.checkpoint import locate
    from prm_annotate.prm.scorers import scorer_for

    with handled():
        opts = run_opts.run_options(input, output, format=format)
        engine_config = replace(engine, load_progress=not run_opts.quiet)
        checkpoint = locate(engine_config.model)
        kind = scorer_for(checkpoint, served=engine_config.base_url is not None)
    # A bad line is said before the scorer starts (seconds), as the other model stages say it.
    run_model_stage(engine_config, lambda scorer: ScoreStage(scorer, config.threshold, engine_config.describe()), opts,
                    input_model=ScoreStage.input_model, make=lambda c: kind.start(checkpoint, c))
