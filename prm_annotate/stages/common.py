"""What the model-using stages share: running on the scheduler, and the chat they send."""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Iterator

from prm_annotate.engines.base import Engine
from prm_annotate.engines.bill import Bill, model_params
from prm_annotate.errors import UsageError
from prm_annotate.grading.grader import Grader
from prm_annotate.io.prompt_files import DEFAULT_SYSTEM_PROMPT, SYSTEM_PROMPTS, PromptFile, load_prompt
from prm_annotate.records import Record
from prm_annotate.pipeline.runner import Outcome, StageBase
from prm_annotate.pipeline.scheduler import Job, one_unit_each, run_jobs
from prm_annotate.stages.config import entry


class ModelStage(StageBase):
    """A stage whose work is rounds of generation. It says what one unit of input does (`job`, a
    generator of request rounds: see prm_annotate/pipeline/scheduler.py); the scheduler keeps many units
    in flight on the engine."""

    engine: Engine
    stats: Counter
    speculate: int = 0  # start a round's `ahead` requests while fewer than this many are in flight
    grader: Grader | None = None  # grades what the engine writes (sample, rollout)

    def units(self, records: Iterable[Record]) -> Iterator[list[Any]]:
        """The input cut into units that run as one job; by default every record alone."""
        return one_unit_each(records)

    def job(self, unit: list[Any]) -> Job:
        raise NotImplementedError

    def stream(self, records: Iterator[Record], window: int) -> Iterator[list[Outcome]]:
        if self.grader is not None:
            self.grader.start(wait=False)  # math-verify loads while the first requests generate
        return self._stopping(run_jobs(self.engine, self.units(records), self.job, window=window,
                                       speculate=self.speculate, stats=self.stats))

    def _stopping(self, outcomes: Iterator[list[Outcome]]) -> Iterator[list[Outcome]]:
        """The outcomes; a run the engine stops (a server gone: UsageError) says so in its manifest's
        stats, beside the counts of what it finished."""
        try:
            yield from outcomes
        except UsageError as exc:
            self.stats[f"stopped: {exc}"] += 1
            raise

    def bill(self) -> Bill:
        """What the run cost so far (engines/bill.py): its tokens at its model's size."""
        info = getattr(self, "engine_info", None) or {"model": self.engine.model}
        return Bill.of(self.stats, *model_params(info))

    def process(self, batch: list[Any]) -> list[Outcome]:
        return [o for outcomes in self.stream(iter(batch), max(1, len(batch))) for o in outcomes]


def chat(system_prompt: str | None, problem: str, partial: str | None = None) -> tuple[dict, ...]:
    """The conversation a policy (or completer) sees; `partial` is an assistant turn to continue."""
    messages: list[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": problem})
    if partial is not None:
        messages.append({"role": "assistant", "content": partial})
    return tuple(messages)


def system_prompt_file(choice: str | None) -> PromptFile:
    """The policy's system prompt: a built-in name, a file, or "none"; the built-in default if None."""
    return load_prompt(choice or DEFAULT_SYSTEM_PROMPT, SYSTEM_PROMPTS, allow_none=True)


def config_settings(config: Any, system_prompt: PromptFile) -> dict[str, Any]:
    """A policy stage's config as its manifest records it: the system prompt by name and sha256."""
    out: dict[str, Any] = {}
    for key, value in entry(config).items():
        if key == "system_prompt":
            out["system_prompt"], out["system_prompt_sha256"] = system_prompt.name, system_prompt.sha256
        else:
            out[key] = value
    return out
