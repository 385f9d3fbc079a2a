"""Rebuild tests/data/long_traces.jsonl from a clone of NovaSky-AI/SkyThought (Apache-2.0).

    git clone https://github.com/NovaSky-AI/SkyThought && cd SkyThought
    git checkout 6b8f472f532610e1acd0e498b4534831e54a7b6a
    python <this file> . > tests/data/long_traces.jsonl

Not run by the tests: the traces are shipped, this says exactly how they were chosen and what was
changed (only the model's thought/solution markers, rewritten as `<think>` tags; see SOURCES.md).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

COMMIT = "6b8f472f532610e1acd0e498b4534831e54a7b6a"
OUTPUTS = "skythought/Qwen2.5-Math/evaluation/outputs"
# Runs of models fine-tuned on correct long traces only (the repository's corrupt/reflection/wrong
# ablations are left out); the final checkpoint first, so a problem's trace comes from it when it can.
RUNS = [
    "icml_models/Sky-T1-math-correct-5K-32B-ckpts/checkpoint-140",
    "icml_models/Sky-T1-math-correct-5K-32B-ckpts/checkpoint-119",
    "icml_models/Sky-T1-math-correct-5K-32B-ckpts/checkpoint-98",
    "home/ubuntu/skyov1-dl/Sky-T1-math-correct-5K-27B",
    "home/ubuntu/skyov1-dl/Sky-T1-math-correct-5K-14B",
]
BENCHMARKS = ["aime24", "amc23", "math500", "minerva_math"]
PER_BENCHMARK = {"aime24": 12, "amc23": 12, "math500": 6, "minerva_math": 6}
MIN_PARAGRAPHS, MAX_PARAGRAPHS, MIN_CHARS, MAX_CHARS = 80, 360, 8_000, 33_000

OPEN = re.compile(r"\A<\|begin_of_thought\|>\n\n")
MIDDLE = re.compile(r"\s*<\|end_of_thought\|>\s*<\|begin_of_solution\|>\s*")
CLOSE = re.compile(r"\s*<\|end_of_solution\|>\s*\Z")


def as_think(text: str) -> str | None:
    """The model's markers as R1's tags; None when a marker is missing or repeated."""
    if len(OPEN.findall(text)) != 1 or len(MIDDLE.findall(text)) != 1 or len(CLOSE.findall(text)) != 1:
        return None
    text = OPEN.sub("<think>\n", text)
    text = MIDDLE.sub("\n</think>\n\n", text)
    return CLOSE.sub("", text)


def main(root: Path) -> None:
    taken: dict[str, int] = {b: 0 for b in BENCHMARKS}
    seen: set[tuple[str, int]] = set()
    for run in RUNS:
        for bench in BENCHMARKS:
            path = root / OUTPUTS / run / f"{bench}_eval" / bench / "test_Sky-T1_-1_seed0_t0.0_s0_e-1.jsonl"
            if not path.exists():
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if taken[bench] >= PER_BENCHMARK[bench] or (bench, row["idx"]) in seen:
                    continue
                response = as_think(row["code"][0])
                if response is None:
                    continue
                paragraphs = [p for p in response.split("\n\n") if p.strip()]
                if not (MIN_PARAGRAPHS <= len(paragraphs) <= MAX_PARAGRAPHS
                        and MIN_CHARS <= len(response) <= MAX_CHARS):
                    continue
                seen.add((bench, row["idx"]))
                taken[bench] += 1
                rel = f"{OUTPUTS}/{run}/{bench}_eval/{bench}/test_Sky-T1_-1_seed0_t0.0_s0_e-1.jsonl"
                print(json.dumps({
                    "id": f"skythought-{bench}-{row['idx']}",
                    "problem": row["question"] if "question" in row else row["problem"],
                    "answer": str(row.get("answer") or row.get("gt")),
                    "response": response,
                    "model": f"Sky-T1 ({run.split('/')[-1] if 'ckpts' not in run else run.split('/')[-2] + '/' + run.split('/')[-1]})",
                    "correct": bool(row["score"][0]),
                    "source": f"https://github.com/NovaSky-AI/SkyThought/blob/{COMMIT}/{rel}#L{row['idx'] + 1}",
                }, ensure_ascii=False))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
