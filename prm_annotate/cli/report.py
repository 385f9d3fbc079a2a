from __future__ import annotations

import sys
from typing import Annotated, List

import typer

from prm_annotate.cli.app import GoldFileOpt, PANEL_INSPECT, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.reports.html import PageConfig


@app.command("report", rich_help_panel=PANEL_INSPECT)
@option_groups
def report_command(
    files: Annotated[List[str], typer.Argument(help=(
        "The pipeline's files, joined by id: responses, rollouts, judged, consensus, scored (one of each kind)."))],
    gold: GoldFileOpt = None, *, config: PageConfig,
) -> None:
    """One self-contained HTML file to read before training: counts, agreement of MC and judge, where first
    errors fall, MC curves, cost, what was set aside; then each response with its step scores, completions
    and the judge's analysis."""
    from prm_annotate.reports.html import write_report

    with handled():
        written = write_report(files, config.output, gold=gold, max_responses=config.max_responses, seed=config.seed)
    print(written.line(), file=sys.stderr)
