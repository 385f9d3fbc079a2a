"""PRMBench and Hard2Verify files in their published record shapes, built from the arithmetic world
(tests/data/prmbench/, tests/data/hard2verify/; tests/data/SOURCES.md), and step scores for them.

`python -m testing.benchmark_files` writes the two fixture files; the tests read the written files,
so a change here shows up as a diff of tests/data.
- PRMBench: `docs/data_format.md` of ssmisya/PRMBench. Each row is a world problem's reference
  solution (`original_process`) and a corrupted copy (`modified_process`) whose 1-indexed
  `error_steps` are every step from the true first error on; steps numbered as the release numbers
  them ("Step k. ", "k. " or nothing, in turn); `multi_solutions` rows hold a second correct
  solution (no error steps), as the release's do.
- Hard2Verify: the dataset card's fields, the four text/label fields encrypted as the release
  encrypts them (io/inputs/hard2verify.py), `human_labels` 1 up to the first error and 0 from it
  (the benchmark's strict rule: a step built on an error is wrong).
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from testing.paths import TEST_DATA

PRMBENCH_FILE = TEST_DATA / "prmbench" / "prmbench_fixture.jsonl"
HARD2VERIFY_FILE = TEST_DATA / "hard2verify" / "hard2verify_fixture.jsonl"
CATEGORIES = ("redundency", "circular", "counterfactual", "step_contradiction", "domain_inconsistency",
              "confidence", "missing_condition", "deception", "multi_solutions")


def _world(n: int, seed: int) -> list[tuple[dict, list[str], list[str], int]]:
    """(problem, reference steps, corrupted steps, true first error of the corrupted) per problem."""
    from lab.world.corrupt import corrupt_solution
    from prm_annotate.world.problems import World, make_problems, solution_steps
    from prm_annotate.world.truth import true_first_error

    rng = random.Random(seed)
    out = []
    for p in make_problems(n, seed=seed, split="test"):
        world = World.from_json(p["world"])
        bad = corrupt_solution(world, rng)
        out.append((p, solution_steps(world), bad, true_first_error(p, bad)))
    return out


def _numbered(steps: list[str], style: int) -> list[str]:
    bare = [s.split(": ", 1)[1] if s.startswith("Step ") and ": " in s else s for s in steps]
    if style == 0:
        return [f"Step {i + 1}. {s}" for i, s in enumerate(bare)]
    if style == 1:
        return [f"{i + 1}. {s}" for i, s in enumerate(bare)]
    return bare


def prmbench_rows(per_category: int = 4, seed: int = 11) -> list[dict[str, Any]]:
    rows = []
    world = _world(per_category * len(CATEGORIES), seed)
    for k, (p, good, bad, first) in enumerate(world):
        category = CATEGORIES[k % len(CATEGORIES)]
        style = k % 3
        if category == "multi_solutions" or first < 0:
            modified, errors = list(reversed(good[:-1])) + good[-1:], []
            category = "multi_solutions" if first < 0 else category
        else:
            modified, errors = bad, list(range(first + 1, len(bad) + 1))
            if k % 4 == 1:
                errors = errors[:1]  # a single error step, as many release rows have
        rows.append({
            "original_question": p["problem"], "modified_question": p["problem"],
            "original_process": _numbered(good, style), "modified_process": _numbered(modified, style),
            "modified_steps": errors, "error_steps": errors,
            "reason": "made from the arithmetic world's corruption of the reference solution",
            "idx": f"{category}_prm_fixture_{k}", "question": p["problem"], "classification": category})
    return rows


def hard2verify_rows(n: int = 40, seed: int = 12) -> list[dict[str, Any]]:
    from prm_annotate.io.inputs.hard2verify import encrypt_field

    rows = []
    for k, (p, good, bad, first) in enumerate(_world(n, seed)):
        steps, first_error = (good, -1) if k % 3 == 0 or first < 0 else (bad, first)
        labels = [1 if first_error == -1 or i < first_error else 0 for i in range(len(steps))]
        canary = f"fixture-canary-{k}"
        row = {"unique_id": f"h2v-fixture-{k}", "question": p["problem"], "model_response_by_step": steps,
               "human_labels": labels, "human_labels_first_error_idx": first_error, "canary": canary}
        if k % 5 != 4:  # most rows as the release stores them; a few already decrypted
            for name in ("question", "model_response_by_step", "human_labels", "human_labels_first_error_idx"):
                row[name] = encrypt_field(row[name], canary)
        rows.append(row)
    return rows


def step_scores(steps_per_response: dict[str, int], seed: int) -> dict[str, list[float]]:
    """Seeded step scores in [0, 1], with ties at 0.5 (PRMBench's strict `> 0.5`) and shared values."""
    rng = random.Random(seed)
    pool = [0.5, 0.25, 0.75, 0.9, 0.1]
    return {rid: [rng.choice(pool) if rng.random() < 0.3 else rng.random() for _ in range(n)]
            for rid, n in steps_per_response.items()}


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write(PRMBENCH_FILE, prmbench_rows()))
    print(write(HARD2VERIFY_FILE, hard2verify_rows()))
