"""Small rollout / judged / consensus files made from real ProcessBench records.

The label sources disagree with the gold in known ways, so tests can predict every number.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from testing.paths import TEST_DATA

DATA = TEST_DATA  # small vendored subsets: tests/data/SOURCES.md
PROCESSBENCH = DATA / "processbench"


def processbench(split: str) -> list[dict[str, Any]]:
    return json.loads((PROCESSBENCH / f"{split}.json").read_text())


def mixed_records(n_per_split: int = 12) -> list[dict[str, Any]]:
    """Half erroneous, half correct records from each of the two splits, in file order."""
    out = []
    for split in ("gsm8k", "math"):
        rows = processbench(split)
        wrong = [r for r in rows if r["label"] >= 0][: n_per_split // 2]
        right = [r for r in rows if r["label"] == -1][: n_per_split // 2]
        out += wrong + right
    return out


def shifted(label: int, n_steps: int, i: int) -> int:
    """A deterministic wrong first error for record number i."""
    if label == -1:
        return i % n_steps  # a false alarm
    return -1 if i % 2 else (label + 1 if label + 1 < n_steps else label - 1)


def mc_of(first_error: int, n_steps: int) -> dict[str, Any]:
    scores: list[float | None] = []
    for j in range(n_steps):
        if first_error == -1 or j < first_error:
            scores.append(round(1.0 - 0.125 * (j % 3), 3))
        elif j == first_error:
            scores.append(0.0)
        else:
            scores.append(None)  # not probed after the first error
    return {"k": 8, "label": "hard", "strategy": "exhaustive", "scores": scores, "first_error": first_error,
            "completions": 8 * n_steps, "generated_tokens": 100 * n_steps, "model": "fixture-mc"}


def judge_of(first_error: int | None) -> dict[str, Any]:
    if first_error is None:
        return {"first_error": None, "votes": [None], "parse_failures": 1, "model": "fixture-judge", "prompt": "paper"}
    return {"first_error": first_error, "votes": [first_error], "parse_failures": 0, "model": "fixture-judge",
            "prompt": "paper"}


def response_of(r: dict[str, Any]) -> dict[str, Any]:
    return {"id": r["id"], "problem": r["problem"], "steps": r["steps"], "answer": "0",
            "final_answer": None, "correct": r["final_answer_correct"]}


def build(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """mc is right on 3 of 4 records, the judge on 2 of 3 (one in 6 unparsed); consensus where they agree."""
    rollouts, judged, consensus = [], [], []
    for i, r in enumerate(records):
        n = len(r["steps"])
        mc_fe = r["label"] if i % 4 else shifted(r["label"], n, i)
        judge_fe: int | None = r["label"] if i % 3 else shifted(r["label"], n, i + 1)
        if i % 6 == 5:
            judge_fe = None
        rollouts.append({**response_of(r), "mc": mc_of(mc_fe, n)})
        judged.append({**response_of(r), "judge": judge_of(judge_fe)})
        if judge_fe is not None and mc_fe == judge_fe:
            kept = n if mc_fe == -1 else mc_fe + 1
            labels = [True] * kept if mc_fe == -1 else [True] * mc_fe + [False]
            consensus.append({"id": r["id"], "problem": r["problem"], "steps": r["steps"][:kept], "labels": labels,
                              "first_error": mc_fe, "mc": mc_of(mc_fe, n), "judge": judge_of(judge_fe)})
    return {"rollouts": rollouts, "judged": judged, "consensus": consensus}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def write_all(tmp: Path, records: list[dict[str, Any]]) -> dict[str, Path]:
    files = {name: write_jsonl(tmp / f"{name}.jsonl", rows) for name, rows in build(records).items()}
    gold = tmp / "gold.json"
    gold.write_text(json.dumps(records))
    files["gold"] = gold
    return files


def reference_metric(gold_rows: list[dict], preds: dict[str, int | None]) -> tuple[dict, float]:
    """ProcessBench's own arithmetic, written out plainly: per split, accuracy on erroneous and on
    correct samples, F1 their harmonic mean, then the mean F1 over splits."""
    groups: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    for row in gold_rows:
        groups[row["id"].split("-")[0]].append((row["label"], preds.get(row["id"])))
    out = {}
    for split, pairs in groups.items():
        err = [p == label for label, p in pairs if label != -1]
        cor = [p == -1 for label, p in pairs if label == -1]
        acc1 = sum(err) / len(err) * 100
        acc2 = sum(cor) / len(cor) * 100
        out[split] = (acc1, acc2, 2 * acc1 * acc2 / (acc1 + acc2) if acc1 + acc2 else 0.0, len(pairs))
    return out, sum(v[2] for v in out.values()) / len(out)
