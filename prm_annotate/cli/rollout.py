from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

import typer

from prm_annotate.cli.app import CommonRunOptions, InputArg, OutputOpt, app, handled
from prm_annotate.cli.model_stage import ModelStageOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.cli.stage_options import ROLLOUT_OPTIONS
from prm_annotate.stages.config import RolloutConfig


@dataclass(frozen=True, kw_only=True)
class RolloutStageOptions(ModelStageOptions):
    # The adaptive strategies hold ~1 request per record: 256 records would leave the engine underfed.
    run: CommonRunOptions = CommonRunOptions(batch_size=1024)


@app.command()
@option_groups
def rollout(input: InputArg, output: OutputOpt = "-", *,
            config: Annotated[RolloutConfig, ROLLOUT_OPTIONS],
            stage_opts: RolloutStageOptions) -> None:
    """Monte Carlo estimation: K completions from every step prefix, graded against the gold answer."""
    from prm_annotate.engines.defaults import SPECULATE_IN_PROCESS
    from prm_annotate.stages.judged_file import JudgedFile
    from prm_annotate.stages.rollout import CompletionPrompts, RolloutStage, rollout_input_model
    from prm_annotate.strategies import get_strategy
    from prm_annotate.strategies.verify import OUTCOMES

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

    def report_labels(stage, summary) -> None:
        if summary.written:
            s = stage.stats
            typer.echo(f"rollout: {s['completions']:,} completions, {s['completions_cut']:,} of them cut at --max-tokens "
                       f"(counted {config.cut_completions}); {s['first_error_found']} of {summary.written} responses "
                       f"have a first error, {s['first_errors_at_cut_steps']} of them at a step with cut completions "
                       f"and {s['first_errors_at_cut_responses']} at the last step of a response cut at sample's "
                       f"--max-tokens; {s['grade_errors']} completions could not be graded", err=True)
            if s["completions_cut_in_thought"]:
                typer.echo(f"rollout: {s['completions_cut_in_thought']:,} completions cut inside their thought "
                           "(no answer)", err=True)
            if judged is not None:
                typer.echo("rollout --strategy verify: " + ", ".join(
                    f"{s[f'verified: {o}']} {o}" for o in OUTCOMES) + " (consensus keeps the confirmed)", err=True)

        aside = {k: v for k, v in stage.stats.items() if k.startswith("set aside: ")}
        if aside:  # responses with no answer to label: not failures, never labelled
            typer.echo("rollout: " + "; ".join(f"{v} {k}" for k, v in aside.items()), err=True)

    run.start(lambda e: RolloutStage(e, config, engine_info=run.engine.describe(), judged_file=judged), report_labels,
              input_model=input_model)
