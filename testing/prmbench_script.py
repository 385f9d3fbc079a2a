"""ssmisya/PRMBench's evaluation of its default task (a1ae4ea, Apache-2.0), restated in this
project's own words for the tests that hold `evaluate --benchmark prmbench` to it:
`mr_eval/tasks/prmtest_classified/task.py` (`load_data_function`, `evaluate_function`,
`eval_on_hallucination_step`), the PRMs' labels (`mr_eval/models/qwen_prm.py`: a step is valid when
its score is above `validity_threshold`, 0.5), and PRMScore as the paper's tables compute and print it
(`get_prmscore_from_current_res_dict` in `mr_visualize/eval_res_view/form_latex_strs.ipynb`:
`f"{score * 100:.1f}"`). Kept apart from prm_annotate/evaluation/prmbench.py so each checks the other;
written in the script's order of operations (its -1 sentinels included), not the package's."""
from __future__ import annotations

import re


def remove_step_prefix(text: str) -> str:
    return re.sub(r"^(Step\s*\d+\.\s*|\d+\.\s*)", "", text.strip(), flags=re.IGNORECASE)


def load_data(rows: list[dict]) -> list[dict]:
    """The task's samples: one per (classification, idx), plus a `correct_<idx>` sample (the original
    question and process) for each `redundency` row."""
    meta, seen = [], set()
    for item in rows:
        if item["classification"] == "redundency":
            cid = f"correct_{item['idx']}"
            if cid not in seen:
                meta.append(dict(idx=cid, question=item["original_question"], steps=item["original_process"],
                                 error_steps=[], classification="correct"))
                seen.add(cid)
        sid = f"{item['classification']}_{item['idx']}"
        if sid not in seen:
            meta.append(dict(idx=sid, question=item["modified_question"], steps=item["modified_process"],
                             error_steps=item["error_steps"], classification=item["classification"]))
            seen.add(sid)
    return meta


def prm_result(idx: str, step_scores: list[float], validity_threshold: float = 0.5) -> dict:
    """What a PRM model of the toolkit stores for one sample."""
    return dict(idx=idx, scores=dict(step_level_validity_scores=step_scores,
                                     step_level_validity_labels=[s > validity_threshold for s in step_scores]))


def eval_step(hallucination_steps: list[int], labels: list[bool]) -> dict:
    hallucination_steps = [i - 1 for i in hallucination_steps]
    positive, negative = 1, 0
    tp = fp = tn = fn = 0
    for idx in range(len(labels)):
        if idx in hallucination_steps:
            if labels[idx] == positive:
                fp += 1
            else:
                tn += 1
        else:
            if labels[idx] == positive:
                tp += 1
            else:
                fn += 1
    return dict(TP=tp, FP=fp, TN=tn, FN=fn)


def _f1s(m: dict) -> tuple[float, float]:
    tp, fp, fn, tn = m["TP"], m["FP"], m["FN"], m["TN"]
    precision = tp / (tp + fp) if (tp + fp) != 0 else -1
    recall = tp / (tp + fn) if (tp + fn) != 0 else -1
    f1 = 2 * precision * recall / (precision + recall) if (precision + recall) != 0 else -1
    negative_precision = tn / (tn + fn) if (tn + fn) != 0 else -1
    negative_recall = tn / (tn + fp) if (tn + fp) != 0 else -1
    negative_f1 = (2 * negative_precision * negative_recall / (negative_precision + negative_recall)
                   if (negative_precision + negative_recall) != 0 else -1)
    return f1, negative_f1


def evaluate(results: list[dict], meta_data: list[dict]) -> dict:
    """`evaluate_function`'s F1 part: per classification and over the non-correct samples."""
    meta = {m["idx"]: m for m in meta_data}
    types = {m["classification"] for m in meta_data}
    per_type = {t: dict(TP=0, FP=0, TN=0, FN=0) for t in types}
    total = dict(TP=0, FP=0, TN=0, FN=0)
    seen, filtered = set(), []
    for r in results:
        if r["idx"] not in seen and r["idx"] in meta:
            seen.add(r["idx"])
            filtered.append(r)
    assert abs(len(filtered) - len(meta_data)) < 5
    correct_ids = {m["idx"] for m in meta_data if m["classification"] == "correct"}
    for r in filtered:
        if "validity" in r and not r["validity"]:
            continue
        ref = meta[r["idx"]]
        res = eval_step(ref["error_steps"], r["scores"]["step_level_validity_labels"])
        for k in res:
            per_type[ref["classification"]][k] += res[k]
            if r["idx"] not in correct_ids:
                total[k] += res[k]
    out = {"total": dict(zip(("f1", "negative_f1"), _f1s(total)))}
    for t in types:
        out[t] = dict(zip(("f1", "negative_f1"), _f1s(per_type[t])))
    return out


def prmscore(res: dict, classification: str | None = None) -> float:
    if classification is None:
        return res["total"]["f1"] * 0.5 + res["total"]["negative_f1"] * 0.5
    if classification in ["multi_solutions"]:
        return res[classification]["f1"]
    return res[classification]["f1"] * 0.5 + res[classification]["negative_f1"] * 0.5


def printed(score: float) -> str:
    return f"{score * 100:.1f}"
