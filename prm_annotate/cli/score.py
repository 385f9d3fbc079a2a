from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import CommonRunOptions, FormatOpt, InputArg, OutputOpt, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.engines import EngineConfig
from prm_annotate.prm.scorers import PRM_ENGINE


@app.command()
@option_groups
def score(
    input: InputArg,
    output: OutputOpt = "-",
    format: FormatOpt = "auto",
    threshold: Annotated[Optional[float], typer.Option("--threshold", min=0.0, max=1.0, help="A step scoring below this is an error (prm.first_error); default: the checkpoint's eval-tuned threshold, else 0.5.")] = None,
    *,
    engine: Annotated[EngineConfig, PRM_ENGINE],
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=64),
) -> None:
    """Score each step with a Process Reward Model: prm.scores and prm.first_error. Reads
    Qwen2ForProcessRewardModel PRMs (Qwen2.5-Math-PRM, `train`'s) in process or behind `vllm serve`
    (--base-url), and Math-Shepherd-style causal LMs (P(+) at each ' ки' tag)."""
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.prm.checkpoint import locate
    from prm_annotate.prm.scorers import scorer_for
    from prm_annotate.stages.score import ScoreStage

    with handled():
        opts = run_opts.run_options(input, output, format=format)
        config = replace(engine, load_progress=not run_opts.quiet)
        checkpoint = locate(config.model)
        kind = scorer_for(checkpoint, served=config.base_url is not None)
    run_model_stage(config, lambda scorer: ScoreStage(scorer, threshold), opts,
                    make=lambda c: kind.start(checkpoint, c))
