"""Responses with the kinds of mistakes a small policy makes, for training the tiny judge.

`corrupt_solution` starts from a problem's reference solution and injects ONE mistake (wrong
arithmetic, wrong carried value, wrong operand or operator, a skipped or extra operation, a wrong
or missing final answer). Steps after an arithmetic-type mistake carry the wrong value on, as a
policy that slipped once would. Labels never come from here: they come from `truth.py`.
"""
from __future__ import annotations

import random

from prm_annotate.world.problems import OP_SYMBOL, World, apply_op
from prm_annotate.world.thinking import nudge

ERROR_KINDS = ["arithmetic", "carried", "operand", "operator", "skip", "extra", "answer", "no_answer"]
ERROR_WEIGHTS = [45, 15, 10, 6, 6, 6, 7, 5]


def _render(ops_done: list[tuple[int, str, int, int]], answer: int | None) -> list[str]:
    steps = [f"Step {i + 1}: {a} {OP_SYMBOL[op]} {b} = {c}." for i, (a, op, b, c) in enumerate(ops_done)]
    if answer is not None:
        steps.append(f"The answer is \\boxed{{{answer}}}.")
    return steps


def corrupt_solution(world: World, rng: random.Random, kind: str | None = None, slip: float = 0.0) -> list[str]:
    """A response to `world` with one injected mistake of `kind` (random if None); with `slip`,
    every equation also gets wrong arithmetic with that probability (errors early and often, for
    a judge's training mix)."""
    kind = kind or rng.choices(ERROR_KINDS, ERROR_WEIGHTS)[0]
    ops = list(world.ops)
    where = rng.randrange(len(ops))
    if kind == "skip" and len(ops) > 1:
        del ops[where]
    if kind == "extra":
        ops.insert(where + 1, (rng.choice(["add", "sub"]), rng.randint(1, 9)))
    value = world.start
    done: list[tuple[int, str, int, int]] = []
    for i, (op, n) in enumerate(ops):
        a, b = value, n
        if i == where and kind == "carried":
            a = nudge(rng, value)
        if i == where and kind == "operand":
            b = nudge(rng, n) or n + 1
        if i == where and kind == "operator":
            op = rng.choice([o for o in ("add", "sub") if o != op])
        if op == "sub" and b > a:
            op = "add"  # the policy never writes negative intermediate values
        c = apply_op(op, a, b)
        if (i == where and kind == "arithmetic") or (slip and rng.random() < slip):
            c = nudge(rng, c)
        done.append((a, op, b, c))
        value = c
    answer: int | None = value
    if kind == "answer":
        answer = nudge(rng, value)
    if kind == "no_answer":
        answer = None
    return _render(done, answer)
