"""sample: problems -> responses.

n responses per problem, each one request with its own seed derived from (problem id, sample
index, --seed): a rerun, a resumed run, or n=16 after n=8 gives the same texts for the same ids.
Each text is split into steps, its final answer extracted and graded against the gold answer.

A text with no steps at all (empty or blank: the model stopped at once) cannot be a response.
That sample is drawn again with a fresh seed derived from (problem id, sample index, --seed,
attempt), up to `empty_retries` more times; the attempt is recorded in `generator.attempt`.
If every attempt is blank, the problem fails (exit status 1, named in the summary) rather than
having fewer than n responses written: an input is finished only when all n of its ids exist.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult
from prm_annotate.engines.sampling import Sampling, sampling_record
from prm_annotate.grading.grader import Grader
from prm_annotate.records import Problem, Response
from prm_annotate.pipeline.runner import Outcome
from prm_annotate.pipeline.summary import ENGINE_FAILED, Nouns
from prm_annotate.seeds import derive_seed
from prm_annotate.pipeline.scheduler import Job
from prm_annotate.stages.common import ModelStage, chat, config_settings, system_prompt_file
from prm_annotate.stages.config import SampleConfig, configured
from prm_annotate.steps import split_steps


def response_id(problem_id: str, index: int) -> str:
    return f"{problem_id}/{index}"


class SampleStage(ModelStage):
    name = "sample"
    input_model = Problem
    output_model = Response
    nouns = Nouns("problem", "sampled", output="response",
                  details=(("correct", "correct"), ("truncated", "cut at --max-tokens")))

    def __init__(self, engine: Engine | None, config: SampleConfig | None = None, *, grader: Grader | None = None,
                 empty_retries: int = 2, engine_info: dict[str, Any] | None = None, **settings: Any):
        """`settings` override fields of `config` (SampleStage(engine, n=4) is SampleConfig(n=4))."""
        self.engine = engine
        self.config = configured(config or SampleConfig(), settings)
        self.system_prompt = system_prompt_file(self.config.system_prompt)
        self.grader = grader or Grader()
        self.empty_retries = empty_retries
        self.engine_info = engine_info or {"model": engine.model}
        self.stats: Counter = Counter()

    def settings(self) -> dict[str, Any]:
        return {**self.engine_info, **config_settings(self.config, self.system_prompt),
                "empty_retries": self.empty_retries}

    def output_ids(self, record: Problem) -> list[str]:
        return [response_id(record.id, i) for i in range(self.config.n)]

    def _seed(self, problem_id: str, index: int, attempt: int) -> int:
        # Attempt 0 leaves `attempt` out, so the common case's seed does not depend on the retry scheme.
        if attempt == 0:
            return derive_seed("sample", problem_id, index, self.config.sampling.seed)
        return derive_seed("sample", problem_id, index, self.config.sampling.seed, "retry", attempt)

    def _sampling(self, problem_id: str, index: int, attempt: int) -> Sampling:
        return replace(self.config.sampling, seed=self._seed(problem_id, index, attempt))

    def _request(self, problem: Problem, index: int, attempt: int) -> GenerationRequest:
        return GenerationRequest(
            key=f"{problem.id}\x00{index}\x00{attempt}",
            messages=chat(self.system_prompt.text.strip(), problem.problem),
            sampling=self._sampling(problem.id, index, attempt),
        )

    def job(self, unit: list[Problem]) -> Job:
        """One problem: its n samples, blank ones drawn again, graded when all are in."""
        (problem,) = unit
        todo = list(range(self.config.n))
        got: dict[int, tuple[GenerationResult, int]] = {}
        for attempt in range(self.empty_retries + 1):
            if not todo:
                break
            requests = [self._request(problem, i, attempt) for i in todo]
            results = yield requests
            retry = []
            for index, request in zip(todo, requests):
                result = results[request.key]
                self.stats["prompt_tokens"] += result.prompt_tokens
                self.stats["generated_tokens"] += result.generated_tokens
                if not result.ok:
                    return [Outcome(problem.id, error=f"sample {index}: {result.error}", reason=ENGINE_FAILED)]
                if not split_steps(result.texts[0], self.config.step_sep):
                    self.stats["blank_samples"] += 1
                    retry.append(index)
                else:
                    got[index] = (result, attempt)
            todo = retry
        if todo:
            return [Outcome(problem.id, error=f"sample {todo[0]}: blank text in all {self.empty_retries + 1} attempts",
                            reason="blank in every attempt")]
        texts = [got[i][0].texts[0] for i in range(self.config.n)]
        verdicts = self.grader.grade_many([(problem.answer, t) for t in texts])
        return [Outcome(problem.id, [self._response(problem, i, text, verdict, *got[i])
                                     for i, (text, verdict) in enumerate(zip(texts, verdicts))])]

    def _response(self, problem: Problem, index: int, text: str, verdict: Any, result: GenerationResult,
                  attempt: int) -> Response:
        out = problem.dump()
        out.pop("id")
        finish = result.finish_reasons[0] if result.finish_reasons else None
        self.stats["responses"] += 1
        self.stats["correct"] += verdict.correct is True
        self.stats["truncated"] += finish == "length"
        record: dict[str, Any] = {
            "id": response_id(problem.id, index),
            "problem_id": problem.id,
            **out,
            "steps": split_steps(text, self.config.step_sep),
            "final_answer": verdict.final_answer,
            "correct": verdict.correct,
            "generator": {
                **self.engine_info, **sampling_record(self._sampling(problem.id, index, attempt)),
                "run_seed": self.config.sampling.seed, "sample_index": index,
                "attempt": attempt, "finish_reason": finish, "prompt_tokens": result.prompt_tokens,
                "generated_tokens": result.generated_tokens, "system_prompt": self.system_prompt.name,
                "system_prompt_sha256": self.system_prompt.sha256,
            },
        }
        if verdict.error:  # as `grade` writes it ("no answer" included), so a re-grade changes nothing
            record["grade_error"] = verdict.error
        self.stats["grade_errors"] += verdict.correct is None
        return Response.make(record)

    def close(self) -> None:
        self.grader.close()
