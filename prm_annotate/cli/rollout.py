from __future__ import annotations

from dataclasses import replace

import typer

from prm_annotate.cli.app import CommonRunOptions, InputArg, OutputOpt, app, handled
from prm_annotate.cli.engine_options import EngineOptions
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.stages.config import RolloutConfig


@app.command()
@option_groups
def rollout(
    input: InputArg,
    output: OutputOpt = "-",
    *,
    config: RolloutConfig,
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=1024),
    engine_opts: EngineOptions,
    executor_opts: ExecutorOptions,
) -> None:
    """Monte Carlo estimation: K completions from every step prefix, graded against the gold answer."""
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.engines.defaults import SPECULATE_IN_PROCESS
    from prm_annotate.stages.rollout import CompletionPrompts, RolloutStage, rollout_input_model
    from prm_annotate.strategies import get_strategy

    with handled():
        opts = run_opts.run_options(input, output)
        ray = executor_opts.ray()
        engine = engine_opts.config(seed=config.seed)
        get_strategy(config.strategy, config.label)  # an unknown strategy is said before the engine starts
        # A missing prompt file now, and a response sampled under another prompt in the input's check.
        input_model = rollout_input_model(CompletionPrompts(config.system_prompt, config.force_system_prompt))
        if config.speculate is None:
            config = replace(config, speculate=SPECULATE_IN_PROCESS if engine.kind == "vllm" else 0)

    def report_labels(stage, summary) -> None:
        if summary.written:
            s = stage.stats
            typer.echo(f"rollout: {s['completions']:,} completions, {s['completions_cut']:,} of them cut at --max-tokens "
                       f"(counted {config.cut_completions}); {s['first_error_found']} of {summary.written} responses "
                       f"have a first error, {s['first_errors_at_cut_steps']} of them at a step with cut completions "
                       f"and {s['first_errors_at_cut_responses']} at the last step of a response cut at sample's "
                       f"--max-tokens; {s['grade_errors']} completions could not be graded", err=True)

    run_model_stage(engine, lambda e: RolloutStage(e, config, engine_info=engine.describe()), opts, report_labels,
                    ray=ray, input_model=input_model)
