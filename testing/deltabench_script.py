"""DeltaBench's evaluation (OpenStellarTeam/DeltaBench `evaluation.py` at 6b67c64; the repository has
no licence, so this is a restatement in this project's own words, not a copy) for the tests that
hold `evaluate --benchmark deltabench` to it: `process_line` (gold sections, the call to
`parse_output`, a row whose parse raises written without metrics), `parse_output` and
`calculate_accuracies_v2` over a pandas frame of the written rows, grouped by `task_l1` with an
Overall row, as `get_metrics` does. The model call is left out: each row carries its critique.
Kept apart from prm_annotate/evaluation/deltabench.py so each checks the other; written in the
script's order of operations, pandas included (its mean skips a row written without metrics)."""
from __future__ import annotations

import re

import pandas as pd


def extract_first_number(s: str):
    m = re.search(r"\d+", s)
    return m.group() if m else None


def parse_output(critic: str, all_error_section_indexs: list[int]) -> dict:
    result = critic.split("Error Section Number:")[0].split("Conclusion:")[-1].strip()
    if "yes" in result.lower():
        nums = []
        for cur in critic.split("Error Section Number:")[1:]:
            n = extract_first_number(cur.split("Explanation:")[0].strip())
            nums.append(int(n) if n else -1)
        judge = 1
    else:
        nums, judge = [], 0
    top = max(all_error_section_indexs)  # raises on an error-free row, as the script does
    nums = [x for x in nums if x <= top]
    tp = len(set(nums) & set(all_error_section_indexs))
    fp = len(set(nums) - set(all_error_section_indexs))
    fn = len(set(all_error_section_indexs) - set(nums))
    p = tp / (tp + fp) if (tp + fp) > 0 else 0
    r = tp / (tp + fn) if (tp + fn) > 0 else 0
    f1 = (2 * p * r) / (p + r) if (p + r) > 0 else 0
    return {"error_sections_nums": nums, "parsing_success": 1, "judge": judge, "precision": p, "recall": r,
            "f1_score": f1, "tp_step": tp, "fp_step": fp, "fn_step": fn}


def process_line(line: dict) -> dict:
    """The row as the script writes it: with metrics, or without them when its parse raised or its
    critique was empty."""
    line = dict(line)
    all_idx = list(set(line["reason_unuseful_section_numbers"] + line["reason_error_section_numbers"]))
    critic = line.get("critic", "")
    if critic == "":
        line["parsing_success"] = 0
        return line
    try:
        line.update(parse_output(critic, all_idx))
    except Exception:
        pass
    return line


def calculate_accuracies_v2(group: pd.DataFrame) -> pd.Series:
    sum_tp, sum_fp, sum_fn = group["tp_step"].sum(), group["fp_step"].sum(), group["fn_step"].sum()
    p = sum_tp / (sum_tp + sum_fp) if (sum_tp + sum_fp) > 0 else 0
    r = sum_tp / (sum_tp + sum_fn) if (sum_tp + sum_fn) > 0 else 0
    return pd.Series({
        "recall_macro": group["recall"].mean(), "precision_macro": group["precision"].mean(),
        "f1_score_macro": group["f1_score"].mean(),
        "recall_micro": r, "precision_micro": p, "f1_micro": 2 * (p * r) / (p + r) if (p + r) > 0 else 0,
    })


def get_metrics(rows: list[dict]) -> dict[str, dict[str, float]]:
    """{"Overall" or a task_l1: the six averages} of the rows with their critiques."""
    df = pd.json_normalize([process_line(r) for r in rows])
    for col in ("precision", "recall", "f1_score", "tp_step", "fp_step", "fn_step"):
        if col not in df:
            df[col] = float("nan")
    out = {"Overall": dict(calculate_accuracies_v2(df))}
    for task, group in df.groupby("task_l1"):
        out[task] = dict(calculate_accuracies_v2(group))
    return out
