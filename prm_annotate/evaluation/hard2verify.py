"""Hard2Verify's metrics (arXiv 2510.13744; `calculate_error_id_metrics` and `calculate_metrics` of
utils.py in SalesforceAIResearch/Hard2Verify, the file its dataset card points to), offered as the
script computes them, for a PRM's step scores.

- **ErrorID** (the headline, ProcessBench's first-error shape): the prediction is the first step
  scored below the threshold, -1 if none. TPR is the share of responses without an error
  (`human_labels_first_error_idx` -1) predicted -1; TNR the share of erroneous responses whose
  prediction is exactly the first error. Balanced accuracy is (TPR + TNR) / 2, balanced F1
  2 TPR TNR / (TPR + TNR) (0 when both are 0). Printed as 100 x, rounded to two decimals.
- **Step level**: a step is predicted right when its score is at or above the threshold; TPR is
  the recall of right steps, TNR of wrong ones (`human_labels`); **response level**: a response is
  right when every step is (label and prediction alike).
- A response without scores is read as the script reads an empty answer: ErrorID -2 (wrong), every
  step verdict wrong (its short verdict list filled with wrong ones), and the response verdict
  taken from the one (wrong) verdict on its first step.
- The threshold, as the paper chooses it for PRMs: tuned on a random subset of 100 responses (the
  draw and the objective are not published with the script; here the subset is drawn with
  `--seed`, the cut is the one with the best ErrorID balanced F1 on it, ties to the lowest), the
  numbers reported on the other responses, and over all of them beside it. Or a given threshold.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from prm_annotate.errors import InputError, UsageError
from prm_annotate.evaluation.metrics import Threshold, first_below, lowest_best_threshold, right_steps
from prm_annotate.evaluation.labels import Prediction, load_benchmark_gold

TUNE_SAMPLE = 100
RELEASE_RESPONSES = 200  # the test split: a number is comparable with published ones only on all of it
THRESHOLD_RULE = ("Hard2Verify's for PRMs: tuned on a random subset of 100 responses (here: the best ErrorID "
                  "balanced F1 there, drawn with --seed), reported on the others")
UNPARSED = -2  # the script's verdict for an answer it could not read


def rates(tpr: float, tnr: float) -> dict[str, float]:
    """The script's four numbers, as it rounds them."""
    acc = (tpr + tnr) / 2
    f1 = 2 * (tpr * tnr) / (tpr + tnr) if (tpr + tnr) != 0 else 0
    return {"tpr": round(100 * tpr, 2), "tnr": round(100 * tnr, 2), "balanced_acc": round(100 * acc, 2),
            "balanced_f1_score": round(100 * f1, 2)}


def recall(labels: list[int], preds: list[int], positive: int) -> float:
    hits = [p == positive for lab, p in zip(labels, preds) if lab == positive]
    return sum(hits) / len(hits) if hits else 0.0  # sklearn's recall_score with zero_division's default, 0


@dataclass
class Gold:
    id: str
    first_error: int
    labels: list[int]  # per step: 1 right, 0 wrong


@dataclass
class Part:
    """The responses one set of numbers is over."""
    ids: list[str]
    error_id: dict[str, float]
    step_level: dict[str, float]
    response_level: dict[str, float]
    missing: int

    def to_dict(self) -> dict[str, Any]:
        return {"responses": len(self.ids), "error_id": self.error_id, "step_level": self.step_level,
                "response_level": self.response_level, "missing_predictions": self.missing}


@dataclass
class Report:
    threshold: Threshold
    reported: Part  # held out from tuning, or all when the threshold was given
    pred_field: str
    all_responses: Part | None = None  # with the tuning subset, when tuned
    tuning_ids: list[str] = field(default_factory=list)
    extra_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        n = len((self.all_responses or self.reported).ids)
        return {"benchmark": "hard2verify", "pred_field": self.pred_field, "threshold": self.threshold.to_dict(),
                "release": {"responses": n, "of": RELEASE_RESPONSES},
                "reported": self.reported.to_dict(),
                "all_responses": None if self.all_responses is None else self.all_responses.to_dict(),
                "tuning_ids": self.tuning_ids, "extra_predictions": len(self.extra_ids), "extra_ids": self.extra_ids}


def load_gold(paths: list[str]) -> dict[str, Gold]:
    """Hard2Verify's responses by id from its published file(s), decrypted."""
    return load_benchmark_gold(paths, "hard2verify", "Hard2Verify", gold_row)


def gold_row(path: str, where: Any, row: dict[str, Any]) -> Gold:
    first, labels, steps = row.get("label"), row.get("human_labels"), row.get("steps")
    if not isinstance(steps, list) or not steps:
        raise InputError(path, where, "Hard2Verify row has no `model_response_by_step` list "
                                      "(an encrypted field that did not decrypt?)")
    if not isinstance(labels, list) or len(labels) != len(steps) or any(lab not in (0, 1) or isinstance(lab, bool)
                                                                         for lab in labels):
        raise InputError(path, where, f"`human_labels` must be one 0/1 per step ({len(steps)}), got {labels!r}")
    if isinstance(first, bool) or not isinstance(first, int) or not -1 <= first < len(steps):
        raise InputError(path, where, f"`human_labels_first_error_idx` must be -1 or a step index, got {first!r}")
    return Gold(str(row["id"]), first, labels)


