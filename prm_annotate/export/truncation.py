"""Labels a trainer would lose to its maximum sequence length."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from prm_annotate.export.formats import ExportOptions


@dataclass
class Truncation:
    max_length: int
    rows: int = 0  # rows that lose at least one label
    labels_lost: int = 0
    labels_total: int = 0
    lost_by_row: dict[str, int] = field(default_factory=dict)


def check_truncation(rows: Iterable[dict[str, Any]], opts: ExportOptions, tokenizer: Any, max_length: int,
                     max_completion_length: int | None = None) -> Truncation:
    """Labels a trainer would lose: those whose token lies at or past `max_length` (and, for a
    trainer that cuts completions first (TRL), past `max_completion_length` tokens of completion)."""
    report = Truncation(max_length)
    for row in rows:
        positions = opts.export_format.label_positions(row, opts, tokenizer, max_completion_length)
        lost = sum(p is None or p >= max_length for p in positions)
        report.labels_total += len(positions)
        if lost:
            report.rows += 1
            report.labels_lost += lost
            report.lost_by_row[row["id"]] = lost
    return report
