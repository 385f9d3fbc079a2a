"""PRMBench's metric (arXiv 2501.03124; ssmisya/PRMBench `mr_eval/tasks/prmtest_classified/task.py`,
`evaluate_function`, and `get_prmscore_from_current_res_dict` of its table notebook), offered as
the script computes it.

Each step gets a validity label from its score: valid when the score is above the threshold
(PRMBench's `validity_threshold`, 0.5 for every PRM it runs: `score > 0.5`, so a score of exactly
0.5 is invalid). Against the 1-indexed `error_steps`, "valid" is the positive class: a valid label
on a step not in `error_steps` is a true positive, on an error step a false positive; an invalid
label on an error step a true negative, on any other step a false negative. Only steps that have a
label count (the script loops over the labels). Counts add up per category and over all nine.

- F1 is over the positive class, negative F1 over the negative one, with the script's conventions
  kept: a precision or recall whose denominator is 0 is -1 (and enters the F1 as -1), an F1 whose
  precision + recall is 0 is -1.
- PRMScore = 0.5 F1 + 0.5 negative F1, per category and over all categories pooled, except
  `multi_solutions` (no error steps), whose PRMScore is its F1 alone. The three groups' scores
  (simplicity, soundness, sensitivity) are the plain means of their categories' PRMScores.
  The paper's tables print 100 x each, with one decimal.
- A response without scores is left out, as the script leaves out a missing or invalid result.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from prm_annotate.errors import InputError, UsageError
from prm_annotate.evaluation.labels import Prediction, load_benchmark_gold
from prm_annotate.evaluation.metrics import valid_steps

VALIDITY_THRESHOLD = 0.5
RELEASE_RESPONSES = 6216  # rows of prmbench_preview.jsonl: a number is comparable with published ones only on all
THRESHOLD_RULE = "PRMBench's fixed validity threshold: a step is valid when its score is above 0.5"
# PRMBench's groups, its categories (as `classification` spells them) in the paper's column order.
GROUPS: dict[str, tuple[str, ...]] = {
    "simplicity": ("redundency", "circular"),
    "soundness": ("counterfactual", "step_contradiction", "domain_inconsistency", "confidence"),
    "sensitivity": ("missing_condition", "deception", "multi_solutions"),
}
SHORT = {"redundency": "NR.", "circular": "NCL.", "counterfactual": "ES.", "step_contradiction": "SC.",
         "domain_inconsistency": "DC.", "confidence": "CI.", "missing_condition": "PS.", "deception": "DR.",
         "multi_solutions": "MS."}
F1_ONLY = ("multi_solutions",)


def _ratio(num: int, den: int) -> float:
    return num / den if den != 0 else -1


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if (precision + recall) != 0 else -1


@dataclass(frozen=True)
class Confusion:
    """Step counts with "valid" as the positive class; a value: counts add up with `+`."""
    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    def __add__(self, other: "Confusion") -> "Confusion":
        return Confusion(self.tp + other.tp, self.fp + other.fp, self.tn + other.tn, self.fn + other.fn)

    @property
    def f1(self) -> float:
        return _f1(_ratio(self.tp, self.tp + self.fp), _ratio(self.tp, self.tp + self.fn))

    @property
    def negative_f1(self) -> float:
        return _f1(_ratio(self.tn, self.tn + self.fn), _ratio(self.tn, self.tn + self.fp))

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn, "f1": self.f1,
                "negative_f1": self.negative_f1}


def step_confusion(error_steps: Iterable[int], valid: list[bool]) -> Confusion:
    """One response: its 1-indexed error steps against one validity label per scored step."""
    wrong = {s - 1 for s in error_steps}
    on_error = [ok for i, ok in enumerate(valid) if i in wrong]
    elsewhere = [ok for i, ok in enumerate(valid) if i not in wrong]
    return Confusion(tp=sum(elsewhere), fp=sum(on_error), tn=on_error.count(False), fn=elsewhere.count(False))


@dataclass
class Gold:
    """A PRMBench response: its category, 1-indexed error steps and step count."""
    id: str
    classification: str
    error_steps: list[int]
    n_steps: int


@dataclass
class Report:
    categories: dict[str, Confusion]
    responses: dict[str, int]
    threshold: float
    pred_field: str
    missing_ids: list[str] = field(default_factory=list)
    extra_ids: list[str] = field(default_factory=list)

    @property
    def total(self) -> Confusion:
        return sum(self.categories.values(), Confusion())

    def prmscore(self, category: str | None = None) -> float:
        c = self.total if category is None else self.categories[category]
        if category in F1_ONLY:
            return c.f1
        return 0.5 * c.f1 + 0.5 * c.negative_f1

    def group_scores(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for group, members in GROUPS.items():
            present = [m for m in members if m in self.categories]
            out[group] = sum(self.prmscore(m) for m in present) / len(present) if len(present) == len(members) else None
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": "prmbench",
            "pred_field": self.pred_field,
            "threshold": {"value": self.threshold, "rule": "valid when score > threshold",
                          "chosen": "PRMBench's fixed 0.5" if self.threshold == VALIDITY_THRESHOLD else "given"},
            "prmscore": self.prmscore(),
            "categories": {name: {"responses": self.responses[name], "prmscore": self.prmscore(name), **c.to_dict()}
                           for name, c in self.categories.items()},
            "groups": self.group_scores(),
            "release": {"responses": len(self.missing_ids) + sum(self.responses.values()), "of": RELEASE_RESPONSES},
            "total": self.total.to_dict(),
            "missing_predictions": len(self.missing_ids),
            "extra_predictions": len(self.extra_ids),
            "missing_ids": self.missing_ids,
            "extra_ids": self.extra_ids,
        }


def load_gold(paths: list[str]) -> dict[str, Gold]:
    """PRMBench's responses by id from its published JSONL file(s)."""
    return load_benchmark_gold(paths, "prmbench", "PRMBench", gold_row)


