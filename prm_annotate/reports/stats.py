"""What is in a file of any record type of the pipeline: counts, step counts, first errors, MC
scores, judge parse failures, tokens. Sections appear only for the fields the records have."""
from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from prm_annotate.reports.labels import MISSING, get_path, read_rows

FIRST_ERROR_FIELDS = ("label", "first_error", "mc.first_error", "judge.first_error")
STEP_BINS = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 7), (8, 10), (11, 15), (16, 20), (21, 30), (31, None))
SCORE_BINS = ((0.0, 0.0, "0"), (0.0, 0.25, "(0, .25]"), (0.25, 0.5, "(.25, .5]"), (0.5, 0.75, "(.5, .75]"),
              (0.75, 1.0, "(.75, 1)"), (1.0, 1.0, "1"))  # (low, high, name); low < s <= high, ends exact


def kind_of(obj: dict[str, Any]) -> str:
    has_mc, has_judge = isinstance(obj.get("mc"), dict), isinstance(obj.get("judge"), dict)
    if "labels" in obj and "first_error" in obj:
        return "consensus"
    if has_mc and has_judge:
        return "merged"
    if has_mc:
        return "rollout"
    if has_judge:
        return "judged"
    if "label" in obj and "steps" in obj:
        return "processbench"
    if "steps" in obj or "response" in obj:
        return "response"
    if "problem" in obj or "question" in obj:
        return "problem"
    return "unknown"


def _summary(values: list[int]) -> dict[str, Any]:
    if not values:
        return {}
    return {"min": min(values), "mean": statistics.fmean(values), "median": statistics.median(values),
            "max": max(values), "total": sum(values)}


def _step_bin(n: int) -> str:
    for lo, hi in STEP_BINS:
        if n >= lo and (hi is None or n <= hi):
            return str(lo) if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
    return "0"


def _first_error_bin(value: Any) -> Any:
    """-1..9, "10+", "null", or "not an integer" ("2" is not 2, true is not 1: readers refuse them)."""
    if value is None:
        return "null"
    if isinstance(value, bool) or not isinstance(value, int):
        return "not an integer"
    return value if value < 10 else "10+"


def _score_bin(s: float) -> str:
    if s <= 0.0:
        return "0"
    if s >= 1.0:
        return "1"
    for _, hi, name in SCORE_BINS[1:-1]:
        if s <= hi:
            return name
    return SCORE_BINS[-2][2]


def _histogram(counter: Counter, order: list[Any]) -> dict[str, int]:
    return {str(k): counter[k] for k in order if counter[k]}


