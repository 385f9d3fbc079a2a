"""Every file in the repository with reference verdicts on final answers, as (id, gold, response
text, verdict) rows: the ProcessBench responses of tests/data/grading (human
`final_answer_correct`, the grader's development set) and the GPT-3 GSM8K solutions of data/gsm8k
(`is_correct`). Used by tests/test_grading.py and benchmarks/bench_grading.py."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRADING_DIR = ROOT / "tests" / "data" / "grading"
GPT3_FILE = ROOT / "data" / "gsm8k" / "example_model_solutions.jsonl"
GPT3_KEYS = ["6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"]

Row = tuple[str, str, str, bool]


def processbench(path: Path) -> list[Row]:
    rows = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        rows.append((r["id"], r["answer"], "\n\n".join(r["steps"]), r["final_answer_correct"]))
    return rows


def gpt3(path: Path = GPT3_FILE) -> list[Row]:
    rows = []
    for i, line in enumerate(path.read_text().splitlines()):
        r = json.loads(line)
        gold = r["ground_truth"].rsplit("A:", 1)[1].strip()
        rows.extend((f"{i}/{k}", gold, r[k]["solution"], r[k]["is_correct"]) for k in GPT3_KEYS)
    return rows


def verdict_files() -> dict[str, list[Row]]:
    """Name -> rows, for every verdict file (a new file in tests/data/grading is picked up)."""
    files = {p.relative_to(ROOT).as_posix(): processbench(p) for p in sorted(GRADING_DIR.glob("*.jsonl"))}
    files[GPT3_FILE.relative_to(ROOT).as_posix()] = gpt3()
    return files
