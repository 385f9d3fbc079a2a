"""The arithmetic world: problem generator, truth checker, training script, shipped models."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from prm_annotate.world.problems import World, make_problem, make_problems, solution_steps
from prm_annotate.world.truth import check_steps, true_first_error

# A fixed hand-written problem: 3 + 5 = 8, 8 - 2 = 6, 6 * 2 = 12.
PROBLEM = {
    "id": "arith-hand-0",
    "problem": "Tom has 3 apples. Then gets 5 more. Then loses 2. Then the apples double. How many apples now?",
    "answer": "12",
    "world": {"name": "Tom", "items": "apples", "start": 3, "ops": [["add", 5], ["sub", 2], ["mul", 2]]},
}
RIGHT = ["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12.", "The answer is \\boxed{12}."]


# ---------------------------------------------------------------- generator

def test_generator_is_seeded_and_deterministic():
    assert make_problems(50, seed=0) == make_problems(50, seed=0)
    assert make_problems(50, seed=0) != make_problems(50, seed=1)
    # A problem does not depend on how many others are generated with it.
    assert make_problems(30, seed=3)[7] == make_problem("test", 7, 3)
    ids = [p["id"] for p in make_problems(50, seed=0, split="train")]
    assert ids[:2] == ["arith-train-0", "arith-train-1"] and len(set(ids)) == 50


def test_generated_answers_are_right_and_values_small():
    for rec in make_problems(500, seed=0):
        world = World.from_json(rec["world"])
        assert 1 <= len(world.ops) <= 4
        values = world.values()
        assert all(0 <= v <= 99 for v in values)
        assert rec["answer"] == str(values[-1])
        # The problem text states the start and every operand.
        assert rec["problem"].startswith(f"{world.name} has {world.start} {world.items}.")
        # The reference solution is right by the truth checker.
        assert true_first_error(rec, solution_steps(world)) == -1


def test_problems_cli_writes_jsonl(tmp_path):
    out = tmp_path / "p.jsonl"
    subprocess.run([sys.executable, "-m", "prm_annotate.world.problems", "--n", "7", "--seed", "2",
                    "-o", str(out)], check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == make_problems(7, seed=2)
    assert set(lines[0]) == {"id", "problem", "answer", "world"}


# ---------------------------------------------------------------- truth checker

def test_reference_solution_is_right():
    assert true_first_error(PROBLEM, RIGHT) == -1
    # Step labels and the "answer is" wording are not required; swapped operands of + are fine.
    assert true_first_error(PROBLEM, ["5 + 3 = 8", "8 - 2 = 6", "2 * 6 = 12", "\\boxed{12}"]) == -1
    # The answer may close the last step instead of being its own paragraph.
    assert true_first_error(PROBLEM, RIGHT[:2] + ["Step 3: 6 * 2 = 12. \\boxed{12}"]) == -1


@pytest.mark.parametrize("steps, expected, reason", [
    # wrong arithmetic at step 1, then consistent with its own wrong value
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 5.", "Step 3: 5 * 2 = 10.", "The answer is \\boxed{10}."],
     1, "wrong arithmetic"),
    # wrong carried value: step 2 starts from 9 although step 1 gave 8
    (["Step 1: 3 + 5 = 8.", "Step 2: 9 - 2 = 7.", "Step 3: 7 * 2 = 14.", "The answer is \\boxed{14}."],
     1, "wrong carried value"),
    # wrong operand and wrong operator
    (["Step 1: 3 + 4 = 7.", "Step 2: 7 - 2 = 5.", "Step 3: 5 * 2 = 10.", "\\boxed{10}"], 0, "wrong operand"),
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 + 2 = 10.", "Step 3: 10 * 2 = 20.", "\\boxed{20}"], 1, "wrong operator"),
    # missing (skipped) step: "loses 2" never happens
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 * 2 = 16.", "The answer is \\boxed{16}."], 1, "wrong operator"),
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "The answer is \\boxed{6}."], 2, "skipped operation"),
    # extra step after all operations
    (RIGHT[:3] + ["Step 4: 12 - 2 = 10.", "The answer is \\boxed{10}."], 3, "extra operation"),
    (RIGHT + ["Step 5: 12 + 1 = 13."], 4, "step after the final answer"),
    # no answer: all steps right, the response just stops
    (RIGHT[:3], 2, "no final answer"),
    # wrong final answer after right steps
    (RIGHT[:3] + ["The answer is \\boxed{13}."], 3, "wrong final answer"),
    # unparseable step
    (["Step 1: 3 + 5 = 8.", "Then we think about it.", "Step 3: 6 * 2 = 12.", "\\boxed{12}"], 1, "no equation"),
])
def test_truth_on_hand_made_wrong_responses(steps, expected, reason):
    assert true_first_error(PROBLEM, steps) == expected
    verdicts = check_steps(PROBLEM, steps)
    assert verdicts[-1].index == expected and not verdicts[-1].ok
    assert reason in verdicts[-1].reason
    assert all(v.ok for v in verdicts[:-1])


def test_empty_response_and_missing_world():
    assert true_first_error(PROBLEM, []) == 0
    with pytest.raises(ValueError, match="world"):
        true_first_error({"id": "x", "problem": "p", "answer": "1"}, RIGHT)
