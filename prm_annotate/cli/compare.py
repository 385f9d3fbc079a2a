from __future__ import annotations

from typing import Annotated, List, Optional

import orjson
import typer

from prm_annotate.cli.app import GoldFileOpt, JsonOpt, LabelFieldOpt, PANEL_EVALUATE, SplitFieldOpt, app, handled


@app.command("compare", rich_help_panel=PANEL_EVALUATE)
def compare_command(
    files: Annotated[List[str], typer.Argument(help="Label sources: rollout, judged, consensus or any file with a first error.")],
    gold: GoldFileOpt,
    field: Annotated[Optional[List[str]], typer.Option("--field", help="FILE=dotted.path: where FILE keeps its first error (default: detected).")] = None,
    split_field: SplitFieldOpt = None,
    label_field: LabelFieldOpt = "label",
    as_json: JsonOpt = False,
) -> None:
    """Agreement matrix of first errors across label sources, and each source's metric against the gold."""
    from prm_annotate.reports.compare import compare_recoveries, compare_sources, load_sources, parse_fields
    from prm_annotate.evaluation.labels import load_gold

    with handled():
        sources = load_sources(files, parse_fields(field or []))
        result = compare_sources(sources, load_gold(gold, label_field), split_field=split_field)
        recovery = compare_recoveries(sources, gold)
        if recovery is not None:  # only then: a file of first errors only is reported as before
            result["recovery"] = recovery
    if as_json:
        typer.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        from prm_annotate.reports.tables import compare_table, show

        show(compare_table(result))
        if "recovery" in result:
            from prm_annotate.reports.tables import recovery_table

            show(recovery_table(result["recovery"]))
