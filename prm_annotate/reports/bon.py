"""Best-of-N over PRM-scored responses, against majority vote and pass@N.

Input: responses with `prm.scores` (one score in [0, 1] per step, from `score` or any other tool:
`prm.first_error`, `threshold` and `model` are not read, so they may be absent) and the gold
`answer`, grouped by problem (`problem_id`, else the problem text). For each N in 1, 2, 4, ... up to the fewest
responses any problem has (that number itself last, when it is not a power of two):

- `prm-<agg>`: the response with the highest aggregate of its step scores wins, for `agg` in
  `BON_AGGREGATES` (min, last, prod, mean: reports/aggregates.py);
- `majority`: the most frequent final answer wins, answers grouped by the grader's equivalence;
- `pass@N`: a problem counts when any of its N responses is right (the ceiling of any selector).

Which N responses: the FIRST N of each problem in the order of the input file (a fixed, documented
choice: no sampling noise, and a file whose responses came out of `sample` in index order gives
the first N samples). Ties go to the earliest response (for majority: to the answer whose first
response comes earliest). Correctness is the grader's verdict on the response's own text against
the gold answer; an undecided verdict counts as wrong and is reported.

The paper's two diagnostics (arXiv 2501.07301, section 3.2):
- `min_on_final_step`: among responses of 2 or more steps, the share whose lowest step score sits
  on the last step (the first lowest, when several are equal): a PRM behaving like an outcome
  reward model puts it there;
- `right_answer_wrong_step`: for each aggregation at the largest N, the share of picked responses
  with a right final answer that the truth (a gold file of first errors, as `evaluate` reads) says
  holds a wrong step. Only picked responses with a known truth count.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import ValidationError

from prm_annotate.errors import InputError
from prm_annotate.grading.grader import Grader
from prm_annotate.reports.aggregates import AGGREGATES, BON_AGGREGATES
from prm_annotate.evaluation.labels import Gold, get_path, read_raw, step_scores_value
from prm_annotate.records import Response, describe_validation_error
from prm_annotate.steps import join_record



@dataclass
class Candidate:
    id: str
    scores: list[float]
    correct: bool
    answer_class: int | None  # index of its final answer's equivalence class; None: no answer


@dataclass
class Problem:
    key: str
    candidates: list[Candidate] = field(default_factory=list)


def read_scored(path: str) -> tuple[list[Problem], int]:
    """Scored responses grouped by problem (first appearance order), and how many the grader
    could not decide. Bad records are input errors naming file and line."""
    groups: dict[str, list[tuple[Response, list[float]]]] = defaultdict(list)
    seen: dict[str, str] = {}
    for where, obj in read_raw(path):
        try:
            rec = Response.model_validate(obj)
        except ValidationError as exc:
            raise InputError(path, where, describe_validation_error(exc)) from None
        scores = step_scores_value(get_path(obj, "prm.scores"), path, where, "prm.scores", len(rec.steps))
        if scores is None:
            raise InputError(path, where, "record has no `prm.scores` (one score per step)")
        if rec.answer is None:
            raise InputError(path, where, "record has no gold `answer` to grade against")
        if rec.id in seen:
            raise InputError(path, where, f"duplicate id {rec.id!r} (first seen at {seen[rec.id]})")
        seen[rec.id] = where
        groups[rec.problem_id or rec.problem].append((rec, scores))
    if not groups:
        raise InputError(path, "line 0", "no scored responses")
    undecided = 0
    problems = []
    with Grader() as grader:
        for key, members in groups.items():
            verdicts = grader.grade_many((r.answer, join_record(r)) for r, _ in members)
            undecided += sum(v.correct is None for v in verdicts)
            classes = answer_classes([v.final_answer for v in verdicts], grader)
            problems.append(Problem(key, [Candidate(r.id, scores, v.correct is True, c)
                                          for (r, scores), v, c in zip(members, verdicts, classes)]))
    return problems, undecided


def answer_classes(answers: list[str | None], grader: Grader) -> list[int | None]:
    """Equivalence classes of final answers: an answer joins the first class whose first answer
    the grader finds equal to it (the class's first answer acts as the gold), else opens one."""
    reps: list[str] = []
    out: list[int | None] = []
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        verdicts = grader.grade_many((rep, f"\\boxed{{{answer}}}") for rep in reps)
        match = next((i for i, v in enumerate(verdicts) if v.correct is True), None)
        if match is None:
            reps.append(answer)
            match = len(reps) - 1
        out.append(match)
    return out


def n_values(problems: list[Problem]) -> list[int]:
    most = min(len(p.candidates) for p in problems)
    ns = [1]
    while ns[-1] * 2 <= most:
        ns.append(ns[-1] * 2)
    if ns[-1] != most:
        ns.append(most)
    return ns


def prm_pick(candidates: list[Candidate], agg: str) -> Candidate:
    f = AGGREGATES.named(agg)
    best = candidates[0]
    for c in candidates[1:]:
        if f(c.scores) > f(best.scores):  # strict: ties keep the earliest
            best = c
    return best


def majority_pick(candidates: list[Candidate]) -> Candidate | None:
    """The first response of the most frequent answer class (ties: the class seen first); None
    when no response has an answer."""
    counts = Counter(c.answer_class for c in candidates if c.answer_class is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(c for c in candidates if c.answer_class is not None and counts[c.answer_class] == top)


def min_on_final_step(problems: Iterable[Problem]) -> dict[str, Any]:
    eligible = [c for p in problems for c in p.candidates if len(c.scores) >= 2]
    hits = sum(c.scores.index(min(c.scores)) == len(c.scores) - 1 for c in eligible)
    return {"share": _pct(hits, len(eligible)), "responses": len(eligible), "on_final_step": hits}


def _pct(hits: int, total: int) -> float | None:
    return 100.0 * hits / total if total else None


def best_of_n(problems: list[Problem], gold: dict[str, Gold] | None = None,
              aggregations: Iterable[str] = BON_AGGREGATES) -> dict[str, Any]:
    """Accuracy (% of problems) of each selector at each N (keys are N as text, for JSON), and the
    two diagnostics."""
    aggregations = [AGGREGATES.canonical(a) for a in aggregations]
    ns = n_values(problems)
    methods = [f"prm-{a}" for a in aggregations] + ["majority", "pass@N"]
    accuracy: dict[str, dict[str, float]] = {m: {} for m in methods}
    picks_at_max: dict[str, list[Candidate]] = {a: [] for a in aggregations}
    for n in ns:
        hits: Counter = Counter()
        for p in problems:
            first = p.candidates[:n]
            for a in aggregations:
                pick = prm_pick(first, a)
                hits[f"prm-{a}"] += pick.correct
                if n == ns[-1]:
                    picks_at_max[a].append(pick)
            vote = majority_pick(first)
            hits["majority"] += vote is not None and vote.correct
            hits["pass@N"] += any(c.correct for c in first)
        for m in methods:
            accuracy[m][str(n)] = 100.0 * hits[m] / len(problems)
    result: dict[str, Any] = {
        "problems": len(problems),
        "responses": sum(len(p.candidates) for p in problems),
        "n": ns,
        "accuracy": accuracy,
        "min_on_final_step": min_on_final_step(problems),
    }
    if gold is not None:
        flawed: dict[str, Any] = {}
        for a, picks in picks_at_max.items():
            right = [c for c in picks if c.correct and c.id in gold]
            bad = sum(gold[c.id].label != -1 for c in right)
            flawed[f"prm-{a}"] = {"share": _pct(bad, len(right)), "right_picks_with_truth": len(right),
                                  "with_wrong_step": bad}
        result["right_answer_wrong_step"] = {"n": ns[-1], **flawed}
    return result


def bon_table(result: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from prm_annotate.reports.tables import pct

    table = Table(title=f"Best-of-N accuracy (% of {result['problems']} problems, "
                        f"{result['responses']} responses; the first N responses of each problem)")
    table.add_column("selector")
    for n in result["n"]:
        table.add_column(f"N={n}", justify="right")
    for method, by_n in result["accuracy"].items():
        table.add_row(method, *(pct(by_n[str(n)]) for n in result["n"]))
    m = result["min_on_final_step"]
    lines: list[Any] = [table, Text(f"min step score on the final step: {pct(m['share'])}% of "
                                    f"{m['responses']} responses with 2+ steps")]
    flawed = result.get("right_answer_wrong_step")
    if flawed:
        parts = [f"{k} {pct(v['share'])}% of {v['right_picks_with_truth']}"
                 for k, v in flawed.items() if k != "n"]
        lines.append(Text(f"picked at N={flawed['n']} with a right answer but a wrong step: " + ", ".join(parts)))
    if result.get("undecided"):
        lines.append(Text(f"{result['undecided']} response(s) the grader could not decide (counted wrong)"))
    return Group(*lines)
