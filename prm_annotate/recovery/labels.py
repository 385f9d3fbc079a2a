"""Labels beyond the first error: every slip of a trace and whether and where it is corrected.

The paper's label is one step, the first error, with every step after it wrong. A reasoning trace
slips, notices, corrects itself and goes on; `Recovery` says so: its slips (0-based step indices
of wrong steps that start an error), each with the step that corrects it or None. The JSON form
(docs/contract.md) is `{"slips": [{"step": 3, "corrected_at": 5}, {"step": 9, "corrected_at": null}]}`,
read by `from_json`, which refuses rather than guesses. The paper's first error is the first
slip's step (`first_error`), so a source's two readings agree wherever both exist.

Step labels from it (`step_labels`, the `recovery` export): a slip is wrong; a step after an
uncorrected slip is wrong (it builds on the error); a correction and the steps after it are right
again, until the next slip.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROLES = ("slip", "correction", "ok")


@dataclass(frozen=True)
class Slip:
    """Attributes:
        step: 0-based index of a wrong step that starts an error.
        corrected_at: the step that corrects it (after `step`), None when the trace never does.
    """

    step: int
    corrected_at: int | None = None


@dataclass(frozen=True)
class Recovery:
    """Attributes:
        slips: the trace's slips, sorted by step, steps distinct; () when it has none.
    """

    slips: tuple[Slip, ...] = ()

    def __post_init__(self) -> None:
        steps = [s.step for s in self.slips]
        if steps != sorted(set(steps)):
            raise ValueError(f"slips must be sorted by step with distinct steps, got steps {steps}")
        for s in self.slips:
            if s.step < 0:
                raise ValueError(f"slip step {s.step} is negative")
            if s.corrected_at is not None and s.corrected_at <= s.step:
                raise ValueError(f"slip at step {s.step} is corrected at {s.corrected_at}, not after it")

    @property
    def corrected(self) -> tuple[Slip, ...]:
        return tuple(s for s in self.slips if s.corrected_at is not None)

    @property
    def uncaught(self) -> tuple[Slip, ...]:
        return tuple(s for s in self.slips if s.corrected_at is None)

    def first_error(self) -> int:
        """The paper's label: the first slip's step, -1 when there is none."""
        return self.slips[0].step if self.slips else -1

    def roles(self, n_steps: int) -> list[str]:
        """Per step: "slip", "correction" (of one or more earlier slips) or "ok". A step that is
        both (a correction that slips again) is a "slip": it is wrong."""
        self.check(n_steps)
        roles = ["ok"] * n_steps
        for s in self.slips:
            if s.corrected_at is not None:
                roles[s.corrected_at] = "correction"
        for s in self.slips:
            roles[s.step] = "slip"
        return roles

    def step_labels(self, n_steps: int) -> list[bool]:
        """Per step, right (True) or wrong: a slip is wrong, and so is every step while a slip is
        open (not yet corrected); a correction closes the slips it corrects and is right."""
        self.check(n_steps)
        open_slips: set[int] = set()
        by_step = {s.step: s for s in self.slips}
        labels = []
        for i in range(n_steps):
            open_slips -= {s.step for s in self.slips if s.corrected_at == i}
            if i in by_step:
                open_slips.add(i)
                labels.append(False)
            else:
                labels.append(not open_slips)
        return labels

    def check(self, n_steps: int) -> None:
        """Raise ValueError when a step index is past the trace's `n_steps` steps."""
        for s in self.slips:
            for name, at in (("step", s.step), ("corrected_at", s.corrected_at)):
                if at is not None and at >= n_steps:
                    raise ValueError(f"slip {name} {at} is out of range for {n_steps} steps")

    def to_json(self) -> dict[str, Any]:
        return {"slips": [{"step": s.step, "corrected_at": s.corrected_at} for s in self.slips]}

    @classmethod
    def from_json(cls, obj: Any, n_steps: int) -> Recovery:
        """The JSON form read strictly: an object with exactly `slips`, a list of objects with
        exactly `step` (integer) and `corrected_at` (integer or null), indices in range, sorted,
        distinct, each correction after its slip. ValueError names what is wrong."""
        if not isinstance(obj, dict) or set(obj) != {"slips"}:
            raise ValueError(f"recovery must be an object with one key, slips; got {_short(obj)}")
        slips = obj["slips"]
        if not isinstance(slips, list):
            raise ValueError(f"recovery.slips must be a list, got {_short(slips)}")
        out = []
        for k, item in enumerate(slips):
            if not isinstance(item, dict) or set(item) != {"step", "corrected_at"}:
                raise ValueError(f"recovery.slips[{k}] must be an object with step and corrected_at, got {_short(item)}")
            step, at = item["step"], item["corrected_at"]
            if not _is_int(step):
                raise ValueError(f"recovery.slips[{k}].step must be an integer, got {step!r}")
            if at is not None and not _is_int(at):
                raise ValueError(f"recovery.slips[{k}].corrected_at must be an integer or null, got {at!r}")
            out.append(Slip(step, at))
        try:
            recovery = cls(tuple(out))
            recovery.check(n_steps)
        except ValueError as exc:
            raise ValueError(f"recovery: {exc}") from None
        return recovery


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
