from __future__ import annotations

from typing import Annotated, List, Optional

import orjson
import typer

from prm_annotate.cli.app import JsonOpt, PANEL_INSPECT, app, handled
from prm_annotate.cli.declared import typer_option
from prm_annotate.reports.stats import StatsConfig
from prm_annotate.settings import setting_of

ParamsOpt = typer_option(setting_of(StatsConfig, "params"), Optional[list[str]])


@app.command(rich_help_panel=PANEL_INSPECT)
def stats(
    input: Annotated[List[str], typer.Argument(help="Input files (- for standard input); several: each, then their bill.")],
    params: ParamsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Counts, steps per response, first-error histograms, MC scores, judge parse failures, tokens; and
    the bill of the model stages that wrote the files (from their manifests), naming the one that dominates."""
    from prm_annotate.reports.stats import file_stats, stage_bills

    with handled():
        sizes = StatsConfig(params=params).sizes()
        results = [file_stats(path) for path in input]
        bill = stage_bills(list(input), sizes)
    if as_json:
        # One file: its stats as before, with the bill beside them; several: each file's, then the bill.
        out = {**results[0], "bill": bill} if len(results) == 1 else {"files": results, "bill": bill}
        typer.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
    else:
        from prm_annotate.reports.tables import bill_table, show, stats_tables

        for result in results:
            show(stats_tables(result))
        if bill["stages"]:
            show(bill_table(bill))
