from __future__ import annotations

from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import CommonRunOptions, FormatOpt, InputArg, OutputOpt, app, handled
from prm_annotate.cli.engine_options import (ApiKeyEnvOpt, ConcurrencyOpt, DtypeOpt, EnforceEagerOpt, KvCacheOpt,
                                             MaxAttemptsOpt, MaxModelLenOpt, RequestTimeoutOpt, StartTimeoutOpt,
                                             build_config)
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.engines import defaults

_P = "Engine"  # help panel

PRMOpt = Annotated[str, typer.Option(
    "--model", "-m", rich_help_panel=_P,
    help="The PRM: a checkpoint folder, or a hub id found in the local Hugging Face cache (never downloaded).")]
# No environment variable (unlike the generating stages' --base-url): the PRM's server is seldom the policy's.
PRMServerOpt = Annotated[Optional[str], typer.Option(
    "--base-url", rich_help_panel=_P,
    help="A `vllm serve <prm> --runner pooling --pooler-config '{\"step_tag_id\": N}'` server "
         "(e.g. http://127.0.0.1:8000/v1); without it the PRM runs in process.")]


@app.command()
@option_groups
def score(
    input: InputArg,
    model: PRMOpt,
    output: OutputOpt = "-",
    format: FormatOpt = "auto",
    threshold: Annotated[Optional[float], typer.Option("--threshold", min=0.0, max=1.0, help="A step scoring below this is an error (prm.first_error); default: the checkpoint's eval-tuned threshold, else 0.5.")] = None,
    base_url: PRMServerOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    concurrency: ConcurrencyOpt = defaults.CONCURRENCY,
    request_timeout: RequestTimeoutOpt = defaults.REQUEST_TIMEOUT,
    max_attempts: MaxAttemptsOpt = defaults.MAX_ATTEMPTS,
    dtype: DtypeOpt = None,
    max_model_len: MaxModelLenOpt = None,
    enforce_eager: EnforceEagerOpt = None,
    kv_cache_gb: KvCacheOpt = None,
    start_timeout: StartTimeoutOpt = None,
    *,
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
        config = build_config(model=model, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
                              request_timeout=request_timeout, max_attempts=max_attempts, dtype=dtype,
                              max_model_len=max_model_len, enforce_eager=enforce_eager, kv_cache_gb=kv_cache_gb,
                              start_timeout=start_timeout, load_progress=not run_opts.quiet)
        checkpoint = locate(model)
        kind = scorer_for(checkpoint, served=base_url is not None)
    run_model_stage(config, lambda scorer: ScoreStage(scorer, threshold), opts,
                    make=lambda c: kind.start(checkpoint, c))
