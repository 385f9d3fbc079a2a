"""score: each step's probability of being right under a Process Reward Model.

Reads responses (`steps`) and writes them back with `prm`: `scores` (P(right) at each step's
tag), `first_error` (the first step scoring below `threshold`, -1 if none: the prediction
`evaluate` and `compare` read as `prm.first_error`), the threshold, the model, and which scorer
read it (`prm.scorer`; over HTTP also `prm.server`). The scorer is one of prm/scorers.py's, chosen
from the checkpoint and `--base-url`. The threshold is the one given, else the one `train` tuned
on its eval set and wrote into the checkpoint, else 0.5. A response the PRM cannot read (too long,
the step tag inside its text, an answer without one score per step) fails alone and is left for a
rerun, never given invented scores.

Its bill is a model stage's (engines/bill.py): one request and its prompt tokens per response, no
decode (a PRM reads a response in one forward pass), at the PRM's size (`--model-params`, else
counted from its config); each record carries its own as `prm.bill`, so a cascade that takes a
PRM as its first judge bills it (judging/cascade.py).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from prm_annotate.engines.bill import Bill, model_params, record_bill
from prm_annotate.errors import UsageError
from prm_annotate.prm.checkpoint import tag_in_text
from prm_annotate.prm.scorers import Scorer
from prm_annotate.records import Response, Scored
from prm_annotate.pipeline.runner import Outcome, StageBase
from prm_annotate.pipeline.summary import ENGINE_FAILED, Nouns
from prm_annotate.evaluation.metrics import first_below
from prm_annotate.settings import setting


@dataclass(frozen=True)
class ScoreConfig:
    """How `score` reads a PRM's step scores (its engine is `EngineConfig`, as `prm.scorers.PRM_ENGINE` says).
    """

    threshold: Optional[float] = setting(None, flags="--threshold", min=0.0, max=1.0, help=(
        "A step scoring below this is an error (prm.first_error); default: the checkpoint's eval-tuned threshold, "
        "else 0.5."))


class ScoreStage(StageBase):
    name = "score"
    input_model = Response
    output_model = Scored
    nouns = Nouns("response", "scored")

    def __init__(self, scorer: Scorer, threshold: float | None = None, engine_info: dict[str, Any] | None = None):
        """`engine_info`: the engine's description (`--model-params` in it bills the run at that size)."""
        self.scorer = scorer
        self.engine_info = {"model": scorer.model, **(engine_info or {})}
        self.threshold_source = "given" if threshold is not None else "checkpoint"
        self.threshold = threshold if threshold is not None else scorer.format.threshold
        self.stats: Counter = Counter()

    def settings(self) -> dict[str, Any]:
        return {"scorer": self.scorer.kind, **self.scorer.settings(), "threshold": self.threshold,
                "threshold_source": self.threshold_source}

    def bill(self) -> Bill:
        """What the run cost so far: its prompt tokens at the PRM's size."""
        return Bill.of(self.stats, *model_params(self.engine_info))

    def process(self, batch: list[Response]) -> Iterable[Outcome]:
        scorer, tag = self.scorer, self.scorer.format.step_tag
        ready: list[tuple[Response, list[int]]] = []
        for r in batch:
            if tag_in_text(scorer.format, r.problem, r.steps):
                yield Outcome(r.id, error=f"the text contains the step tag {tag!r}", reason="with the step tag in the text")
                continue
            ids = scorer.token_ids(r.problem, r.steps)
            if len(ids) > scorer.max_model_len:
                yield Outcome(r.id, error=f"{len(ids)} tokens, max_model_len is {scorer.max_model_len}",
                              reason="over the context")
                continue
            ready.append((r, ids))
        if not ready:
            return
        try:
            probabilities = scorer.step_probabilities([ids for _, ids in ready])
        except UsageError:  # a failure that says its cause and fix (a PRM server gone): the run stops there
            raise
        except Exception as exc:  # the engine's own failure: no record of this batch is finished
            for r, _ in ready:
                yield Outcome(r.id, error=f"engine failed: {type(exc).__name__}: {exc}", reason=ENGINE_FAILED)
            return
        for (r, ids), scores in zip(ready, probabilities):
            if isinstance(scores, str):
                yield Outcome(r.id, error=scores, reason=ENGINE_FAILED)
                continue
            if len(scores) != len(r.steps):
                yield Outcome(r.id, error=f"the PRM returned {len(scores)} scores for {len(r.steps)} steps",
                              reason="not one score per step")
                continue
            cost = Counter(requests=1, prompt_tokens=len(ids))
            self.stats.update(cost)
            out = r.dump()
            out["prm"] = {"scores": scores, "first_error": first_below(scores, self.threshold),
                          "threshold": self.threshold, "model": scorer.model, **scorer.record(),
                          "bill": record_bill(cost)}
            yield Outcome.one(Scored.make(out))
