"""The true first wrong step of any response to an arithmetic-world problem.

This is the world's gold label, what human annotators give real data. Steps are checked in order
against the problem's structure (`world` field of the problem record):

- A step may hold equations `a <op> b = c` (op one of + - * x ×); each equation must perform the
  NEXT operation of the problem on the value carried from the step before: the right carried value
  (`a`; for + and * the operands may be swapped), the right operator, the right operand, and the
  right arithmetic (`c`). A step with several equations is checked equation by equation.
- A step may hold the final answer `\\boxed{v}`; it is wrong if an operation was skipped (the answer
  comes before all operations are done) or if `v` differs from the true answer.
- A step with neither an equation nor a `\\boxed{}` answer (unparseable), a step with an equation
  after all operations are done (extra step), and any step after the boxed answer are wrong.
- "Step k:" labels are ignored (a misnumbered but correct step is still correct).
- Missing final answer: when every step is right but no step gives `\\boxed{}`, the LAST step is
  the first error — the response ended where the answer was due. An empty response gets 0.

Return value: the 0-based index of the first wrong step, or -1 when every step is right.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from prm_annotate.boxed import find_boxes
from prm_annotate.world.problems import World, apply_op

EQUATION = re.compile(r"(-?\d+)\s*([+\-*x×])\s*(-?\d+)\s*=\s*(-?\d+)")
_STEP_LABEL = re.compile(r"^\s*Step\s+\d+\s*:", re.IGNORECASE)
OPS = {"+": "add", "-": "sub", "*": "mul", "x": "mul", "×": "mul"}
_COMMUTATIVE = {"add", "mul"}


@dataclass(frozen=True)
class StepVerdict:
    index: int
    ok: bool
    reason: str  # "ok" or why the step is wrong


def boxed_values(text: str) -> list[str]:
    """The answers a text gives, in order: each `\\boxed{v}` written exactly so, `v` stripped. A
    box holding braces (`\\boxed{{5}}`, `\\boxed{\\frac{1}{2}}`) is no answer in this world."""
    return [b.content.strip() for b in find_boxes(text)
            if b.head == "\\boxed{" and b.closed and "{" not in b.content and "}" not in b.content]


def _same_number(text: str, value: int) -> bool:
    text = text.rstrip(".").strip()
    return bool(re.fullmatch(r"-?\d+", text)) and int(text) == value


def _world_of(problem_record: dict) -> World:
    if "world" not in problem_record:
        raise ValueError(f"record {problem_record.get('id')!r} has no 'world' field")
    return World.from_json(problem_record["world"])


def check_steps(problem_record: dict, steps: list[str]) -> list[StepVerdict]:
    """Verdicts for the steps up to and including the first wrong one (all steps if none is)."""
    world = _world_of(problem_record)
    values = world.values()
    done = 0  # operations performed so far
    answered = False
    verdicts: list[StepVerdict] = []

    def wrong(i: int, reason: str) -> list[StepVerdict]:
        verdicts.append(StepVerdict(i, False, reason))
        return verdicts

    for i, step in enumerate(steps):
        if answered:
            return wrong(i, "step after the final answer")
        body = _STEP_LABEL.sub("", step, count=1)
        equations = EQUATION.findall(body)
        boxed = boxed_values(body)
        if not equations and not boxed:
            return wrong(i, "no equation and no answer")
        for a_s, sym, b_s, c_s in equations:
            if done >= len(world.ops):
                return wrong(i, "extra operation")
            a, b, c = int(a_s), int(b_s), int(c_s)
            op = OPS[sym]
            want_op, want_n = world.ops[done]
            carried = values[done]
            if op != want_op:
                return wrong(i, f"wrong operator (expected {want_op})")
            if (a, b) != (carried, want_n) and not (op in _COMMUTATIVE and (b, a) == (carried, want_n)):
                if carried not in (a, b):
                    return wrong(i, f"wrong carried value (expected {carried})")
                return wrong(i, f"wrong operand (expected {want_n})")
            if c != apply_op(op, a, b):
                return wrong(i, f"wrong arithmetic (expected {apply_op(op, a, b)})")
            done += 1
        if boxed:
            if len(boxed) > 1:
                return wrong(i, "several answers")
            if done < len(world.ops):
                return wrong(i, "answer before all operations (skipped operation)")
            if not _same_number(boxed[0], world.answer):
                return wrong(i, f"wrong final answer (expected {world.answer})")
            answered = True
        verdicts.append(StepVerdict(i, True, "ok"))

    if not steps:
        return [StepVerdict(0, False, "empty response")]
    if not answered:
        verdicts[-1] = StepVerdict(len(steps) - 1, False, "no final answer")
    return verdicts


def true_first_error(problem_record: dict, steps: list[str]) -> int:
    """0-based index of the first wrong step, -1 if every step is right (see module docstring)."""
    for verdict in check_steps(problem_record, steps):
        if not verdict.ok:
            return verdict.index
    return -1
