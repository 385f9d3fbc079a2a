from __future__ import annotations

from typing import Annotated

import orjson
import typer

from prm_annotate.cli.app import GoldFileOpt, JsonOpt, LabelFieldOpt, PANEL_EVALUATE, app, handled


@app.command(rich_help_panel=PANEL_EVALUATE)
def bon(
    scored: Annotated[str, typer.Argument(help="Responses with `prm.scores` (one per step: `score` output, or any tool's) and the gold `answer`, or -.")],
    gold: GoldFileOpt = None,
    label_field: LabelFieldOpt = "label",
    as_json: JsonOpt = False,
) -> None:
    """Best-of-N accuracy of PRM aggregations (min, last, prod, mean) against majority vote and pass@N."""
    from prm_annotate.reports.bon import best_of_n, read_scored
    from prm_annotate.evaluation.labels import load_gold

    with handled():
        truth = load_gold(gold, label_field) if gold else None
        problems, undecided = read_scored(scored)
        result = best_of_n(problems, truth)
        result["undecided"] = undecided
    if as_json:
        typer.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        from prm_annotate.reports.bon import bon_table
        from prm_annotate.reports.tables import show

        show(bon_table(result))