def part(gold: dict[str, Gold], preds: dict[str, Prediction], ids: list[str], threshold: float) -> Part:
    first_labels, first_preds, step_labels, step_preds, resp_labels, resp_preds = [], [], [], [], [], []
    missing = 0
    for rid in ids:
        g, p = gold[rid], preds.get(rid)
        first_labels.append(g.first_error)
        step_labels += g.labels
        resp_labels.append(0 if 0 in g.labels else 1)
        if p is None or p.scores is None:
            # The script's reading of an empty answer: one unparsed verdict, put down as wrong for the
            # first step, the rest filled with wrong ones; the response verdict from that first one.
            missing += 1
            first_preds.append(UNPARSED)
            step_preds += [1 - lab for lab in g.labels]
            resp_preds.append(0 if g.labels[0] == 1 else 1)
            continue
        first_preds.append(first_below(p.scores, threshold))
        verdicts = [int(right) for right in right_steps(p.scores, threshold)]
        step_preds += verdicts
        resp_preds.append(0 if 0 in verdicts else 1)
    correct = [p == -1 for lab, p in zip(first_labels, first_preds) if lab == -1]
    erroneous = [p == lab for lab, p in zip(first_labels, first_preds) if lab != -1]
    if not correct or not erroneous:
        raise UsageError(f"Hard2Verify's ErrorID needs responses with and without an error; these {len(ids)} have "
                         f"{len(erroneous)} erroneous and {len(correct)} correct")
    return Part(ids, rates(sum(correct) / len(correct), sum(erroneous) / len(erroneous)),
                rates(recall(step_labels, step_preds, 1), recall(step_labels, step_preds, 0)),
                rates(recall(resp_labels, resp_preds, 1), recall(resp_labels, resp_preds, 0)), missing)


def evaluate(gold: dict[str, Gold], preds: dict[str, Prediction], *, threshold: float | None = None,
             tune_sample: int = TUNE_SAMPLE, seed: int = 0, pred_field: str = "prm.scores") -> Report:
    for rid, g in gold.items():
        p = preds.get(rid)
        if p is not None and p.scores is not None and len(p.scores) != len(g.labels):
            raise UsageError(f"{rid}: {len(p.scores)} step scores for Hard2Verify's {len(g.labels)} steps "
                             "(the scored response is not the benchmark's)")
    ids = list(gold)
    extra = [rid for rid in preds if rid not in gold]
    if threshold is not None:
        return Report(Threshold(threshold), part(gold, preds, ids, threshold), pred_field, extra_ids=extra)
    if not 0 < tune_sample < len(ids):
        raise UsageError(f"--tune-sample {tune_sample}: needs fewer responses than the {len(ids)} given, and some")
    tuning = sorted(random.Random(seed).sample(ids, tune_sample), key=ids.index)
    chosen = lowest_best_threshold([(gold[i].first_error, p.scores if (p := preds.get(i)) is not None else None)
                                    for i in tuning], f"a random {tune_sample} (seed {seed})")
    held = [i for i in ids if i not in set(tuning)]
    return Report(chosen, part(gold, preds, held, chosen.value), pred_field,
                  part(gold, preds, ids, chosen.value), tuning, extra)


def table(report: Report) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(title=f"Hard2Verify metrics of {report.pred_field}")
    for col in ("responses", "task", "TPR", "TNR", "balanced acc", "balanced F1"):
        t.add_column(col, justify="left" if col in ("responses", "task") else "right")
    parts = [("held out" if report.tuning_ids else "all", report.reported)]
    if report.all_responses is not None:
        parts.append(("all (with the tuning subset)", report.all_responses))
    for name, p in parts:
        if t.rows:
            t.add_section()
        for task, numbers in (("ErrorID", p.error_id), ("step level", p.step_level),
                              ("response level", p.response_level)):
            t.add_row(f"{name} ({len(p.ids)})", task, *(f"{numbers[k]:.2f}" for k in
                                                        ("tpr", "tnr", "balanced_acc", "balanced_f1_score")))
    th = report.threshold
    how = "given" if th.tuned_on is None else (f"tuned on {th.tuned_on} (ErrorID balanced F1 there "
                                                f"{th.tuning_f1:.2f}, the best of {th.candidates} cuts)")
    lines: list[Any] = [t, Text(f"threshold {th.value:g} ({how}): a step scored below it is wrong; the first "
                                "such step is the ErrorID prediction")]
    n = len((report.all_responses or report.reported).ids)
    if n != RELEASE_RESPONSES:
        lines.append(Text(f"{n} responses, not Hard2Verify's {RELEASE_RESPONSES}: not comparable with published numbers"))
    if report.reported.missing:
        lines.append(Text(f"{report.reported.missing} response(s) have no scores (counted wrong, as the script counts "
                          "an unparsed verdict)"))
    if report.extra_ids:
        lines.append(Text(f"{len(report.extra_ids)} prediction id(s) are not Hard2Verify responses (ignored)"))
    return Group(*lines)