def gold_row(path: str, where: Any, row: dict[str, Any]) -> Gold:
    steps, errors, category = row.get("steps"), row.get("error_steps"), row.get("classification")
    if not isinstance(category, str) or not category:
        raise InputError(path, where, "PRMBench row has no `classification`")
    if not isinstance(steps, list) or not steps:
        raise InputError(path, where, "PRMBench row has no `modified_process` list")
    if not isinstance(errors, list) or any(isinstance(e, bool) or not isinstance(e, int) or e < 1 for e in errors):
        raise InputError(path, where, f"`error_steps` must be a list of 1-indexed step numbers, got {errors!r}")
    return Gold(row["id"], category, errors, len(steps))


def evaluate(gold: dict[str, Gold], preds: dict[str, Prediction], *, threshold: float = VALIDITY_THRESHOLD,
             pred_field: str = "prm.scores") -> Report:
    """PRMBench's step confusion per category from step scores cut at `threshold` (valid: above it)."""
    # Every category of the gold is reported, scored or not, as the script reports each one it loaded.
    categories: dict[str, Confusion] = {g.classification: Confusion() for g in gold.values()}
    responses: dict[str, int] = dict.fromkeys(categories, 0)
    missing: list[str] = []
    for rid, g in gold.items():
        p = preds.get(rid)
        if p is None or p.scores is None:
            missing.append(rid)
            continue
        if len(p.scores) != g.n_steps:
            raise UsageError(f"{rid}: {len(p.scores)} step scores for PRMBench's {g.n_steps} steps "
                             "(the scored response is not the benchmark's)")
        categories[g.classification] += step_confusion(g.error_steps, valid_steps(p.scores, threshold))
        responses[g.classification] += 1
    order = [c for members in GROUPS.values() for c in members]
    ranked = sorted(categories, key=lambda c: (order.index(c) if c in order else len(order), c))
    return Report({c: categories[c] for c in ranked}, {c: responses[c] for c in ranked}, threshold, pred_field,
                  missing, [rid for rid in preds if rid not in gold])


def table(report: Report) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from prm_annotate.evaluation.labels import id_notes

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x * 100:.1f}"

    t = Table(title=f"PRMBench PRMScore of {report.pred_field}")
    for col in ("category", "", "responses", "PRMScore", "F1", "negative F1", "TP", "FP", "TN", "FN"):
        t.add_column(col, justify="left" if col in ("category", "") else "right")
    for name, c in report.categories.items():
        t.add_row(name, SHORT.get(name, ""), str(report.responses[name]), pct(report.prmscore(name)), pct(c.f1),
                  pct(c.negative_f1), str(c.tp), str(c.fp), str(c.tn), str(c.fn))
    t.add_section()
    total = report.total
    t.add_row("overall", "", str(sum(report.responses.values())), pct(report.prmscore()), pct(total.f1),
              pct(total.negative_f1), str(total.tp), str(total.fp), str(total.tn), str(total.fn))
    groups = "; ".join(f"{g} {pct(v)}" for g, v in report.group_scores().items())
    lines: list[Any] = [t, Text(f"groups (mean of their categories' PRMScore): {groups}"),
                        Text(f"threshold {report.threshold:g}: a step is valid when its score is above it"
                             + (" (PRMBench's)" if report.threshold == VALIDITY_THRESHOLD else " (given)"))]
    gold_n = len(report.missing_ids) + sum(report.responses.values())
    if gold_n != RELEASE_RESPONSES:
        lines.append(Text(f"{gold_n} responses, not PRMBench's {RELEASE_RESPONSES:,}: not comparable with published "
                          "numbers"))
    lines += id_notes(report.missing_ids, "response(s) have no scores (left out, as PRMBench's script leaves out a "
                                          "missing result)",
                      report.extra_ids, "prediction id(s) are not PRMBench responses (ignored)")
    return Group(*lines)
