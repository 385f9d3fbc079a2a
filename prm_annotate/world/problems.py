"""Seeded multi-step arithmetic word problems with exact reference solutions.

A problem is a start value and 1-4 operations ("Tom has 3 apples. Then gets 5 more. Then loses 2.
How many apples now?"). Every intermediate value stays a small non-negative integer (0..99), so a
tiny model can learn the arithmetic, and `truth.py` can check any response against the structure
kept in the record's `world` field.

Reference solution format (the one the policy is trained on and `truth.py` accepts):

    Step 1: 3 + 5 = 8.

    Step 2: 8 - 2 = 6.

    The answer is \\boxed{6}.

One operation per paragraph, then the final answer as its own last paragraph.
"""
from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass

import orjson

MAX_VALUE = 99
NAMES = ["Tom", "Anna", "Sam", "Mia", "Ben", "Lily", "Max", "Eva", "Leo", "Zoe", "Noah", "Ava"]
ITEMS = ["apples", "marbles", "stickers", "coins", "cards", "books", "pencils", "shells",
         "stamps", "cookies", "balloons", "toys"]
ADD_PHRASES = ["Then gets {n} more.", "Then finds {n} more.", "Then buys {n} more."]
SUB_PHRASES = ["Then loses {n}.", "Then gives away {n}.", "Then sells {n}."]
MUL_PHRASES = {2: "Then the {items} double.", 3: "Then the {items} triple."}  # only x2 is generated
OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


def apply_op(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    raise ValueError(f"unknown operation {op!r}")


@dataclass(frozen=True)
class World:
    """The structured content of one problem: enough to compute every true intermediate value."""

    name: str
    items: str
    start: int
    ops: tuple[tuple[str, int], ...]  # (operation, operand), operation in add/sub/mul

    def values(self) -> list[int]:
        """Start value followed by the value after each operation."""
        vals = [self.start]
        for op, n in self.ops:
            vals.append(apply_op(op, vals[-1], n))
        return vals

    @property
    def answer(self) -> int:
        return self.values()[-1]

    def to_json(self) -> dict:
        return {"name": self.name, "items": self.items, "start": self.start,
                "ops": [[op, n] for op, n in self.ops]}

    @classmethod
    def from_json(cls, data: dict) -> "World":
        return cls(name=data["name"], items=data["items"], start=int(data["start"]),
                   ops=tuple((str(op), int(n)) for op, n in data["ops"]))


def random_world(rng: random.Random) -> World:
    # Small operands (1-9) keep the arithmetic learnable for a 1M-parameter model in minutes, while
    # two-digit intermediate values keep it from becoming trivial.
    start = rng.randint(2, 20)
    value = start
    ops: list[tuple[str, int]] = []
    for _ in range(rng.randint(1, 4)):
        choices, weights = ["add", "sub"], [4, 4]
        if 1 <= value <= 20:
            choices.append("mul")
            weights.append(1)
        op = rng.choices(choices, weights)[0]
        if op == "sub" and value == 0:
            op = "add"
        if op == "add":
            n = rng.randint(1, min(9, MAX_VALUE - value))
        elif op == "sub":
            n = rng.randint(1, min(9, value))
        else:
            n = 2
        ops.append((op, n))
        value = apply_op(op, value, n)
    return World(rng.choice(NAMES), rng.choice(ITEMS), start, tuple(ops))


def problem_text(world: World, rng: random.Random) -> str:
    parts = [f"{world.name} has {world.start} {world.items}."]
    for op, n in world.ops:
        if op == "add":
            parts.append(rng.choice(ADD_PHRASES).format(n=n))
        elif op == "sub":
            parts.append(rng.choice(SUB_PHRASES).format(n=n))
        else:
            parts.append(MUL_PHRASES[n].format(items=world.items))
    parts.append(f"How many {world.items} now?")
    return " ".join(parts)


def solution_steps(world: World) -> list[str]:
    """The reference solution, one paragraph per step; the last paragraph holds the answer."""
    steps = []
    vals = world.values()
    for i, (op, n) in enumerate(world.ops):
        steps.append(f"Step {i + 1}: {vals[i]} {OP_SYMBOL[op]} {n} = {vals[i + 1]}.")
    steps.append(f"The answer is \\boxed{{{world.answer}}}.")
    return steps


def make_problem(split: str, index: int, seed: int) -> dict:
    """Problem `index` of `split` under `seed`: the same arguments always give the same record,
    independent of how many other problems are generated."""
    rng = random.Random(f"arith/{split}/{seed}/{index}")
    world = random_world(rng)
    return {
        "id": f"arith-{split}-{index}",
        "problem": problem_text(world, rng),
        "answer": str(world.answer),
        "world": world.to_json(),
    }


def make_problems(n: int, seed: int = 0, split: str = "test", start: int = 0) -> list[dict]:
    return [make_problem(split, i, seed) for i in range(start, start + n)]


def write_problems(path: str, n: int, seed: int = 0, split: str = "test") -> None:
    out = sys.stdout.buffer if path == "-" else open(path, "wb")
    try:
        for rec in make_problems(n, seed, split):
            out.write(orjson.dumps(rec) + b"\n")
    finally:
        if out is not sys.stdout.buffer:
            out.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write arithmetic word problems as JSONL.")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="test", help="id prefix: arith-<split>-<n>")
    parser.add_argument("-o", "--output", default="-")
    args = parser.parse_args(argv)
    write_problems(args.output, args.n, args.seed, args.split)


if __name__ == "__main__":
    main()
