from __future__ import annotations

from typing import Annotated

import typer

from prm_annotate.cli.app import LimitOpt, OutputOpt, PANEL_LABEL, QuietOpt, SkipInvalidOpt, app, fail, handled
from prm_annotate.cli.declared import typer_option
from prm_annotate.stages.consensus import CONSENSUS_RULE

RuleOpt = typer_option(CONSENSUS_RULE, str)


@app.command(rich_help_panel=PANEL_LABEL)
def consensus(
    rollouts: Annotated[str, typer.Argument(help="Rollouts JSONL (output of rollout), or - for standard input.")],
    judged: Annotated[str, typer.Argument(help="Judged JSONL (output of judge).")],
    output: OutputOpt = "-",
    limit: LimitOpt = None,
    skip_invalid: SkipInvalidOpt = False,
    quiet: QuietOpt = False,
    rule: RuleOpt = "paper",
) -> None:
    """Keep responses where MC estimation and the judge agree on the first error; label their steps."""
    from prm_annotate.stages.consensus import print_summary, run_consensus

    with handled():
        if rollouts == "-" and judged == "-":
            raise fail("only one input can be standard input")
        summary = run_consensus(rollouts, judged, output, limit=limit, skip_invalid=skip_invalid, quiet=quiet,
                                rule=rule)
        print_summary(summary)