def file_stats(path: str) -> dict[str, Any]:
    kinds: Counter = Counter()
    ids: Counter = Counter()
    n_steps: list[int] = []
    first_errors: dict[str, Counter] = {f: Counter() for f in FIRST_ERROR_FIELDS}
    scores: list[float] = []
    null_scores = 0
    mc_tokens: list[int] = []
    mc_completions: list[int] = []
    mc_meta: Counter = Counter()
    judge_failures: list[int] = []
    judge_unparsed = 0
    judge_votes: list[int] = []
    judge_meta: Counter = Counter()
    labels: Counter = Counter()
    answers: Counter = Counter()
    gen_tokens: Counter = Counter()
    records = bad_ids = 0
    for _, obj in read_rows(path):
        records += 1
        kinds[kind_of(obj)] += 1
        rid = obj.get("id")
        if isinstance(rid, str) or rid is None:
            ids[rid] += 1
        else:
            bad_ids += 1  # a number or an object: no reader takes it, so it is not counted as an id
        if isinstance(obj.get("steps"), list):
            n_steps.append(len(obj["steps"]))
        for f in FIRST_ERROR_FIELDS:
            value = get_path(obj, f)
            # a top-level `label` is only a first error when it is one (math-shepherd's is text)
            if value is not MISSING and (f != "label" or value is None or type(value) is int):
                first_errors[f][_first_error_bin(value)] += 1
        mc = obj.get("mc")
        if isinstance(mc, dict):
            for s in mc.get("scores") or []:
                if s is None:
                    null_scores += 1
                elif isinstance(s, (int, float)):
                    scores.append(float(s))
            for name, bucket in (("generated_tokens", mc_tokens), ("completions", mc_completions)):
                if isinstance(mc.get(name), int):
                    bucket.append(mc[name])
            for name in ("k", "label", "strategy", "model"):
                if name in mc:
                    mc_meta[f"{name}={mc[name]}"] += 1
        judge = obj.get("judge")
        if isinstance(judge, dict):
            if isinstance(judge.get("parse_failures"), int):
                judge_failures.append(judge["parse_failures"])
            judge_unparsed += judge.get("first_error", MISSING) is None
            if isinstance(judge.get("votes"), list):
                judge_votes.append(len(judge["votes"]))
            for name in ("model", "prompt"):
                if name in judge:
                    judge_meta[f"{name}={judge[name]}"] += 1
        if isinstance(obj.get("labels"), list):
            for value in obj["labels"]:
                labels["right" if value is True else "wrong" if value is False else "other"] += 1
        if "correct" in obj:
            answers[{True: "correct", False: "incorrect", None: "ungraded"}.get(obj["correct"], "other")] += 1
        if isinstance(obj.get("final_answer_correct"), bool):  # ProcessBench's human verdict
            answers["final_answer_correct" if obj["final_answer_correct"] else "final_answer_incorrect"] += 1
        if "final_answer" in obj and obj["final_answer"] is None:
            answers["no final answer"] += 1
        for owner in ("generator", "mc", "judge"):  # token counts wherever a stage records them
            part = obj.get(owner)
            if isinstance(part, dict):
                for key, value in part.items():
                    # Counts only: max_tokens is a setting, not tokens spent.
                    if (key.endswith("tokens") and not key.startswith("max_") and isinstance(value, int)
                            and not isinstance(value, bool)):
                        gen_tokens[f"{owner}.{key}"] += value

    out: dict[str, Any] = {
        "path": path,
        "records": records,
        "kind": kinds.most_common(1)[0][0] if len(kinds) == 1 else "mixed",
        "kinds": dict(kinds) if len(kinds) > 1 else {},
        "ids": {"unique": sum(1 for k in ids if k is not None), "duplicated": sum(1 for k, c in ids.items() if c > 1),
                "missing": ids.get(None, 0), **({"not a string": bad_ids} if bad_ids else {})},
    }
    if n_steps:
        step_hist = Counter(_step_bin(n) for n in n_steps)
        out["steps"] = _summary(n_steps)
        out["steps_histogram"] = {name: step_hist[name] for name in
                                  [_step_bin(lo) for lo, _ in STEP_BINS] if step_hist[name]}
    order: list[Any] = list(range(-1, 10)) + ["10+", "null", "not an integer"]
    out["first_error"] = {f: _histogram(c, order) for f, c in first_errors.items() if c}
    if scores or null_scores:
        bins = Counter(_score_bin(s) for s in scores)
        out["mc_scores"] = {"steps scored": len(scores), "not probed (null)": null_scores,
                            "mean": statistics.fmean(scores) if scores else None,
                            **{name: bins[name] for _, _, name in SCORE_BINS}}
    if mc_tokens or mc_completions or mc_meta:
        out["mc"] = {"completions": sum(mc_completions), "generated_tokens": sum(mc_tokens),
                     "tokens per record": statistics.fmean(mc_tokens) if mc_tokens else None, **dict(mc_meta)}
    if judge_failures or judge_votes or judge_meta:
        out["judge"] = {"parse_failures": sum(judge_failures),
                        "records with a parse failure": sum(1 for f in judge_failures if f),
                        "no parsed vote (first_error null)": judge_unparsed,
                        "votes per record": statistics.fmean(judge_votes) if judge_votes else None,
                        **dict(judge_meta)}
    if labels:
        out["step_labels"] = dict(labels)
    if answers:
        out["answers"] = dict(answers)
    if gen_tokens:
        out["tokens"] = dict(gen_tokens)
    return out
