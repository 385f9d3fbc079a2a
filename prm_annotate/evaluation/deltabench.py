"""DeltaBench's metric (arXiv 2502.19361; OpenStellarTeam/DeltaBench `evaluation.py` at 6b67c64,
`parse_output` and `calculate_accuracies_v2`), computed as the script computes it. The script
cannot be imported (it parses the command line and builds an API client when run, and calls the
model for every row without a critique), so it is restated here and, in the script's own order of
operations, in testing/deltabench_script.py; the tests hold each to the other.

Gold: a row's error sections and unuseful sections together (`reason_error_section_numbers` +
`reason_unuseful_section_numbers`, as a set). Predictions, per row:

- a critic's critique (`judge.outputs`' first vote, or the text at `--pred-field`), read as the
  script reads it: the conclusion is the text after the last `Conclusion:` before the first
  `Error Section Number:`, and says errors when it holds "yes" anywhere (any case); then each
  `Error Section Number:` gives the first run of digits before its `Explanation:`, or -1 when it
  has none;
- a PRM's step scores (`prm.scores`, or `--pred-field`) with `--threshold`: a section is an error
  when its score is below the threshold, and a section's score is its LOWEST step's (a PRM's
  steps may be finer than the sections: `step_sections` in the record gives each step's 1-based
  section; without it the steps are the sections, as the `deltabench` input format makes them).
  The script has no PRM path; the paper thresholds PRM section scores, and its threshold is not
  published with the script: it is given, never tuned here.

Then, as the script does: predicted sections past the last gold section are dropped (the
annotators stopped labelling there); TP = predicted ∩ gold, FP = predicted − gold, FN =
gold − predicted, over sets; precision, recall and F1 per row, each 0 when its denominator is 0.
Averages: macro (the mean of the rows' precision, recall and F1) and micro (from the pooled
TP/FP/FN), overall and per `task_l1`.

Quirks kept, each named in the report:
- **an error-free row** (no gold section) is left out of every average: the script takes the max
  of an empty list, the row is written without metrics, and pandas' mean skips it;
- a row with an empty critique is left out too (the script writes it without metrics), as is a row
  with no prediction at all (the script would ask the model: here it is counted as missing);
- `Conclusion: no ...` with sections listed reads as no error; a listed section without digits is
  section -1, kept (it is not past the last gold section) and a false positive;
- the conclusion test is a substring: "yes" in any word of it ("eyes") says errors.

Which average the README's table reports: the macro one (its F1 is below the harmonic mean of its
recall and precision, which the micro F1 never is: GPT-4-turbo-128k, recall 57.19, precision 37.35,
F1 40.76), so `macro` is the headline here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from prm_annotate.errors import InputError, UsageError
from prm_annotate.evaluation.labels import MISSING, get_path, load_benchmark_gold, records_by_id

THRESHOLD_RULE = ("a section is an error when its score, its lowest step's, is below --threshold (given: the script "
                  "has no PRM path and the paper's threshold is not published with it)")
CRITIC_FIELD = "judge.outputs"
SCORES_FIELD = "prm.scores"
QUIRKS = {
    "error_free_rows": "rows with no gold section: left out of every average (the script's max() of an empty list)",
    "empty_critiques": "rows whose critique is empty: left out (the script writes them without metrics)",
}


@dataclass
class Gold:
    """A DeltaBench row: its gold sections (errors and unuseful ones, 1-based), section count, domain."""
    id: str
    sections: set[int]
    n_sections: int
    task: str


@dataclass(frozen=True)
class Row:
    """One row's counts and rates as `parse_output` returns them."""
    predicted: tuple[int, ...]
    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp > 0 else 0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn > 0 else 0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0


def critic_sections(critic: str) -> list[int]:
    """The sections a critique names, as `parse_output` reads them (none when it says no error)."""
    result = critic.split("Error Section Number:")[0].split("Conclusion:")[-1].strip()
    if "yes" not in result.lower():
        return []
    out = []
    for chunk in critic.split("Error Section Number:")[1:]:
        digits = re.search(r"\d+", chunk.split("Explanation:")[0].strip())
        out.append(int(digits.group()) if digits else -1)
    return out


