from __future__ import annotations

import sys
from typing import Annotated, List, Optional

import typer

from prm_annotate.cli.app import app, handled


@app.command("report")
def report_command(
    files: Annotated[List[str], typer.Argument(help=(
        "The pipeline's files, joined by id: responses, rollouts, judged, consensus, scored (one of each kind)."))],
    output: Annotated[str, typer.Option("-o", "--output", help="The HTML file to write.")] = "report.html",
    gold: Annotated[Optional[str], typer.Option("--gold", help="Gold first errors (`label`), shown beside each step.")] = None,
    max_responses: Annotated[int, typer.Option("--max-responses", min=1, help=(
        "Responses the page lets you browse, a seeded sample (the overview counts every record)."))] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of that sample.")] = 0,
) -> None:
    """One self-contained HTML file to read before training: counts, agreement of MC and judge, where first
    errors fall, MC curves, cost, what was set aside; then each response with its step scores, completions
    and the judge's analysis."""
    from prm_annotate.reports.html import write_report

    with handled():
        written = write_report(files, output, gold=gold, max_responses=max_responses, seed=seed)
    print(written.line(), file=sys.stderr)
