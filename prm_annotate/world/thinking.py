"""Thinking traces of the arithmetic world: attempts, self-checks and corrections, then the answer.

A trace is what a reasoning model writes, in the world's step style:

    <think>
    Step 1: 3 + 5 = 8.

    Step 2: 8 - 2 = 5.

    Wait, 8 - 2 is 6, not 5. Step 2: 8 - 2 = 6.

    Let me check step 1: 3 + 5 = 8. Yes.
    </think>

    The answer is \\boxed{6}.

One paragraph per attempt or check. What a trace holds, each drawn with its own probability
(`TraceMix`): right steps; slips (a wrong step of the kinds `lab/world/corrupt.py` injects:
wrong arithmetic, carried value, operand or operator) that the next paragraph corrects ("Wait,
... Step k: ..." — a right correction), that a verification pass after the last step corrects
(the steps in between carry the wrong value on), or that are never caught; wrong "corrections"
of a right step; re-checks that confirm a step (a check of a wrong step confirms the error).
The answer paragraph gives the value the trace ends with, right or not.

`make_trace` is seeded and deterministic, and keeps its own record of what it wrote (`Trace.kinds`,
`Trace.slips`): the truth checker (`trace_truth.py`) reads the text alone, and the tests check the
two agree. Nothing here imports the truth checker.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from prm_annotate.world.problems import OP_SYMBOL, World, apply_op, make_problem

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# How the thought is closed and the answer opened (the join between the thought's last step and
# the answer's first step, in THINKING-SCHEMA's terms).
CLOSE_JOIN = f"\n{THINK_CLOSE}\n\n"

SLIP_KINDS = ("arithmetic", "carried", "operand", "operator")
# corrupt.py's weights for these kinds (45, 15, 10, 6), so the slips look like the policy's.
SLIP_WEIGHTS = (45, 15, 10, 6)


@dataclass(frozen=True)
class TraceMix:
    """How often each event happens in a generated trace.

    Attributes:
        slip: probability that a step written from a right state is a slip.
        catch_now: a slip is corrected by the very next paragraph with this probability.
        catch_later: a slip is carried on and corrected in a verification pass after the last
            step; with the remaining probability (1 - catch_now - catch_later) it is never caught.
        recheck: after a right step, a paragraph re-checks it ("Let me check step k: ... Yes.").
        wrong_fix: after a right step, a wrong "correction" changes it to a wrong value.
        wrong_fix_caught: a wrong correction is undone in the verification pass with this probability.
        verify: a verification pass (a re-check of every step in order) follows the last step even
            when no slip waits to be caught there.
    """

    slip: float = 0.35
    catch_now: float = 0.55
    catch_later: float = 0.15
    recheck: float = 0.2
    wrong_fix: float = 0.07
    wrong_fix_caught: float = 0.4
    verify: float = 0.35


@dataclass(frozen=True)
class GeneratedSlip:
    index: int  # paragraph of the slip (over the thought's and the answer's paragraphs)
    kind: str  # "slip" or "wrong_correction"
    op: int  # 0-based operation it writes
    corrected_at: int | None  # paragraph that corrects it, None when never caught


@dataclass(frozen=True)
class Trace:
    """A generated trace and the generator's own record of it.

    `kinds[i]` is what paragraph i is: "step" (right), "recheck" (right, confirms an earlier
    right step), "correction" (right, corrects a slip), "slip", "wrong_correction",
    "propagated" (wrong only because it carries, confirms or answers an earlier uncorrected error)
    or "answer" (right)."""

    thought: tuple[str, ...]
    answer: tuple[str, ...]
    kinds: tuple[str, ...]
    slips: tuple[GeneratedSlip, ...]

    @property
    def steps(self) -> list[str]:
        return list(self.thought) + list(self.answer)

    @property
    def completion(self) -> str:
        """What the model writes after a generation prompt that opened the thought (`<think>\\n`)."""
        return "\n\n".join(self.thought) + CLOSE_JOIN + "\n\n".join(self.answer)

    @property
    def text(self) -> str:
        """The whole trace, the thought's opening tag included."""
        return f"{THINK_OPEN}\n" + self.completion

    @property
    def first_error(self) -> int:
        return next((i for i, k in enumerate(self.kinds) if k not in ("step", "recheck", "correction", "answer")), -1)

    @property
    def final_correct(self) -> bool:
        return self.kinds[-1] == "answer"

    @property
    def corrected_slip(self) -> bool:
        return any(s.kind == "slip" and s.corrected_at is not None for s in self.slips)

    @property
    def uncaught_slip(self) -> bool:
        return any(s.kind == "slip" and s.corrected_at is None for s in self.slips)


def nudge(rng: random.Random, value: int) -> int:
    """A nearby wrong value (never negative), like a slip in carrying or adding (lab/world/corrupt.py's too)."""
    for _ in range(10):
        delta = rng.choice([-10, -3, -2, -1, -1, 1, 1, 2, 3, 10])
        if value + delta >= 0:
            return value + delta
    return value + 1


Equation = tuple[int, str, int, int]  # a, op, b, c


