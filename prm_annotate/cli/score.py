from __future__ import annotations

from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import CommonRunOptions, FormatOpt, InputArg, OutputOpt, app, handled
from prm_annotate.cli.engine_options import (DtypeOpt, EnforceEagerOpt, KvCacheOpt, MaxModelLenOpt, ModelOpt,
                                             StartTimeoutOpt, build_config)
from prm_annotate.cli.option_groups import option_groups


def start_scorer(config):
    """The engine `score` runs: in-process vLLM with the pooling runner."""
    from prm_annotate.prm.vllm_scorer import VLLMPRMScorer

    return VLLMPRMScorer(config.model, start_timeout=config.start_timeout, **config.vllm_settings())


@app.command()
@option_groups
def score(
    input: InputArg,
    model: ModelOpt,
    output: OutputOpt = "-",
    format: FormatOpt = "auto",
    threshold: Annotated[Optional[float], typer.Option("--threshold", min=0.0, max=1.0, help="A step scoring below this is an error (prm.first_error); default: the checkpoint's eval-tuned threshold, else 0.5.")] = None,
    dtype: DtypeOpt = "auto",
    max_model_len: MaxModelLenOpt = None,
    enforce_eager: EnforceEagerOpt = None,
    kv_cache_gb: KvCacheOpt = None,
    start_timeout: StartTimeoutOpt = None,
    *,
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=64),
) -> None:
    """Score each step with a Process Reward Model (Qwen2ForProcessRewardModel, vLLM pooling runner):
    prm.scores and prm.first_error."""
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.stages.score import ScoreStage

    with handled():
        opts = run_opts.run_options(input, output, format=format)
        config = build_config(model=model, dtype=dtype, max_model_len=max_model_len, enforce_eager=enforce_eager,
                              kv_cache_gb=kv_cache_gb, start_timeout=start_timeout)
    run_model_stage(config, lambda engine: ScoreStage(engine, threshold), opts, make=start_scorer)
