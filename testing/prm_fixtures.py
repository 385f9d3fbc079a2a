"""Labelled arithmetic-world responses for the PRM tests: each problem's reference solution and
corrupted copies of it (lab/world/corrupt.py), labelled by the world's truth, as `trl` export rows and as
responses to score. Nothing here runs a model."""
from __future__ import annotations

import random

from lab.world.corrupt import corrupt_solution
from prm_annotate.reports.labels import step_labels
from prm_annotate.world.problems import World, make_problems, solution_steps
from prm_annotate.world.truth import true_first_error


def world_responses(n_problems: int, seed: int, split: str = "train") -> list[dict]:
    """Two responses per problem: the reference solution and one with a mistake, with `label`
    (the true first error)."""
    rng = random.Random(seed)
    out = []
    for p in make_problems(n_problems, seed=seed, split=split):
        world = World.from_json(p["world"])
        for j, steps in enumerate([solution_steps(world), corrupt_solution(world, rng)]):
            out.append({"id": f"{p['id']}/{j}", "problem_id": p["id"], "problem": p["problem"], "answer": p["answer"],
                        "steps": steps, "label": true_first_error(p, steps)})
    return out


def trl_rows(responses: list[dict]) -> list[dict]:
    rows = []
    for r in responses:
        labels = step_labels(r["label"], len(r["steps"]))
        rows.append({"id": r["id"], "prompt": r["problem"], "completions": r["steps"][:len(labels)], "labels": labels})
    return rows
