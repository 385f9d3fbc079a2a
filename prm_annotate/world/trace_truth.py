"""The truth of a thinking trace: its true first error, every slip and whether and where it was
corrected, wrong corrections, and whether its final answer is right.

It reads any text a thinking policy writes (`read_trace`), or a record's steps split into the
thought's and the answer's (`check_trace`), never the generator's record. A trace is paragraphs
(blank-line separated, whitespace-only pieces dropped, as the `paragraphs` rule splits), the
thought's up to `</think>` and the answer's after it; a leading `<think>` is dropped. The
paragraphs are numbered over the thought and then the answer, as the record's `steps` are.

What each paragraph is, in order:

- Equations `a <op> b = c` write operations of the problem. The operation is the one named by the
  closest `Step k:` label before the equation in the paragraph (so "Wait, ... Step 2: 8 - 2 = 6."
  rewrites operation 2), else the one after the operation written last. An equation is right when
  it performs that operation from its TRUE carried value with the right operator, operand and
  arithmetic (for + and * the operands may be swapped) — as `truth.py` checks a step.
- Claims `a <op> b is c` ("Wait, 8 - 2 is 6, not 5.") must be right arithmetic.
- `\\boxed{v}` is an answer: right when every operation has been written and `v` is the true
  answer. In the answer part it ends the trace: a later paragraph is wrong, as in `truth.py`.
- A paragraph with none of these is unreadable (`garbled`), and wrong. So is an equation for an
  operation the problem does not have, or one that skips an operation never written.

A paragraph is right when everything in it is. A wrong paragraph is:

- `propagated` when its only fault is an earlier uncorrected error: it carries the value the trace
  wrote for the previous operation (itself wrong), or repeats the trace's wrong version of the
  same operation (a re-check that confirms a slip), or answers the value the trace ended with;
- otherwise a new error: `wrong_correction` when it rewrites an operation whose version was right,
  else a `slip`.

A right paragraph that rewrites an operation whose version held a slip (or a wrong correction)
corrects it (`correction`); one that repeats a right version is a `recheck`; other right
paragraphs are `step`s (and `answer`). A slip is corrected at the first later paragraph that writes
its operation right (every slip of that operation not yet corrected). A slip that writes no
operation (a wrong claim or answer, a skipped or extra operation) has no `op` and is never corrected.

The paper's label, `first_error`: the first wrong paragraph, -1 when there is none — a slip the
trace corrects is still the first error. Missing answer (no `\\boxed{}` after `</think>`, or no
`</think>` at all: the thought was cut): when every paragraph is right, the last one is the first
error, as in `truth.py`; an empty trace gets 0. The final answer is the `\\boxed{}` of the answer
part; several different ones are no answer (`answer_problem` says why), never one of them picked.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from prm_annotate.recovery.labels import Recovery, Slip
from prm_annotate.world.problems import World, apply_op
from prm_annotate.world.thinking import THINK_CLOSE, THINK_OPEN
from prm_annotate.world.truth import EQUATION, OPS, _COMMUTATIVE, _same_number, _world_of, boxed_values

CLAIM = re.compile(r"(-?\d+)\s*([+\-*x×])\s*(-?\d+)\s+is\s+(-?\d+)")
LABEL = re.compile(r"\bstep\s+(\d+)\s*:", re.IGNORECASE)
RIGHT_KINDS = ("step", "recheck", "correction", "answer")


@dataclass(frozen=True)
class ParagraphTruth:
    index: int
    ok: bool
    kind: str  # step, recheck, correction, answer | slip, wrong_correction, propagated, garbled
    reason: str  # "ok" or why it is wrong
    ops: tuple[int, ...] = ()  # operations (0-based) it writes
    corrects: tuple[int, ...] = ()  # slips (paragraph indices) it corrects


@dataclass(frozen=True)
class SlipTruth:
    index: int
    kind: str  # "slip" or "wrong_correction"
    op: int | None  # the operation it writes wrong (None: a wrong claim or answer)
    corrected_at: int | None


@dataclass(frozen=True)
class TraceTruth:
    paragraphs: tuple[ParagraphTruth, ...]
    thought_steps: int
    finished: bool  # the thought was closed
    first_error: int
    slips: tuple[SlipTruth, ...]
    answer: str | None
    answer_problem: str | None  # why there is no single answer
    final_correct: bool
    notes: tuple[str, ...] = field(default=())

    @property
    def corrected_slips(self) -> list[SlipTruth]:
        return [s for s in self.slips if s.kind == "slip" and s.corrected_at is not None]

    @property
    def uncaught_slips(self) -> list[SlipTruth]:
        return [s for s in self.slips if s.kind == "slip" and s.corrected_at is None]

    @property
    def wrong_corrections(self) -> list[SlipTruth]:
        return [s for s in self.slips if s.kind == "wrong_correction"]

    def recovery(self) -> Recovery:
        """The contract's labels beyond the first error (prm_annotate/recovery/labels.py): every slip and
        wrong correction is a slip, corrected where the truth says; so is a `garbled` paragraph (a
        new error no later paragraph corrects), and the last paragraph of a trace that is right but
        gives no answer (the paper's first error there). So `recovery().first_error()` is
        `first_error`, always. Its indices are the paragraphs', which are the record's steps when it
        was segmented with `paragraphs` (the rule the truth reads by); with a merging segmenter,
        `check_trace` over the record's steps reads each step as one paragraph, and a step holding a
        slip and its correction is read as the slip alone."""
        slips = {s.index: s.corrected_at for s in self.slips}
        slips.update((p.index, None) for p in self.paragraphs if p.kind == "garbled")
        if self.paragraphs and self.first_error not in (-1, *slips):
            slips[self.first_error] = None  # every paragraph right, no answer: the last one
        return Recovery(tuple(Slip(i, at) for i, at in sorted(slips.items())))

    def to_json(self) -> dict:
        return {"first_error": self.first_error, "thought_steps": self.thought_steps,
                "finished": self.finished, "final_correct": self.final_correct, "answer": self.answer,
                "answer_problem": self.answer_problem,
                "kinds": [p.kind for p in self.paragraphs],
                "slips": [{"index": s.index, "kind": s.kind, "op": s.op, "corrected_at": s.corrected_at}
                          for s in self.slips]}


def split_trace(text: str) -> tuple[list[str], list[str], bool]:
    """(thought paragraphs, answer paragraphs, finished): anything up to a first `<think>` is
    dropped (a template may open the thought in the prompt, so it may be absent); no `</think>`
    means the thought was cut, and everything is thought."""
    start = text.find(THINK_OPEN)
    if start != -1 and THINK_CLOSE not in text[:start]:
        text = text[start + len(THINK_OPEN):]
    thought, close, answer = text.partition(THINK_CLOSE)

    def paragraphs(t: str) -> list[str]:
        return [p for p in t.split("\n\n") if p.strip()]

    return paragraphs(thought), paragraphs(answer), bool(close)


def read_trace(problem_record: dict, text: str) -> TraceTruth:
    """The truth of a trace as written (a completion, with or without its opening `<think>`)."""
    thought, answer, finished = split_trace(text)
    return check_trace(problem_record, thought, answer, finished)


def check_trace(problem_record: dict, thought: list[str], answer: list[str], finished: bool = True) -> TraceTruth:
    world = _world_of(problem_record)
    checker = _Checker(world)
    steps = list(thought) + list(answer)
    verdicts: list[ParagraphTruth] = []
    for i, text in enumerate(steps):
        verdicts.append(checker.paragraph(i, text, in_answer=i >= len(thought)))

    answers = [v for p in answer for v in boxed_values(p)] if finished else []
    final, problem = None, None
    if not finished:
        problem = "the thought was not closed"
    elif not answers:
        problem = "no \\boxed{} answer after the thought"
    elif len({a.rstrip(".").strip() for a in answers}) > 1:
        problem = "several different answers"
    else:
        final = answers[0]
    final_correct = final is not None and _same_number(final, world.answer)

    first_error = next((v.index for v in verdicts if not v.ok), -1)
    if not steps:
        first_error = 0
    elif first_error == -1 and final is None:
        first_error = len(steps) - 1
    slips = tuple(SlipTruth(i, kind, op, checker.corrected_at.get(i))
                  for i, (kind, op) in sorted(checker.slips.items()))
    return TraceTruth(tuple(verdicts), len(thought), finished, first_error, slips, final, problem, final_correct)


class _Checker:
    """The trace's state as paragraphs are read: its current version of each operation."""

    def __init__(self, world: World):
        self.world = world
        self.values = world.values()
        self.n = len(world.ops)
        # op -> (equation as written, right?): the trace's current version of it
        self.version: dict[int, tuple[tuple[int, str, int, int], bool]] = {}
        self.open: dict[int, list[int]] = {}  # op -> its slips not yet corrected (paragraphs)
        self.cursor = 0  # the operation an unlabelled equation writes
        self.answered = False
        self.slips: dict[int, tuple[str, int | None]] = {}
        self.corrected_at: dict[int, int] = {}

    def _wrong(self, i: int, kind: str, reason: str, ops=(), op: int | None = None) -> ParagraphTruth:
        if kind in ("slip", "wrong_correction"):
            self.slips[i] = (kind, op)
        return ParagraphTruth(i, False, kind, reason, tuple(ops))

    def paragraph(self, i: int, text: str, in_answer: bool) -> ParagraphTruth:
        if self.answered:
            return self._wrong(i, "garbled", "paragraph after the final answer")
        items = sorted([(m.start(), "label", m) for m in LABEL.finditer(text)]
                       + [(m.start(), "eq", m) for m in EQUATION.finditer(text)])
        claims = CLAIM.findall(text)
        boxed = boxed_values(text)
        if not any(kind == "eq" for _, kind, _ in items) and not claims and not boxed:
            return self._wrong(i, "garbled", "no equation, claim or answer")

        label: int | None = None
        ops, corrects, kinds = [], [], []
        for _, what, m in items:
            if what == "label":
                label = int(m.group(1)) - 1
                continue
            k = self.cursor if label is None else label
            label = None
            if k < 0 or k >= self.n:
                return self._wrong(i, "slip", "extra operation", ops, None)
            if k > len(self.version) or (k > 0 and k - 1 not in self.version):
                return self._wrong(i, "slip", f"skips operation {len(self.version) + 1}", ops, None)
            a, sym, b, c = m.groups()
            eq = (int(a), OPS[sym], int(b), int(c))
            ok, reason = self._check(k, eq)
            before = self.version.get(k)
            ops.append(k)
            self.cursor = k + 1
            if ok:
                held = self.open.pop(k, [])
                for slip in held:
                    self.corrected_at[slip] = i
                corrects += held
                kinds.append("correction" if held
                             else "recheck" if before and before[1] and before[0] == eq else "step")
                self.version[k] = (eq, True)
                continue
            if self._propagated(k, eq, before):
                self.version[k] = (eq, False)
                kinds.append("propagated")
                continue
            kind = "wrong_correction" if before and before[1] else "slip"
            self.version[k] = (eq, False)
            self.open.setdefault(k, []).append(i)
            return self._wrong(i, kind, reason, ops, k)

        # A wrong claim with right equations is a new error of its own (its equations, checked
        # first, name the kind when they are wrong too: "Wait, 8 - 2 is 7, not 6. Step 2: 8 - 2 = 7.").
        for a, sym, b, c in claims:
            if apply_op(OPS[sym], int(a), int(b)) != int(c):
                return self._wrong(i, "slip", f"wrong claim {a} {sym} {b} is {c}", ops)

        for v in boxed:
            if len(boxed) > 1:
                return self._wrong(i, "slip", "several answers", ops)
            if len(self.version) < self.n:
                return self._wrong(i, "slip", "answer before all operations (skipped operation)", ops)
            if not _same_number(v, self.world.answer):
                last = self.version[self.n - 1]
                if not last[1] and _same_number(v, last[0][3]):
                    return self._wrong(i, "propagated", "answers the trace's wrong value", ops)
                return self._wrong(i, "slip", f"wrong final answer (expected {self.world.answer})", ops)
            kinds.append("answer")
        if boxed and in_answer:
            self.answered = True

        if "propagated" in kinds:
            return ParagraphTruth(i, False, "propagated", "carries an earlier error", tuple(ops), tuple(corrects))
        for kind in ("correction", "answer", "step", "recheck"):
            if kind in kinds:
                return ParagraphTruth(i, True, kind, "ok", tuple(ops), tuple(corrects))
        return ParagraphTruth(i, True, "step", "ok", tuple(ops), tuple(corrects))  # right claims only

    def _check(self, k: int, eq) -> tuple[bool, str]:
        a, op, b, c = eq
        want_op, want_n = self.world.ops[k]
        carried = self.values[k]
        if op != want_op:
            return False, f"wrong operator (expected {want_op})"
        if (a, b) != (carried, want_n) and not (op in _COMMUTATIVE and (b, a) == (carried, want_n)):
            if carried not in (a, b):
                return False, f"wrong carried value (expected {carried})"
            return False, f"wrong operand (expected {want_n})"
        if c != apply_op(op, a, b):
            return False, f"wrong arithmetic (expected {apply_op(op, a, b)})"
        return True, "ok"

    def _propagated(self, k: int, eq, before) -> bool:
        """Wrong only through an earlier uncorrected error: it repeats the trace's wrong version
        of this operation, or performs it right from the trace's wrong value of the one before."""
        if before and not before[1] and before[0] == eq:
            return True
        prev = self.version.get(k - 1) if k else None
        if not prev or prev[1]:
            return False
        a, op, b, c = eq
        want_op, want_n = self.world.ops[k]
        held = prev[0][3]
        operands = (a, b) == (held, want_n) or (op in _COMMUTATIVE and (b, a) == (held, want_n))
        return op == want_op and operands and c == apply_op(op, a, b)
