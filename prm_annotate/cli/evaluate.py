from __future__ import annotations

from typing import Annotated, Optional

import orjson
import typer

from prm_annotate.cli.app import app, handled


@app.command()
def evaluate(
    predictions: Annotated[str, typer.Argument(help="Records with a first-error prediction (JSONL or JSON array), or -.")],
    gold: Annotated[str, typer.Option("--gold", help="Gold file: ProcessBench JSON array or JSONL with `label`.")],
    pred_field: Annotated[Optional[str], typer.Option("--pred-field", help="Dotted path of the prediction, e.g. judge.first_error (default: detected from the first record, as compare does).")] = None,
    split_field: Annotated[Optional[str], typer.Option("--split-field", help="Dotted path of the split (default: id prefix before the first '-').")] = None,
    label_field: Annotated[str, typer.Option("--label-field", help="Dotted path of the gold first error.")] = "label",
    as_json: Annotated[bool, typer.Option("--json/--no-json", metavar="", help="Print one JSON object instead of a table.")] = False,
) -> None:
    """ProcessBench metric (error acc, correct acc, F1 per split, average F1) of first-error predictions."""
    from prm_annotate.errors import UsageError
    from prm_annotate.reports.evaluate import evaluate as run
    from prm_annotate.reports.labels import load_gold, load_predictions

    with handled():
        gold_labels = load_gold(gold, label_field)
        used, preds = load_predictions(predictions, pred_field)
        if not preds.keys() & gold_labels.keys():
            # Scoring would count every gold id as "no prediction": F1 0.0 that looks like a result.
            first = next(iter(preds), None)
            raise UsageError(f"no id of {predictions} is in {gold} ({len(preds)} predictions, first id "
                             f"{first!r}; first gold id {next(iter(gold_labels))!r})")
        report = run(gold_labels, preds, split_field=split_field, pred_field=used)
    if as_json:
        typer.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        from prm_annotate.reports.tables import evaluate_table, show

        show(evaluate_table(report))
