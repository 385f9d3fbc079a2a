"""QwenLM/ProcessBench's `code/run_eval.py` (e8024636, Apache-2.0), restated in this project's own
words for the tests that hold `judge --protocol processbench-official` to it: how the script
builds a critic's prompt, samples, extracts an answer from a critique, votes, and scores a split.
Kept apart from the package's implementation (prm_annotate/judging/processbench_official.py) so
that each checks the other."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from testing.paths import TEST_DATA

PROCESSBENCH = TEST_DATA / "processbench"


def official_messages(problem: str, steps: list[str]) -> list[dict]:
    """The script's prompt: its template (read, stripped, `str.format`-filled) with the raw problem
    and the steps tagged from 0, each block followed by a blank line, the whole stripped; one user
    message, no system message."""
    template = (PROCESSBENCH / "critique_template.txt").read_text().strip()
    blocks = "".join(f"<paragraph_{i}>\n{step}\n</paragraph_{i}>\n\n" for i, step in enumerate(steps)).strip()
    return [{"role": "user", "content": template.format(problem=problem, tagged_response=blocks)}]


def official_prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The chat template with a generation prompt, rendered to text, then tokenized without special tokens."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


def official_sampling(model_path: str, voting_n: int | None) -> dict:
    """The script's SamplingParams, as keyword arguments (voting_n None: no --use_voting)."""
    max_tokens = 32768 if "QwQ" in model_path else 8192
    if voting_n is None:
        return dict(temperature=0.0, max_tokens=max_tokens, seed=42)
    if "Qwen2.5-Math" in model_path:
        return dict(temperature=0.7, top_p=0.8, top_k=20, n=voting_n, max_tokens=max_tokens, seed=42)
    return dict(temperature=1, top_p=0.9, n=voting_n, max_tokens=max_tokens, seed=42)


def official_answer(critique: str) -> str | None:
    """The contents of the last \\boxed{...} by the script's pattern (no closing brace inside), stripped."""
    found = re.findall(r"\\boxed\{([^}]*)\}", critique)
    return found[-1].strip() if found else None


def integer_or_none(value: str | None) -> int | None:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def official_prediction(critiques: list[str], voting: bool) -> int | None:
    if not voting:
        return integer_or_none(official_answer(critiques[0]))
    answers = [a for a in map(official_answer, critiques) if a is not None]
    if not answers:
        return None
    return integer_or_none(Counter(answers).most_common(1)[0][0])  # counted as strings; first seen wins a tie


def official_scores(rows: list[tuple[int, int | None]]) -> tuple[float, float, float]:
    """(error acc, correct acc, F1) of one split from (label, prediction) pairs, as the script computes them."""
    error = [pred == label for label, pred in rows if label != -1]
    correct = [pred == label for label, pred in rows if label == -1]
    acc1, acc2 = np.mean(error) * 100, np.mean(correct) * 100
    return float(acc1), float(acc2), float(2 * acc1 * acc2 / (acc1 + acc2))