def section_scores(scores: list[float], step_sections: list[int] | None, n_sections: int) -> list[float]:
    """Each section's score: its lowest step's."""
    if step_sections is None:
        if len(scores) != n_sections:
            raise ValueError(f"{len(scores)} step scores for {n_sections} sections, and no step_sections to map them")
        return list(scores)
    if len(step_sections) != len(scores) or sorted(set(step_sections)) != list(range(1, n_sections + 1)):
        raise ValueError(f"step_sections must give each of the {len(scores)} steps a section of 1..{n_sections}, "
                         "every section at least one step")
    lowest: dict[int, float] = {}
    for score, section in zip(scores, step_sections):
        lowest[section] = min(score, lowest.get(section, score))
    return [lowest[k] for k in range(1, n_sections + 1)]


def prm_sections(scores: list[float], step_sections: list[int] | None, n_sections: int, threshold: float) -> list[int]:
    return [k for k, s in enumerate(section_scores(scores, step_sections, n_sections), 1) if s < threshold]


def score_row(predicted: list[int], gold: set[int]) -> Row:
    """`parse_output`'s counts: predictions past the last gold section dropped, then sets."""
    kept = [x for x in predicted if x <= max(gold)]
    return Row(tuple(kept), len(set(kept) & gold), len(set(kept) - gold), len(gold - set(kept)))


@dataclass
class Averages:
    rows: int
    precision_macro: float | None
    recall_macro: float | None
    f1_macro: float | None
    precision_micro: float
    recall_micro: float
    f1_micro: float

    @classmethod
    def of(cls, rows: list[Row]) -> "Averages":
        def mean(xs: list[float]) -> float | None:
            return sum(xs) / len(xs) if xs else None

        tp, fp, fn = (sum(getattr(r, k) for r in rows) for k in ("tp", "fp", "fn"))
        p = tp / (tp + fp) if tp + fp > 0 else 0
        r = tp / (tp + fn) if tp + fn > 0 else 0
        return cls(len(rows), mean([x.precision for x in rows]), mean([x.recall for x in rows]),
                   mean([x.f1 for x in rows]), p, r, 2 * p * r / (p + r) if p + r > 0 else 0)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Report:
    rows: dict[str, Row]
    tasks: dict[str, str]
    pred_field: str
    threshold: float | None
    error_free_ids: list[str] = field(default_factory=list)
    empty_ids: list[str] = field(default_factory=list)
    missing_ids: list[str] = field(default_factory=list)
    extra_ids: list[str] = field(default_factory=list)

    def overall(self) -> Averages:
        return Averages.of(list(self.rows.values()))

    def by_task(self) -> dict[str, Averages]:
        names = sorted(set(self.tasks[rid] for rid in self.rows))
        return {t: Averages.of([r for rid, r in self.rows.items() if self.tasks[rid] == t]) for t in names}

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": "deltabench",
            "pred_field": self.pred_field,
            "threshold": None if self.threshold is None else {"value": self.threshold, "rule": THRESHOLD_RULE},
            "headline": "macro (the README's table: the mean of the rows' precision, recall and F1)",
            "overall": self.overall().to_dict(),
            "tasks": {t: a.to_dict() for t, a in self.by_task().items()},
            "rows": {rid: {"predicted": list(r.predicted), "tp": r.tp, "fp": r.fp, "fn": r.fn,
                           "precision": r.precision, "recall": r.recall, "f1": r.f1} for rid, r in self.rows.items()},
            "left_out": {"error_free_rows": self.error_free_ids, "empty_critiques": self.empty_ids,
                         "missing_predictions": self.missing_ids},
            "quirks": QUIRKS,
            "extra_predictions": self.extra_ids,
        }


def load_gold(paths: list[str]) -> dict[str, Gold]:
    return load_benchmark_gold(paths, "deltabench", "DeltaBench", gold_row)


