"""Labels a trainer would lose to its maximum sequence length."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from prm_annotate.export.formats import ExportOptions


@dataclass
class Truncation:
    max_length: int
    rows: int = 0  # rows that lose at least one label
    labels_lost: int = 0
    labels_total: int = 0
    rows_seen: int = 0  # rows checked (those left out included)


def drop_or_count(rows: Iterable[dict[str, Any]], report: Truncation, opts: ExportOptions, tokenizer: Any,
                  max_completion_length: int | None = None, drop: bool = False) -> Iterator[dict[str, Any]]:
    """The rows, each counted in `report` for the labels a trainer would lose: those whose token
    lies at or past `report.max_length` (and, for a trainer that cuts completions first (TRL),
    past `max_completion_length` tokens of completion); with `drop`, a row that loses any is left out."""
    for row in rows:
        positions = opts.export_format.label_positions(row, opts, tokenizer, max_completion_length)
        lost = sum(p is None or p >= report.max_length for p in positions)
        report.labels_total += len(positions)
        report.rows_seen += 1
        if lost:
            report.rows += 1
            report.labels_lost += lost
            if drop:
                continue
        yield row
