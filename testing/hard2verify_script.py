"""Hard2Verify's grading (utils.py of SalesforceAIResearch/Hard2Verify, the file its dataset card
names for `decrypt_sample`; read through a copy, since the repository itself was not to be had
here; CC BY-NC 4.0 data, code as published), restated in this project's own words for the tests
that hold `evaluate --benchmark hard2verify` to it: the decryption of a row, `calculate_error_id_metrics`
(ErrorID), `calculate_metrics` and `grade_step_level_responses` (step and response level), with
sklearn's `recall_score` written out (binary, zero_division's default 0). A PRM's verdicts are the
paper's rule: the first step below the threshold (-1 if none), each step right at or above it.
Kept apart from prm_annotate/evaluation/hard2verify.py so each checks the other."""
from __future__ import annotations

import base64
import hashlib
import json
from math import ceil


def decrypt_sample(example: dict) -> dict:
    example = dict(example)
    canary = example["canary"]
    digest = hashlib.sha256(canary.encode("utf-8")).digest()
    for k in ["question", "model_response_by_step", "human_labels", "human_labels_first_error_idx"]:
        v = example.get(k)
        if isinstance(v, str):
            try:
                ct = base64.b64decode(v)
                ks = digest[:len(ct)] if len(ct) <= len(digest) else (digest * ceil(len(ct) / len(digest)))[:len(ct)]
                text = bytes(a ^ b for a, b in zip(ct, ks)).decode("utf-8")
                try:
                    example[k] = json.loads(text)
                except Exception:
                    example[k] = text
            except Exception:
                pass
    return example


def recall_score(labels: list[int], predictions: list[int], pos_label: int = 1) -> float:
    relevant = [i for i, lab in enumerate(labels) if lab == pos_label]
    if not relevant:
        return 0.0
    return sum(predictions[i] == pos_label for i in relevant) / len(relevant)


def calculate_metrics(predictions: list[int], labels: list[int]) -> dict:
    tpr = recall_score(labels, predictions)
    tnr = recall_score(labels, predictions, pos_label=0)
    balanced_acc = (tpr + tnr) / 2
    balanced_f1 = 2 * (tpr * tnr) / (tpr + tnr)
    return {"tpr": round(100 * tpr, 2), "tnr": round(100 * tnr, 2), "balanced_acc": round(100 * balanced_acc, 2),
            "balanced_f1_score": round(100 * balanced_f1, 2)}


def calculate_error_id_metrics(predictions: list[int], labels: list[int]) -> dict:
    correct_idx = [i for i in range(len(labels)) if labels[i] == -1]
    incorrect_idx = [i for i in range(len(labels)) if labels[i] != -1]
    tpr = sum(predictions[i] == -1 for i in correct_idx) / len(correct_idx)
    tnr = sum(predictions[i] == labels[i] for i in incorrect_idx) / len(incorrect_idx)
    balanced_acc = (tpr + tnr) / 2
    balanced_f1 = 2 * (tpr * tnr) / (tpr + tnr) if (tpr + tnr) != 0 else 0
    return {"tpr": round(100 * tpr, 2), "tnr": round(100 * tnr, 2), "balanced_acc": round(100 * balanced_acc, 2),
            "balanced_f1_score": round(100 * balanced_f1, 2)}


def prm_first_error(scores: list[float] | None, threshold: float) -> int:
    if scores is None:
        return -2
    for i, s in enumerate(scores):
        if s < threshold:
            return i
    return -1


def grade_step_level(rows: list[dict], step_verdicts: dict[str, list[int]]) -> dict:
    """`grade_step_level_responses`: a missing or short verdict list filled with wrong verdicts."""
    steps_pred, steps_gold, sol_pred, sol_gold = [], [], [], []
    for d in rows:
        labels = d["human_labels"]
        steps_gold.extend(labels)
        sol_gold.append(0 if any(lab == 0 for lab in labels) else 1)
        out = list(step_verdicts.get(d["unique_id"], [-2]))
        for i, v in enumerate(out[:len(labels)]):
            if v == -2:
                out[i] = 0 if labels[i] == 1 else 1
        n = len(d["model_response_by_step"])
        if len(out) < n:
            sol = 0 if any(v == 0 for v in out) else 1
            out = out + [0 if lab == 1 else 1 for lab in labels][len(out):]
        else:
            out = out[:n]
            sol = 0 if any(v == 0 for v in out) else 1
        steps_pred.extend(out)
        sol_pred.append(sol)
    return {"step_level": calculate_metrics(steps_pred, steps_gold),
            "solution_level": calculate_metrics(sol_pred, sol_gold)}
