"""A PRM's step scores as an RL reward: per-step rewards and one aggregate per response, computed
through `score`'s own machinery (the score stage over a `prm.scorers` scorer, in process or behind
`vllm serve`), so a reward equals what `score` writes for the same response.

Aggregates (`reports.aggregates.AGGREGATES`): `min` (the weakest step; the default), `prod` (every step right),
`last` (the final step's score), `recovered` (the weakest step the trace does not correct: `min`
over the steps left when each slip the trace corrects, and the steps until its correction, are
set aside; a slip and its correction read from the step rewards by MC's `soft-drop` rule,
recovery/rules.py: a drop of 0.25 against the step before, or step 0 below 0.5, and a
later rise of 0.25). Under `min` a corrected slip costs as much as an uncorrected one; under
`recovered` a trace that corrects its slip and answers right scores above the same trace without
the correction (docs/rl-reward.md). A response the PRM cannot read (no steps, the step tag in its text,
longer than the model's context, an answer without one score per step) gets no scores; the caller
decides what reward stands for it (the server: `fallback_reward`, with the reason beside it).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

from pydantic import ValidationError

from prm_annotate.prm.scorers import Scorer
from prm_annotate.records import Response
from prm_annotate.reports.aggregates import AGGREGATES, DEFAULT_AGGREGATE, recovered_min  # noqa: F401 (recovered_min: its home's name)
from prm_annotate.stages.score import ScoreStage

ENGINE_FAILED = "engine failed"  # how the score stage words a batch the engine did not score


class EngineFailure(RuntimeError):
    """The PRM's engine failed on a batch: no reward of it is given."""


@dataclass(frozen=True)
class Item:
    """One response to reward.

    Attributes:
        problem: the question, as the PRM reads it (the user turn).
        steps: the response split into steps.
    """
    problem: str
    steps: list[str]


@dataclass(frozen=True)
class Reward:
    """A response's reward.

    Attributes:
        step_rewards: P(right) at each step, as `score` writes them (None: not scored).
        error: why it was not scored (None when it was).
    """
    step_rewards: list[float] | None
    error: str | None = None

    def aggregate(self, name: str) -> float | None:
        return None if self.step_rewards is None else float(AGGREGATES[name](self.step_rewards))


class RewardScorer:
    """Step rewards for batches of responses from one scorer; thread-safe (one batch at a time on
    the engine, as the engine wants)."""

    def __init__(self, scorer: Scorer):
        self.scorer = scorer
        self.stage = ScoreStage(scorer)
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return self.scorer.model

    def rewards(self, items: Sequence[Item]) -> list[Reward]:
        """One `Reward` per item, in order; a batch is one engine call."""
        out: list[Reward | None] = [None] * len(items)
        records = []
        for i, item in enumerate(items):
            try:
                records.append(Response(id=str(i), problem=item.problem, steps=item.steps))
            except ValidationError as exc:
                out[i] = Reward(None, "; ".join(e["msg"] for e in exc.errors()))
        with self._lock:
            outcomes = list(self.stage.process(records)) if records else []
        for outcome in outcomes:
            i = int(outcome.id)
            if outcome.error is not None and outcome.error.startswith(ENGINE_FAILED):
                # The score stage leaves such a batch for a rerun; a trainer must not read rewards from it.
                raise EngineFailure(outcome.error)
            if outcome.error is not None:
                out[i] = Reward(None, outcome.error)
            else:
                out[i] = Reward(list(outcome.records[0].dump()["prm"]["scores"]))
        return [r if r is not None else Reward(None, "not scored") for r in out]

    def close(self) -> None:
        self.scorer.close()
