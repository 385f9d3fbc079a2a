from __future__ import annotations

from typing import Annotated

import orjson
import typer

from prm_annotate.cli.app import InputArg, JsonOpt, app, handled


@app.command()
def stats(
    input: InputArg,
    as_json: JsonOpt = False,
) -> None:
    """Counts, steps per response, first-error histograms, MC scores, judge parse failures, tokens."""
    from prm_annotate.reports.stats import file_stats

    with handled():
        result = file_stats(input)
    if as_json:
        typer.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
    else:
        from prm_annotate.reports.tables import show, stats_tables

        show(stats_tables(result))
