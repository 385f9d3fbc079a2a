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
    from prm_annotate.evaluation.label_sets import read_gold
    from prm_annotate.reports.compare import compare_recoveries, compare_sources, load_sources, parse_fields
    from prm_annotate.recovery.report import recovery_field

    with handled():
        fields = parse_fields(field or [], files)  # before any file is read, as before
        truth = read_gold([(gold, None)], label_field, split_field)
        sources = load_sources(files, fields, truth, split_field=split_field,
                               watch=lambda obj: recovery_field(obj) is not None)
        result = compare_sources(sources, truth)
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
