"""A response's one score from its step scores: the aggregates `bon` selects by and the reward
server and verl's `compute_score` reward by, one registry for both (`reward-server --aggregate`).

`prod` was called `product` by the reward server: that name is still taken, with a note.
`mean` is a selection rule of `bon` only, not offered as an RL reward: a policy could raise its
reward by padding a response with easy steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from prm_annotate.registry import Registry
from prm_annotate.recovery.rules import SoftDrop

# Step 0 has no step before it: below this reward it is a slip (the PRM calls it more likely wrong).
RECOVERED_FIRST_STEP = 0.5


def recovered_min(scores: list[float]) -> float:
    """The weakest step the trace does not correct (the `recovered` aggregate)."""
    recovery = SoftDrop().read(scores, RECOVERED_FIRST_STEP)
    spared = {i for s in recovery.corrected for i in range(s.step, s.corrected_at)}  # type: ignore[arg-type]
    return min(x for i, x in enumerate(scores) if i not in spared)  # a correction is never spared


@dataclass(frozen=True)
class Aggregate:
    name: str
    summary: str
    of: Callable[[list[float]], float]
    reward: bool = True  # offered as an RL reward (the reward server, verl)

    def __call__(self, scores: list[float]) -> float:
        return self.of(scores)


AGGREGATES: Registry[Aggregate] = Registry(
    "--aggregate", "A response's reward from its step rewards", "docs/rl-reward.md", (
    Aggregate("min", "the weakest step", min),
    Aggregate("prod", "the product of the step scores (every step right at once)", math.prod),
    Aggregate("last", "the final step's score", lambda scores: scores[-1]),
    Aggregate("mean", "the mean step score", lambda scores: sum(scores) / len(scores), reward=False),
    Aggregate("recovered", "the weakest step the trace does not correct (a slip corrected later is spared)",
              recovered_min),
), renamed={"product": "prod"})
DEFAULT_AGGREGATE = "min"
BON_AGGREGATES = ("min", "last", "prod", "mean")  # what `bon` compares, in its table's order


def reward_aggregate(name: str) -> Aggregate | None:
    """The aggregate `name` if it is offered as a reward (an old name taken); None if not."""
    kind = AGGREGATES.get(AGGREGATES.canonical(name))
    return kind if kind is not None and kind.reward else None


def reward_names() -> str:
    return AGGREGATES.where(lambda a: a.reward)
