from __future__ import annotations

from typing import Annotated, Optional

import orjson
import typer

from prm_annotate.cli.app import app, handled


@app.command()
def evaluate(
    predictions: Annotated[list[str], typer.Argument(help="Records with a first-error prediction, or a PRM's step scores (`score` output) with --threshold/--tune-threshold-on: JSONL, JSON array or Parquet, one file or several (one per split, say), or -.")],
    gold: Annotated[list[str], typer.Option("--gold", help="Gold: one file (JSON array, JSONL or Parquet with `label`; splits from the id prefix), or ProcessBench's splits as downloaded: their folder, or the split files one by one (repeat --gold; the split named by the file: gsm8k.json, gsm8k/0000.parquet, data/gsm8k-00000-of-00001.parquet).")],
    pred_field: Annotated[Optional[str], typer.Option("--pred-field", help="Dotted path of the prediction, e.g. judge.first_error (default: detected from the first record, as compare does); with a threshold, of the step scores (default prm.scores).")] = None,
    threshold: Annotated[Optional[float], typer.Option("--threshold", min=0.0, max=1.0, help="Predict from step scores: the first step scored below this (-1 if none).")] = None,
    tune_threshold_on: Annotated[Optional[str], typer.Option("--tune-threshold-on", metavar="SPLIT", help="Predict from step scores at the threshold with the best F1 on SPLIT, applied to the other splits; SPLIT is reported apart, as tuned, outside the held-out average.")] = None,
    split_field: Annotated[Optional[str], typer.Option("--split-field", help="Dotted path of the split (default: the split of the gold file, else the id prefix before the first '-').")] = None,
    label_field: Annotated[str, typer.Option("--label-field", help="Dotted path of the gold first error.")] = "label",
    as_json: Annotated[bool, typer.Option("--json/--no-json", metavar="", help="Print one JSON object instead of a table.")] = False,
) -> None:
    """ProcessBench metric (error acc, correct acc, F1 per split, average F1) of first-error predictions,
    or of a PRM's step scores cut at a threshold given or tuned on one split."""
    from prm_annotate.errors import UsageError
    from prm_annotate.reports.evaluate import evaluate as run
    from prm_annotate.reports.evaluate import evaluate_scores
    from prm_annotate.reports.labels import load_gold_files, load_prediction_files

    with handled():
        if threshold is not None and tune_threshold_on is not None:
            raise UsageError("--threshold and --tune-threshold-on: give one (a threshold, or the split to choose it on)")
        scores = threshold is not None or tune_threshold_on is not None
        gold_labels = load_gold_files(gold, label_field)
        used, preds = load_prediction_files(predictions, pred_field, scores=scores)
        if not preds.keys() & gold_labels.keys():
            # Scoring would count every gold id as "no prediction": F1 0.0 that looks like a result.
            first = next(iter(preds), None)
            raise UsageError(f"no id of {', '.join(predictions)} is in {', '.join(gold)} ({len(preds)} predictions, "
                             f"first id {first!r}; first gold id {next(iter(gold_labels))!r})")
        if scores:
            report = evaluate_scores(gold_labels, preds, threshold=threshold, tune_on=tune_threshold_on,
                                     split_field=split_field, pred_field=used)
        else:
            report = run(gold_labels, preds, split_field=split_field, pred_field=used)
    if as_json:
        typer.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        from prm_annotate.reports.tables import evaluate_table, show

        show(evaluate_table(report))
