"""Rich tables for people: the reports of `evaluate`, `compare` and `stats`."""
from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from prm_annotate.reports.evaluate import Report


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def evaluate_table(report: Report) -> Group:
    table = Table(title=f"ProcessBench metric of {report.pred_field}")
    for col in ("split", "n", "error acc", "correct acc", "F1", "detected", "exact", "early", "late",
                "missed", "missing", "false alarms", "step P(wrong)", "step R(wrong)"):
        table.add_column(col, justify="left" if col == "split" else "right")
    rows = list(report.splits.items())
    if len(rows) > 1:
        rows.append(("all", report.overall))
    for name, m in rows:
        table.add_row(name, str(m.n), pct(m.error_acc), pct(m.correct_acc), pct(m.f1), pct(m.detection_rate),
                      str(m.error_hits), str(m.early), str(m.late), str(m.missed), str(m.missing),
                      str(m.false_alarms), pct(m.step_precision), pct(m.step_recall))
    lines: list[Any] = [table, Text(f"average F1 over {len(report.splits)} split(s): {pct(report.average_f1)}")]
    if report.missing_ids:
        lines.append(Text(f"{len(report.missing_ids)} gold id(s) have no prediction (counted wrong), "
                          f"e.g. {', '.join(report.missing_ids[:3])}"))
    if report.extra_ids:
        lines.append(Text(f"{len(report.extra_ids)} prediction id(s) are not in the gold file (ignored), "
                          f"e.g. {', '.join(report.extra_ids[:3])}"))
    return Group(*lines)


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
