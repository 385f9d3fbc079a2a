"""MC's reading of slips a trace later corrects (`rollout --recovery-rule`), written as `mc.recovery`.

Hard MC cannot see a corrected slip: completions from the prefix after it still reach the answer,
so its score stays above 0 and the paper's label calls it right. The soft score (the share of K
completions that reach the answer, every step probed: the exhaustive strategy) still drops at a
slip, since some completions carry the error on, and rises again once the trace has corrected it.

- `soft-drop` (drop d, default 0.25): step i > 0 is a slip when its score is at least d below the
  step before's (s[i] <= s[i-1] - d); step 0, which has no step before it, when it is hard MC's 0
  (s[0] <= the hard threshold). The slips still open are corrected at the first later step whose
  score rises at least d above the step before's (s[j] >= s[j-1] + d); a slip no rise follows is
  never caught. A step that is a slip corrects nothing. How well it finds the truth on the thinking
  world: docs/recovery.md.

`mc.first_error` stays hard MC's (the paper's); the rule's first slip may come before it (a slip
the trace corrected), so `mc.recovery.first_error()` is not `mc.first_error`: two readings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from prm_annotate.errors import UsageError
from prm_annotate.recovery.labels import Recovery, Slip
from prm_annotate.registry import Registry

DEFAULT_DROP = 0.25


@dataclass(frozen=True)
class RecoveryRule:
    name: ClassVar[str]
    summary: ClassVar[str]

    def read(self, scores: list[float], threshold: float) -> Recovery:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        return {"name": self.name}


@dataclass(frozen=True)
class SoftDrop(RecoveryRule):
    name: ClassVar[str] = "soft-drop"
    summary: ClassVar[str] = "a slip where the soft score drops by DROP against the step before, corrected at a rise by DROP"
    drop: float = DEFAULT_DROP

    def read(self, scores: list[float], threshold: float) -> Recovery:
        slips: dict[int, Optional[int]] = {}
        open_: list[int] = []
        for i, s in enumerate(scores):
            if s is None:
                raise ValueError(f"step {i} has no score: --recovery-rule reads every step's (--strategy exhaustive)")
            before = scores[i - 1] if i else None
            if (before is None and s <= threshold) or (before is not None and s <= before - self.drop):
                slips[i] = None
                open_.append(i)
            elif before is not None and s >= before + self.drop and open_:
                for j in open_:
                    slips[j] = i
                open_ = []
        return Recovery(tuple(Slip(i, at) for i, at in sorted(slips.items())))

    def settings(self) -> dict[str, Any]:
        return {"name": self.name, "drop": self.drop}


RECOVERY_RULES: Registry[type[RecoveryRule]] = Registry(
    "--recovery-rule", "MC's reading of slips and their corrections, written as mc.recovery (needs --strategy "
    "exhaustive)", "docs/recovery.md", (SoftDrop,))


def make_recovery_rule(name: str, drop: float | None = None) -> RecoveryRule:
    kind = RECOVERY_RULES.named(name)
    if drop is not None and not 0.0 < drop <= 1.0:
        raise UsageError(f"--recovery-drop {drop}: must be in (0, 1]")
    return kind() if drop is None else kind(drop)
