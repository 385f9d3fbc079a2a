"""sample: problems -> responses.

n responses per problem, each one request with its own seed derived from (problem id, sample
index, --seed): a rerun, a resumed run, or n=16 after n=8 gives the same texts for the same ids.
Each text is split into steps, its final answer extracted and graded against the gold answer.

A text with no steps at all (empty or blank: the model stopped at once) cannot be a response.
That sample is drawn again with a fresh seed derived from (problem id, sample index, --seed,
attempt), up to `empty_retries` more times; the attempt is recorded in `generator.attempt`.
If every attempt is blank, the problem fails (exit status 1, named in the summary) rather than
having fewer than n responses written: an input is finished only when all n of its ids exist.

A thinking policy (`reasoning`, thinking/probe.py): each completion is read as a thought and an
answer (prm_annotate/thinking/tags.py), its steps are the thought's then the answer's (`thought_steps`,
`step_joins`), its tokens counted apart (`generator.thought_tokens`, `answer_tokens`), and only
the answer is graded (thinking/grading.py): a thought with no `</think>` is kept with
`thought_finished: false` and never graded, and an answer that thinks again and answers
differently is refused (`correct` null, `grade_error` saying so).

Before a problem's first request its prompt is measured against the model's context
(stages/context_check.py): a budget that does not fit beside it is clamped (the record's
`generator.max_tokens_clamped`), a prompt that leaves no room refuses the problem for good.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult
from prm_annotate.engines.bill import charge, record_bill
from prm_annotate.engines.sampling import Sampling, sampling_record
from prm_annotate.thinking.split import THINK
from prm_annotate.grading.grader import Grader
from prm_annotate.thinking.grading import TWO_ANSWERS, grade_traces
from prm_annotate.records import Problem, Response
from prm_annotate.pipeline.runner import Outcome
from prm_annotate.pipeline.summary import ENGINE_FAILED, Nouns
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.pipeline.scheduler import Job
from prm_annotate.stages.common import ModelStage, chat, config_settings, system_prompt_file
from prm_annotate.stages.config import SampleConfig, configured, reasoning_budget
from prm_annotate.stages.context_check import ContextCheck, clamp
from prm_annotate.thinking.probe import (AUTO, OFF, UNANSWERED, ProbeAnswer, asked, engine_thinks, on_server, probed,
                                          template_state, thought_tokens, trace_of)
from prm_annotate.segmenting import Segmented, segment_trace
from prm_annotate.thinking.tags import CLOSED, MODEL, Trace
from prm_annotate.errors import UsageError


def response_id(problem_id: str, index: int) -> str:
    return f"{problem_id}/{index}"


class SampleStage(ModelStage):
    name = "sample"
    input_model = Problem
    output_model = Response
    nouns = Nouns("problem", "sampled", output="response",
                  details=(("correct", "correct"), ("truncated", "cut at --max-tokens"),
                           ("unfinished_thoughts", "with an unfinished thought, never graded"),
                           ("two_answers", "with two different answers, refused")))

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
        self.context = ContextCheck(engine)
        self.probe_answer: ProbeAnswer | None = None  # its request's answer, for the job that asks it
        self.segmenter = self.config.segmenter()
        self.logprobs = self.config.keep_logprobs or self.segmenter.needs_logprobs
        self.sampling = self.config.sampling
        self.split, self.state = self._thinking()
        self.probe = self.split is None and (self.config.reasoning or AUTO) == AUTO and on_server(engine)
        if self.split is not None or self.probe:  # a probe looks with the budget a thought needs
            self.sampling = reasoning_budget(self.sampling)

    def _thinking(self) -> tuple[str | None, str]:
        """How completions are split (None: not; THINK: here; a parser's name: by the engine or
        server) and where the thought starts (thinking.tags.PROMPT_STATES)."""
        choice = self.config.reasoning or AUTO
        if choice == OFF or self.engine is None:
            return None, CLOSED
        state = template_state(self.engine, chat(self.system_prompt.text.strip(), "?")) or MODEL
        if choice == AUTO:
            return (THINK, state) if engine_thinks(self.engine) and state != CLOSED else (None, CLOSED)
        if state == CLOSED:  # the template switched thinking off: the whole completion is the answer
            return None, CLOSED
        return choice, state

    def settings(self) -> dict[str, Any]:
        out = {**self.engine_info, **config_settings(self.config, self.system_prompt),
               "segmenter": self.segmenter.record(), "empty_retries": self.empty_retries}
        out["max_tokens"] = self.sampling.max_tokens
        out["reasoning"] = self.split if not self.probe else UNANSWERED
        out["thought_state"] = self.state if not self.probe else None  # not seen: no answer came back
        out.update(self.context.settings())
        return out

    def stream(self, records, window):
        if self.probe:
            found, records, self.probe_answer = probed(self.engine, iter(records), self._probe_request, self.name)
            self.split, self.state, self.probe = found.split, found.state, not found.answered
            if self.split is None and not found.server_splits:
                self.sampling = self.config.sampling
            self.stats[f"reasoning auto: {found.said}"] += 1
        return super().stream(records, window)

    def _probe_request(self, problem: Problem) -> GenerationRequest | None:
        """The problem's first request as its job sends it (fitted to the context); None: refused."""
        return self.context.as_sent(self._request(problem, 0, 0), what="the problem's prompt")

    def output_ids(self, record: Problem) -> list[str]:
        return [response_id(record.id, i) for i in range(self.config.n)]

    def _seed(self, problem_id: str, index: int, attempt: int) -> int:
        # Attempt 0 leaves `attempt` out, so the common case's seed does not depend on the retry scheme.
        if attempt == 0:
            return derive_seed("sample", problem_id, index, self.config.sampling.seed)
        return derive_seed("sample", problem_id, index, self.config.sampling.seed, "retry", attempt)

    def _sampling(self, problem_id: str, index: int, attempt: int) -> Sampling:
        return replace(self.sampling, seed=self._seed(problem_id, index, attempt))

    def _request(self, problem: Problem, index: int, attempt: int, max_tokens: int | None = None) -> GenerationRequest:
        """Sample `index`'s request (`max_tokens`: the budget clamped to the context; None: as configured)."""
        return clamp(GenerationRequest(
            key=f"{problem.id}\x00{index}\x00{attempt}",
            messages=chat(self.system_prompt.text.strip(), problem.problem),
            sampling=self._sampling(problem.id, index, attempt),
            reasoning=self.split if self.split not in (None, THINK) else None,
            logprobs=self.logprobs,
        ), max_tokens)

    def job(self, unit: list[Problem]) -> Job:
        """One problem: its n samples, blank ones drawn again, graded when all are in."""
        (problem,) = unit
        # Every sample has the same prompt: measured once, before any is asked for.
        fitted = self.context.fit(self._request(problem, 0, 0), self.stats, what="the problem's prompt")
        if fitted is not None and fitted.refused:
            return [Outcome.refused(problem.id, fitted.refused)]
        clamped = fitted.max_tokens if fitted is not None and fitted.clamped else None
        todo = list(range(self.config.n))
        got: dict[int, tuple[GenerationResult, int]] = {}
        paid: dict[int, Counter] = {}
        for attempt in range(self.empty_retries + 1):
            if not todo:
                break
            requests = [self._request(problem, i, attempt, clamped) for i in todo]
            results = yield from asked(requests, self.probe_answer)
            retry = []
            for index, request in zip(todo, requests):
                result = results[request.key]
                thought = thought_tokens(self.engine, self._trace(result), result) if result.ok else None
                charge(self.stats, result, thought)
                charge(paid.setdefault(index, Counter()), result, thought)  # a blank redrawn: its response pays
                if not result.ok:
                    return [Outcome(problem.id, error=f"sample {index}: {result.error}", reason=ENGINE_FAILED)]
                if not self._made(self._trace(result), result).steps:
                    self.stats["blank_samples"] += 1
                    retry.append(index)
                else:
                    got[index] = (result, attempt)
            todo = retry
        if todo:
            return [Outcome(problem.id, error=f"sample {todo[0]}: blank text in all {self.empty_retries + 1} attempts",
                            reason="blank in every attempt")]
        traces = [self._trace(got[i][0]) for i in range(self.config.n)]
        cut = [got[i][0].finish_reasons[:1] == ["length"] for i in range(self.config.n)]
        verdicts = grade_traces(self.grader, [problem.answer] * len(traces), traces, cut)
        return [Outcome(problem.id, [self._response(problem, i, trace, verdict, *got[i], clamped, paid=paid[i])
                                     for i, (trace, verdict) in enumerate(zip(traces, verdicts))])]

    def _trace(self, result: GenerationResult) -> Trace:
        return trace_of(result, 0, self.state, self.split)

    def _response(self, problem: Problem, index: int, trace: Trace, verdict: Any, result: GenerationResult,
                  attempt: int, clamped: int | None = None, paid: Counter | None = None) -> Response:
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
            **self._steps(trace, result),
            "final_answer": verdict.final_answer,
            "correct": verdict.correct,
            "generator": {
                **self.engine_info, **sampling_record(self._sampling(problem.id, index, attempt)),
                "run_seed": self.config.sampling.seed, "sample_index": index,
                "attempt": attempt, "finish_reason": finish, "prompt_tokens": result.prompt_tokens,
                "generated_tokens": result.generated_tokens, "system_prompt": self.system_prompt.name,
                "system_prompt_sha256": self.system_prompt.sha256, "bill": record_bill(paid or {}),
            },
        }
        if clamped is not None:  # the budget its completion had: --max-tokens did not fit the context
            record["generator"]["max_tokens_clamped"] = clamped
        if trace.thinks:
            thought = thought_tokens(self.engine, trace, result)
            record["generator"]["thought_tokens"] = thought
            record["generator"]["answer_tokens"] = None if thought is None else result.generated_tokens - thought
            self.stats["unfinished_thoughts"] += not trace.finished
            self.stats["two_answers"] += bool(verdict.error and verdict.error.startswith(TWO_ANSWERS))
        if verdict.error:  # as `grade` writes it ("no answer" included), so a re-grade changes nothing
            record["grade_error"] = verdict.error
        self.stats["grade_errors"] += verdict.correct is None
        return Response.make(record)

    def _steps(self, trace: Trace, result: GenerationResult) -> dict[str, Any]:
        """The record's steps; a thinking policy's with where the thought ends and whether it did."""
        made = self._made(trace, result)
        out: dict[str, Any] = {"steps": made.steps}
        if self.split is not None or trace.thinks:
            out["thought_steps"] = made.thought_steps
            out["thought_finished"] = trace.finished if trace.thinks else None
        if made.record_joins is not None:
            out["step_joins"] = made.record_joins
        out["segmenter"] = self.segmenter.record()
        if self.logprobs:
            out["token_logprobs"] = (made.record_tokens(result.token_logprobs[0])
                                     if result.token_logprobs and made.spans else None)
        return out

    def _made(self, trace: Trace, result: GenerationResult) -> Segmented:
        """The trace's steps by the run's segmenter (segmenting/texts.py); `confidence` reads the
        tokens' offsets into the completion's text."""
        tokens = result.token_logprobs[0] if result.token_logprobs else None
        if tokens is None and self.segmenter.needs_logprobs:
            raise UsageError(f"--segment {self.segmenter.name} needs the sampled tokens' log-probabilities, and "
                             f"the engine ({self.engine_info.get('model')}) returned none")
        return segment_trace(trace, self.segmenter, tokens)

    def close(self) -> None:
        self.grader.close()
