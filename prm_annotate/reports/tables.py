"""Rich tables for people: the reports of `evaluate`, `compare` and `stats`."""
from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from prm_annotate.evaluation.evaluate import Report
from prm_annotate.evaluation.labels import id_notes  # noqa: F401 (the tables' own use)



def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def share(fraction: float | None) -> str:
    return pct(None if fraction is None else 100 * fraction)


def evaluate_table(report: Report) -> Group:
    table = Table(title=f"ProcessBench metric of {report.pred_field}")
    for col in ("split", "n", "error acc", "correct acc", "F1", "detected", "exact", "early", "late",
                "missed", "missing", "false alarms", "step P(wrong)", "step R(wrong)"):
        table.add_column(col, justify="left" if col == "split" else "right")
    rows = list(report.splits.items())
    if len(rows) > 1:
        rows.append(("all", report.overall))
    for group in (rows, [(f"{name} (tuned)", m) for name, m in report.tuned.items()]):
        if group and table.rows:
            table.add_section()  # the split the threshold was tuned on stands apart
        for name, m in group:
            table.add_row(name, str(m.n), pct(m.error_acc), pct(m.correct_acc), pct(m.f1), pct(m.detection_rate),
                          str(m.error_hits), str(m.early), str(m.late), str(m.missed), str(m.missing),
                          str(m.false_alarms), pct(m.step_precision), pct(m.step_recall))
    lines: list[Any] = [table, *threshold_lines(report)]
    lines += id_notes(report.missing_ids, "gold id(s) have no prediction (counted wrong)",
                      report.extra_ids, "prediction id(s) are not in the gold file (ignored)")
    return Group(*lines)


def threshold_lines(report: Report) -> list[Text]:
    """Which threshold cut the scores and how it was chosen, the averages, and how far the splits
    are from ProcessBench's full ones."""
    lines = []
    t = report.threshold
    if t is not None and t.tuned_on is None:
        lines.append(Text(f"threshold {t.value:g} (given): the first step scored below it is the prediction"))
    elif t is not None:
        lines.append(Text(f"threshold {t.value:g} tuned on {t.tuned_on} (F1 there {pct(t.tuning_f1)}, the best of "
                          f"{t.candidates} cuts), applied to {', '.join(report.splits) or 'no other split'}"))
    held = " held-out" if report.tuned else ""
    lines.append(Text(f"average F1 over {len(report.splits)}{held} split(s): {pct(report.average_f1)}"))
    if report.tuned:
        lines.append(Text(f"with the tuning split, as the ProcessBench paper averages its Skywork rows (not held "
                          f"out): {pct(report.average_f1_with_tuned)}"))
    bench = report.processbench()
    if bench and not bench["complete"]:
        parts = [f"{s} {v['responses']} of {v['official']}" for s, v in bench["splits"].items() if not v["complete"]]
        parts += [f"{s} absent" for s in bench["absent"]]
        lines.append(Text(f"not ProcessBench's full splits ({', '.join(parts)}): not comparable with published figures"))
    return lines


def compare_table(result: dict[str, Any]) -> Group:
    names = list(result["agreement"])
    agree = Table(title="Agreement of first errors (% of shared ids with the same first error; shared ids)")
    agree.add_column("")
    for name in names:
        agree.add_column(name, justify="right")
    for a in names:
        cells = []
        for b in names:
            cell = result["agreement"][a][b]
            cells.append(f"{pct(cell['agree'])} ({cell['shared']})")
        agree.add_row(a, *cells)

    metrics = Table(title="Each source against the gold")
    for col in ("source", "field", "coverage", "labelled", "error acc", "correct acc", "F1",
                "avg F1 (kept)", "avg F1 (all gold)", "kept step labels = gold"):
        metrics.add_column(col, justify="left" if col in ("source", "field") else "right")
    for name, s in result["sources"].items():
        kept = s["kept"]["overall"]
        metrics.add_row(name, s["field"], pct(s["coverage"]), f"{s['labelled']}/{result['gold_records']}",
                        pct(kept["error_acc"]), pct(kept["correct_acc"]), pct(kept["f1"]),
                        pct(s["kept"]["average_f1"]), pct(s["all"]["average_f1"]),
                        f"{pct(s['step_label_precision'])} ({s['step_labels_compared']})")
    return Group(agree, metrics)