def gold_row(path: str, where: Any, row: dict[str, Any]) -> Gold:
    numbers = []
    for name in ("reason_error_section_numbers", "reason_unuseful_section_numbers"):
        value = row.get(name)
        if not isinstance(value, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in value):
            raise InputError(path, where, f"`{name}` must be a list of 1-based section numbers, got {value!r}")
        numbers += value
    if not isinstance(row.get("question"), str):
        raise InputError(path, where, "DeltaBench row has no `question`")
    steps = row.get("steps")
    if steps is None:
        raise InputError(path, where, "`sections_content` is not `section1:` ... `sectionN:` blocks numbered in order")
    if any(k > len(steps) for k in numbers):
        raise InputError(path, where, f"section {max(numbers)} is labelled, and the trace has {len(steps)} sections")
    task = row.get("task_l1")
    return Gold(str(row["id"]), set(numbers), len(steps), task if isinstance(task, str) and task else "-")


def load_predictions(paths: list[str], pred_field: str | None, threshold: float | None,
                     gold: dict[str, Gold]) -> tuple[str, dict[str, list[int] | None]]:
    """Each prediction record's predicted sections (None: an empty critique), and the field read."""
    scores = threshold is not None
    name = pred_field or (SCORES_FIELD if scores else CRITIC_FIELD)
    out: dict[str, list[int] | None] = {}
    seen: dict[str, tuple[str, str]] = {}
    present = False
    for path in paths:
        for where, rid, obj in records_by_id(path, seen):
            value = get_path(obj, name)
            if value is MISSING or value is None:
                continue
            present = True
            if scores:
                if not isinstance(value, list) or not value or any(
                        isinstance(x, bool) or not isinstance(x, (int, float)) for x in value):
                    raise InputError(path, where, f"{name} must be a list of step scores, got {str(value)[:60]}")
                g = gold.get(rid)
                if g is not None:
                    mapping = obj.get("step_sections")
                    try:
                        out[rid] = prm_sections(value, mapping, g.n_sections, threshold)
                    except ValueError as exc:
                        raise InputError(path, where, str(exc)) from None
                continue
            if isinstance(value, list):  # judge.outputs: the first vote, as the script has one critique
                value = value[0] if value else ""
            if not isinstance(value, str):
                raise InputError(path, where, f"{name} must be a critique's text, got {type(value).__name__}")
            out[rid] = critic_sections(value) if value != "" else None
    if not present:
        raise UsageError(f"no record of {', '.join(paths)} has {name}" + (
            "" if scores else " (a critic's critiques: judge with --prompt deltabench; a PRM's scores: give --threshold)"))
    return name, out


def evaluate(gold: dict[str, Gold], preds: dict[str, list[int] | None], *, pred_field: str = CRITIC_FIELD,
             threshold: float | None = None) -> Report:
    report = Report({}, {rid: g.task for rid, g in gold.items()}, pred_field, threshold)
    for rid, g in gold.items():
        if rid not in preds:
            report.missing_ids.append(rid)
        elif not g.sections:
            report.error_free_ids.append(rid)
        elif preds[rid] is None:
            report.empty_ids.append(rid)
        else:
            report.rows[rid] = score_row(preds[rid], g.sections)
    report.extra_ids = [rid for rid in preds if rid not in gold]
    return report


def table(report: Report) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from prm_annotate.evaluation.labels import id_notes

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x * 100:.2f}"

    t = Table(title=f"DeltaBench section detection of {report.pred_field}")
    for col in ("task", "rows", "recall", "precision", "F1", "micro recall", "micro precision", "micro F1"):
        t.add_column(col, justify="left" if col == "task" else "right")
    for name, a in [("Overall", report.overall()), *report.by_task().items()]:
        t.add_row(name, str(a.rows), pct(a.recall_macro), pct(a.precision_macro), pct(a.f1_macro),
                  pct(a.recall_micro), pct(a.precision_micro), pct(a.f1_micro))
    lines: list[Any] = [t, Text("recall, precision, F1: the mean over rows (macro), as DeltaBench's README reports; "
                                "micro: from the pooled counts")]
    if report.threshold is not None:
        lines.append(Text(f"threshold {report.threshold:g}: {THRESHOLD_RULE}"))
    lines += id_notes(report.error_free_ids, "error-free row(s) left out, as DeltaBench's script leaves them out",
                      report.empty_ids, "row(s) with an empty critique left out, as the script leaves them out")
    lines += id_notes(report.missing_ids, "row(s) have no prediction (left out)",
                      report.extra_ids, "prediction id(s) are not DeltaBench rows (ignored)")
    return Group(*lines)
