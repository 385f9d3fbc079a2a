from __future__ import annotations

from typing import Annotated, Optional

import orjson
import typer

from prm_annotate.cli.app import JsonOpt, LabelFieldOpt, SplitFieldOpt, app, handled
from prm_annotate.reports.benchmarks import BENCHMARKS


@app.command()
def evaluate(
    predictions: Annotated[list[str], typer.Argument(help="First-error predictions, or step scores (`score` output) with a threshold: JSONL, JSON or Parquet files, or -.")],
    gold: Annotated[list[str], typer.Option("--gold", help="Gold labels: one file, or ProcessBench's split files or their folder as downloaded (docs/scoring.md).")],
    pred_field: Annotated[Optional[str], typer.Option("--pred-field", help="Dotted path of the prediction, or of the step scores with a threshold (default: detected, or prm.scores).")] = None,
    threshold: Annotated[Optional[float], typer.Option("--threshold", min=0.0, max=1.0, help="Predict from step scores: the first step scored below this (-1 if none).")] = None,
    tune_threshold_on: Annotated[Optional[str], typer.Option("--tune-threshold-on", metavar="SPLIT", help="Tune the threshold for the best F1 on SPLIT and apply it to the others (SPLIT reported apart).")] = None,
    split_field: SplitFieldOpt = None,
    label_field: LabelFieldOpt = "label",
    as_json: JsonOpt = False,
    benchmark: Annotated[str, typer.Option("--benchmark", help=f"The benchmark whose metric to compute: {', '.join(BENCHMARKS)} (docs/scoring.md).")] = "processbench",
    tune_sample: Annotated[int, typer.Option("--tune-sample", min=1, help="hard2verify without --threshold: responses the threshold is tuned on (the paper's 100).")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="hard2verify: the seed of the tuning subset's draw.")] = 0,
) -> None:
    """A benchmark's metric of first-error predictions or of a PRM's step scores (ProcessBench by default).

    ProcessBench: error acc, correct acc and F1 per split, and their average; step scores are cut at
    a threshold given or tuned on one split. PRMBench: PRMScore per category; Hard2Verify: its ErrorID
    metrics; each as its own script computes it (docs/scoring.md)."""
    from prm_annotate.errors import UsageError
    from prm_annotate.reports.evaluate import evaluate as run
    from prm_annotate.reports.evaluate import evaluate_scores
    from prm_annotate.reports.labels import load_gold_files, load_prediction_files

    if benchmark != "processbench":
        _other_benchmark(benchmark, predictions, gold, pred_field, threshold, tune_threshold_on, split_field,
                         label_field, tune_sample, seed, as_json)
        return
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


def _other_benchmark(name: str, predictions: list[str], gold: list[str], pred_field: Optional[str],
                     threshold: Optional[float], tune_threshold_on: Optional[str], split_field: Optional[str],
                     label_field: str, tune_sample: int, seed: int, as_json: bool) -> None:
    from prm_annotate.errors import UsageError
    from prm_annotate.reports.benchmarks import Options

    with handled():
        bench = BENCHMARKS.get(name)
        if bench is None or bench.run is None:
            raise UsageError(f"--benchmark {name}: not a benchmark (choose from {', '.join(BENCHMARKS)})")
        for option, value in (("--tune-threshold-on", tune_threshold_on), ("--split-field", split_field),
                              ("--label-field", None if label_field == "label" else label_field)):
            if value is not None:
                raise UsageError(f"{option} is ProcessBench's; {name}'s threshold rule: {bench.threshold_rule}")
        report = bench.run(Options(predictions, gold, pred_field, threshold, tune_sample, seed))
    if as_json:
        typer.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        from prm_annotate.reports.tables import show

        show(bench.table(report))