RECOVERY_COLUMNS = (("slip P", "slip_precision"), ("slip R", "slip_recall"), ("slip F1", "slip_f1"),
                    ("correction P", "correction_precision"), ("correction R", "correction_recall"),
                    ("ends right alike", "ends_right_agreement"), ("step labels alike", "step_label_agreement"),
                    ("exact", "exact"))


def recovery_rows_table(title: str, rows: dict[str, dict[str, Any]]) -> Table:
    """Sources against a reference on slips and corrections (recovery.report.agreement), one row each."""
    table = Table(title=title)
    table.add_column("source")
    table.add_column("traces", justify="right")
    for name, _ in RECOVERY_COLUMNS:
        table.add_column(name, justify="right")
    for name, row in rows.items():
        table.add_row(name, str(row["traces"]), *(pct(row[key]) for _, key in RECOVERY_COLUMNS))
    return table


def recovery_table(result: dict[str, Any]) -> Group:
    counts = Table(title="Slips and corrections each source reads")
    keys = ["traces", "slips", "corrected", "uncaught", "with a corrected slip", "unparsed"]
    counts.add_column("source")
    for key in keys:
        counts.add_column(key, justify="right")
    for name, s in result["sources"].items():
        counts.add_row(name, *(str(s["counts"].get(k, 0)) for k in keys))
    against = {name: s["against_gold"] for name, s in result["sources"].items() if s["against_gold"]}
    parts: list[Any] = [counts]
    if against:
        parts.append(recovery_rows_table("Each source against the gold's slips and corrections (%)", against))
    return Group(*parts)


def stats_tables(stats: dict[str, Any]) -> Table:
    table = Table(title=f"{stats['path']}: {stats['records']} {stats['kind']} record(s)")
    for col in ("section", "key", "value"):
        table.add_column(col, justify="right" if col == "value" else "left")
    for section, values in stats.items():
        if not isinstance(values, dict) or not values:
            continue
        for i, (key, value) in enumerate(values.items()):
            table.add_row(section.replace("_", " ") if i == 0 else "", str(key), _fmt(value),
                          end_section=i == len(values) - 1)
    return table


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items())
    return "—" if value is None else str(value)


def show(renderable: Any) -> None:
    import sys

    # Off a terminal rich assumes 80 columns, which folds the wide tables into unreadable cells.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(renderable)


def bill_table(bill: dict[str, Any]) -> Group:
    """`stats`'s cost table (reports/stats.stage_bills): a row per stage, its share, the dominant one."""
    from prm_annotate.engines.bill import amount

    table = Table(title=f"The bill (compute in {bill['unit']}: tokens x parameters / 1e9)")
    for col in ("file", "stage", "model", "params", "requests", "prefill", "cached", "decode", "of it thought",
                "compute", "share %"):
        table.add_column(col, justify="left" if col in ("file", "stage", "model") else "right")
    for r in bill["stages"]:
        params = "—" if r["params"] is None else f"{amount(r['params'])} ({r['params_from']})"
        table.add_row(r["file"], r["stage"], r["model"], params, f"{r['requests']:,}", f"{r['prefill_tokens']:,}",
                      f"{r['cached_prompt_tokens']:,}", f"{r['decode_tokens']:,}", f"{r['thought_tokens']:,}",
                      "—" if r["compute"] is None else amount(r["compute"]), share(r["share"]))
    notes = []
    if bill["dominant"] is not None:
        notes.append(Text(f"{bill['dominant']} dominates: {share(max(r['share'] or 0 for r in bill['stages']))}% of "
                          f"{amount(bill['total_compute'])} {bill['unit']}."))
    if bill["unknown_size"]:
        notes.append(Text(f"model size unknown for {', '.join(bill['unknown_size'])}: give --params STAGE=SIZE."))
    return Group(table, *notes)