def _slip(rng: random.Random, a: int, op: str, b: int) -> tuple[Equation, str]:
    """A wrong equation for `a op b` and its kind. Non-arithmetic kinds that would need a negative
    value or could come out right fall back to an arithmetic slip."""
    kind = rng.choices(SLIP_KINDS, SLIP_WEIGHTS)[0]
    if kind == "carried":
        a2 = nudge(rng, a)
        if a2 != a and not (op == "sub" and b > a2):
            return (a2, op, b, apply_op(op, a2, b)), kind
    elif kind == "operand":
        b2 = nudge(rng, b)
        if b2 not in (b, 0) and not (op == "sub" and b2 > a) and not (op != "sub" and b2 == a and a == b):
            return (a, op, b2, apply_op(op, a, b2)), kind
    elif kind == "operator":
        op2 = "sub" if op != "sub" else "add"
        if not (op2 == "sub" and b > a):
            return (a, op2, b, apply_op(op2, a, b)), kind
    c = apply_op(op, a, b)
    return (a, op, b, nudge(rng, c)), "arithmetic"


def _eq(a: int, op: str, b: int, c: int) -> str:
    return f"{a} {OP_SYMBOL[op]} {b} = {c}"


def step_text(k: int, eq: Equation) -> str:
    return f"Step {k + 1}: {_eq(*eq)}."


def recheck_text(k: int, eq: Equation) -> str:
    return f"Let me check step {k + 1}: {_eq(*eq)}. Yes."


def correction_text(k: int, wrong: Equation, right: Equation) -> str:
    """ "Wait, ..." naming what was wrong, then the step rewritten."""
    a, op, b, c = wrong
    ra, rop, rb, rc = right
    if (a, op, b) == (ra, rop, rb):
        said = f"Wait, {a} {OP_SYMBOL[op]} {b} is {rc}, not {c}."
    else:
        said = f"Wait, step {k + 1} is {ra} {OP_SYMBOL[rop]} {rb}, not {a} {OP_SYMBOL[op]} {b}."
    return f"{said} {step_text(k, right)}"


def answer_text(value: int) -> str:
    return f"The answer is \\boxed{{{value}}}."


def make_trace(world: World, rng: random.Random, mix: TraceMix = TraceMix()) -> Trace:
    """One trace for `world`, drawn from `rng` under `mix` (see the module docstring)."""
    true_values = world.values()
    n = len(world.ops)
    paragraphs: list[str] = []
    kinds: list[str] = []
    written: list[Equation | None] = [None] * n  # the trace's current version of each operation
    origin: list[int | None] = [None] * n  # paragraph of the uncorrected slip op k's version holds
    slips: dict[int, list] = {}  # paragraph -> [kind, op, corrected_at]
    pending: int | None = None  # op whose slip waits for the verification pass
    sound = True  # every operation written so far is right

    def emit(text: str, kind: str) -> int:
        paragraphs.append(text)
        kinds.append(kind)
        return len(paragraphs) - 1

    def right_eq(k: int, a: int) -> Equation:
        op, b = world.ops[k]
        return (a, op, b, apply_op(op, a, b))

    def correct(k: int) -> None:
        wrong = written[k]
        right = right_eq(k, true_values[k])
        at = emit(correction_text(k, wrong, right), "correction")
        slips[origin[k]][2] = at
        written[k], origin[k] = right, None

    for k in range(n):
        carried = written[k - 1][3] if k else world.start
        if sound and rng.random() < mix.slip:
            eq, _ = _slip(rng, carried, *world.ops[k])
            at = emit(step_text(k, eq), "slip")
            slips[at] = ["slip", k, None]
            written[k], origin[k] = eq, at
            fate = rng.random()
            if fate < mix.catch_now:
                correct(k)
            else:
                sound = False
                if fate < mix.catch_now + mix.catch_later:
                    pending = k
            continue
        eq = right_eq(k, carried)
        written[k] = eq
        if not sound:
            emit(step_text(k, eq), "propagated")
            continue
        emit(step_text(k, eq), "step")
        draw = rng.random()
        if draw < mix.recheck:
            emit(recheck_text(k, eq), "recheck")
        elif draw < mix.recheck + mix.wrong_fix:
            a, op, b, c = eq
            bad = (a, op, b, nudge(rng, c))
            at = emit(correction_text(k, eq, bad), "wrong_correction")
            slips[at] = ["wrong_correction", k, None]
            written[k], origin[k] = bad, at
            sound = False
            if rng.random() < mix.wrong_fix_caught:
                pending = k

    if pending is not None or rng.random() < mix.verify:
        for k in range(n):
            if k == pending:
                correct(k)
                for j in range(k + 1, n):
                    written[j] = right_eq(j, written[j - 1][3])
                    emit(step_text(j, written[j]), "step")
                break
            ok = written[k] == right_eq(k, true_values[k])
            emit(recheck_text(k, written[k]), "recheck" if ok else "propagated")

    thought = tuple(paragraphs)
    final = written[-1][3]
    answer = answer_text(final)
    # The answer is the value the trace ends with: wrong only through an uncorrected error.
    kinds.append("answer" if final == world.answer else "propagated")
    return Trace(thought, (answer,), tuple(kinds),
                 tuple(GeneratedSlip(i, kind, op, at) for i, (kind, op, at) in sorted(slips.items())))


def trace_for(split: str, index: int, seed: int, mix: TraceMix = TraceMix()) -> tuple[dict, Trace]:
    """Problem `index` of `split` under `seed` and its trace: the same arguments, the same trace."""
    problem = make_problem(split, index, seed)
    rng = random.Random(f"thinking/{split}/{seed}/{index}")
    return problem, make_trace(World.from_json(problem["world"]), rng, mix)
