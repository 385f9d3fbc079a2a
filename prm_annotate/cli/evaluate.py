from __future__ import annotations

import orjson
import typer

from prm_annotate.cli.app import JsonOpt, PANEL_EVALUATE, app, handled
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.evaluation.benchmarks import BENCHMARKS, Options


@app.command(rich_help_panel=PANEL_EVALUATE)
@option_groups
def evaluate(*, options: Options, as_json: JsonOpt = False) -> None:
    """A benchmark's metric of first-error predictions or of a PRM's step scores (ProcessBench by default).

    ProcessBench: error acc, correct acc and F1 per split, and their average; step scores are cut at
    a threshold given or tuned on one split. PRMBench: PRMScore per category; Hard2Verify: its ErrorID
    metrics; DeltaBench: error-section recall, precision and F1 of critiques or section scores; each as
    its own script computes it (docs/scoring.md)."""
    from prm_annotate.errors import UsageError
    from prm_annotate.evaluation.evaluate import evaluate as run
    from prm_annotate.evaluation.evaluate import evaluate_scores
    from prm_annotate.evaluation.label_sets import read_gold, read_predictions
    from prm_annotate.evaluation.labels import gold_sources
    from prm_annotate.recovery.report import recovery_field

    predictions, gold, pred_field, threshold = options.predictions, options.gold, options.pred_field, options.threshold
    tune_threshold_on, split_field, label_field = options.tune_threshold_on, options.split_field, options.label_field
    if options.benchmark != "processbench":
        _other_benchmark(options, as_json)
        return
    with handled():
        if threshold is not None and tune_threshold_on is not None:
            raise UsageError("--threshold and --tune-threshold-on: give one (a threshold, or the split to choose it on)")
        scores = threshold is not None or tune_threshold_on is not None
        if scores and options.min_f1 is not None:
            raise UsageError("--min-f1 checks first-error predictions (a judge's, a critic's): give no threshold")
        gold_labels = read_gold(gold_sources(gold), label_field, split_field)
        preds = read_predictions(predictions, pred_field, gold_labels, split_field=split_field, name_extra=True,
                                 scores=(threshold if threshold is not None else "keep") if scores else None,
                                 watch=None if scores else lambda obj: recovery_field(obj) is not None)
        if not preds.matched():
            # Scoring would count every gold id as "no prediction": F1 0.0 that looks like a result.
            raise UsageError(f"no id of {', '.join(predictions)} is in {', '.join(gold)} ({preds.records} predictions, "
                             f"first id {preds.first_id!r}; first gold id {gold_labels.ids_at([0])[0]!r})")
        if scores:
            report = evaluate_scores(gold_labels, preds, threshold=threshold, tune_on=tune_threshold_on,
                                     pred_field=preds.field)
        else:
            report = run(gold_labels, preds, pred_field=preds.field)
        # Labels beyond the first error, where both sides have them (recovery/report.py): read only
        # when a prediction record has a reading.
        from prm_annotate.recovery.report import recovery_report

        recovery = recovery_report(predictions, gold) if preds.watched else None
        checked = None
        if options.min_f1 is not None:
            from prm_annotate.evaluation.critic_check import check

            checked = check(gold_labels, preds, options.min_f1)
    if as_json:
        out = report.to_dict()
        if recovery is not None:
            out["recovery"] = recovery
        if checked is not None:
            out["check"] = checked.to_dict()
        typer.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
    else:
        from prm_annotate.reports.tables import evaluate_table, recovery_rows_table, show

        show(evaluate_table(report))
        if recovery is not None:
            show(recovery_rows_table("Slips and corrections against the gold's (%)", {"predictions": recovery}))
    if checked is not None:
        if not as_json:
            typer.echo("\n".join(checked.lines()))
        if not checked.passed:
            raise typer.Exit(1)


def _other_benchmark(options: Options, as_json: bool) -> None:
    from prm_annotate.errors import UsageError

    name = options.benchmark
    with handled():
        bench = BENCHMARKS.named(name)
        if bench.run is None:  # processbench: evaluate's own path
            raise UsageError(f"--benchmark {name}: scored by evaluate itself")
        for option, value in (("--tune-threshold-on", options.tune_threshold_on), ("--split-field", options.split_field),
                              ("--min-f1", options.min_f1),
                              ("--label-field", None if options.label_field == "label" else options.label_field)):
            if value is not None:
                raise UsageError(f"{option} is ProcessBench's; {name}'s threshold rule: {bench.threshold_rule}")
        report = bench.run(options)
    if as_json:
        typer.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        from prm_annotate.reports.tables import show

        show(bench.table(report))
