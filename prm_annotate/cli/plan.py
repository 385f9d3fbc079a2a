"""`plan rollout|judge FILE [the stage's options]`: what the run would ask and cost, with no model
loaded (prm_annotate/stages/plan.py). The same options as the stage, so a command line is planned by
putting `plan` before it; the output and engine placement options are taken and not used."""
from __future__ import annotations

from typing import Any, Callable

import typer

from prm_annotate.cli.app import App, InputArg, JsonOpt, OutputOpt, PANEL_INSPECT, app, handled
from prm_annotate.cli.model_stage import ModelStageOptions
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.cli.rollout import RolloutStageOptions
from prm_annotate.stages.config import JudgeConfig, RolloutConfig

plan_app = App(help="What a rollout or judge run would ask of its engine and cost, before it runs (no model "
                            "loaded; the tokenizer of --model when found locally).", no_args_is_help=True)
app.add_typer(plan_app, name="plan", rich_help_panel=PANEL_INSPECT)


def _show(estimate: Callable[[], Any], as_json: bool) -> None:
    with handled():
        made = estimate()
    if as_json:
        import orjson

        typer.echo(orjson.dumps(made.record(), option=orjson.OPT_INDENT_2).decode())
        return
    from rich.table import Table

    from prm_annotate.reports.tables import show
    from prm_annotate.stages.plan import table_rows

    table = Table(title=f"plan {made.stage}: {made.records:,} records; prompt tokens by {made.counted_by}")
    for col in ("figure", "low", "high", "modelled (not a bound)"):
        table.add_column(col, justify="left" if col == "figure" else "right")
    for row in table_rows(made):
        table.add_row(*row)
    show(table)
    size = "unknown" if made.params is None else f"{made.params:,} parameters ({made.params_from})"
    typer.echo(f"compute in billion-parameter-tokens: (prefill + decode) x parameters / 1e9; model size {size}")
    for note in made.notes:
        typer.echo(f"note: {note}")


@plan_app.command("rollout")
@option_groups
def plan_rollout(input: InputArg, output: OutputOpt = "-", *, config: RolloutConfig,
                 stage_opts: RolloutStageOptions, as_json: JsonOpt = False) -> None:
    """The requests, completions, tokens and compute `rollout` would spend on INPUT with these options."""
    from prm_annotate.stages.plan import estimate_rollout

    _show(lambda: estimate_rollout(input, config, stage_opts.engine.describe()), as_json)


@plan_app.command("judge")
@option_groups
def plan_judge(input: InputArg, output: OutputOpt = "-", *, config: JudgeConfig,
               stage_opts: ModelStageOptions, as_json: JsonOpt = False) -> None:
    """The requests, votes, tokens and compute `judge` would spend on INPUT with these options."""
    from prm_annotate.stages.plan import estimate_judge

    _show(lambda: estimate_judge(input, config, stage_opts.engine.describe()), as_json)
