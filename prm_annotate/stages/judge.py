"""judge: responses -> judged (an LLM finds the first wrong step).

The response's steps are shown as tagged paragraphs in a judge prompt (prompts/judge_paper.txt,
numbered from 1, or prompts/judge_processbench.txt, numbered from 0, or the user's own file with
one of those two answer styles). Each of `votes` verdicts is its own request with a seed from
(record id, vote, --seed); the verdicts are parsed strictly (prm_annotate/judging/parsing.py) and the
majority wins, ties going to the earliest error. A vote that cannot be parsed is None in `votes`
and counted in `parse_failures`; with no parsed vote, `first_error` is null. Such a record is
final, like any written record: the judge answered, and a rerun with the same seeds would get the
same unparseable text (with a seeded engine). To try other seeds on them, drop them from the output
(`jq -c 'select(.judge.first_error != null)'`) and rerun with another --seed.

`constrained`: the judge writes its analysis freely up to the answer lead (`\\boxed` or
`<conclusion>`, a stop string), then a second request continues that text with the answer, lead
included, forced by a regular expression (vLLM structured outputs) to a paragraph number of this
response. The verdict then
always parses; what it costs in quality is for the evaluation to show.

Temperature defaults to 0 (greedy) for a single vote and 0.7 for several: identical greedy
votes would make voting pointless.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult
from prm_annotate.judging.parsing import STYLES, ParseFailure, Style, aggregate_votes
from prm_annotate.prompt_files import JUDGE_PROMPTS, PromptFile, check_judge_template, load_prompt, render_judge_prompt
from prm_annotate.records import Judged, Response
from prm_annotate.pipeline.runner import Outcome
from prm_annotate.seeds import derive_seed
from prm_annotate.pipeline.scheduler import Job
from prm_annotate.stages.common import ModelStage

# Room for the longest forced answer ("<conclusion>\nIncorrect: paragraph 1234\n</conclusion>", 52 characters)
# even with a byte-level tokenizer: a cut answer would not parse.
FORCED_ANSWER_TOKENS = 80


def style_for(prompt: str, style: str | None) -> Style:
    """The answer style: given, or that of the built-in prompt; a custom file defaults to processbench."""
    name = style or (prompt if prompt in STYLES else "processbench")
    return STYLES[name]


class JudgeStage(ModelStage):
    name = "judge"
    input_model = Response
    output_model = Judged

    def __init__(self, engine: Engine | None, *, prompt: PromptFile | None = None, style: Style | None = None,
                 votes: int = 1, temperature: float | None = None, top_p: float = 1.0, max_tokens: int = 2048,
                 seed: int = 0, constrained: bool = False, engine_info: dict[str, Any] | None = None):
        self.engine = engine
        self.prompt = prompt or load_prompt("processbench", JUDGE_PROMPTS)
        self.style = style or style_for(self.prompt.name, None)
        check_judge_template(self.prompt.text, self.prompt.path)
        self.votes = votes
        self.temperature = temperature if temperature is not None else (0.0 if votes == 1 else 0.7)
        self.top_p, self.max_tokens, self.seed, self.constrained = top_p, max_tokens, seed, constrained
        self.engine_info = engine_info or {"model": engine.model}
        self.stats: Counter = Counter()

    def settings(self) -> dict[str, Any]:
        return {**self.engine_info, "prompt": self.prompt.name, "prompt_sha256": self.prompt.sha256,
                "style": self.style.name, "votes": self.votes, "temperature": self.temperature, "top_p": self.top_p,
                "max_tokens": self.max_tokens, "seed": self.seed, "constrained": self.constrained}

    def _messages(self, record: Response) -> tuple[dict, ...]:
        text = render_judge_prompt(self.prompt.text, record.problem, record.steps, start=self.style.first_paragraph)
        return ({"role": "user", "content": text},)

    def _request(self, record: Response, vote: int, **extra: Any) -> GenerationRequest:
        return GenerationRequest(
            key=f"{record.id}\x00{vote}", messages=self._messages(record), temperature=self.temperature,
            top_p=self.top_p, max_tokens=self.max_tokens, seed=derive_seed("judge", record.id, vote, self.seed),
            **extra)

    def _count(self, result: GenerationResult) -> None:
        self.stats["prompt_tokens"] += result.prompt_tokens
        self.stats["cached_prompt_tokens"] += result.cached_prompt_tokens or 0
        self.stats["generated_tokens"] += result.generated_tokens

    def job(self, unit: list[Response]) -> Job:
        """One response: its votes, each (constrained) followed by a forced answer, then parsed."""
        (record,) = unit
        requests = [self._request(record, v, stop=(self.style.answer_lead,) if self.constrained else ())
                    for v in range(self.votes)]
        results = yield requests
        texts: dict[str, str] = {}
        tokens = 0
        for vote, request in enumerate(requests):
            result = results[request.key]
            self._count(result)
            tokens += result.generated_tokens
            if not result.ok:
                return [Outcome(record.id, error=f"vote {vote}: {result.error}")]
            texts[request.key] = result.texts[0]
        if self.constrained:
            follow = [self._forced_answer(record, vote, request, texts[request.key])
                      for vote, request in enumerate(requests)]
            results = yield follow
            for request in follow:
                result = results[request.key]
                self._count(result)
                tokens += result.generated_tokens
                if not result.ok:
                    return [Outcome(record.id, error=f"forced answer: {result.error}")]
                texts[request.key] = request.messages[-1]["content"] + result.texts[0]
        votes: list[int | None] = []
        failures: list[str] = []
        for vote in range(self.votes):
            try:
                votes.append(self.style.parse(texts[f"{record.id}\x00{vote}"], len(record.steps)))
            except ParseFailure as exc:
                votes.append(None)
                failures.append(str(exc))
        self.stats["votes"] += len(votes)
        self.stats["parse_failures"] += len(failures)
        return [Outcome.one(self._judged(record, votes, failures, texts, tokens))]

    def _judged(self, record: Response, votes: list[int | None], failures: list[str], texts: dict[str, str],
                tokens: int) -> Judged:
        out = record.dump()
        out["judge"] = {
            "first_error": aggregate_votes(votes), "votes": votes, "parse_failures": len(failures),
            "model": self.engine_info.get("model", self.engine.model), "prompt": self.prompt.name,
            "prompt_sha256": self.prompt.sha256, "style": self.style.name, "constrained": self.constrained,
            "temperature": self.temperature, "generated_tokens": tokens,
            "outputs": [texts[f"{record.id}\x00{v}"] for v in range(self.votes)],
        }
        if failures:
            out["judge"]["parse_errors"] = failures
        self.stats["no_verdict"] += out["judge"]["first_error"] is None
        return Judged.make(out)

    def _forced_answer(self, record: Response, vote: int, request: GenerationRequest,
                       analysis: str) -> GenerationRequest:
        """The second pass of a constrained vote: its free analysis continued with a forced answer
        (lead included)."""
        return GenerationRequest(
            key=request.key,
            messages=request.messages + ({"role": "assistant", "content": analysis},),
            continue_final=True, temperature=self.temperature, top_p=self.top_p, max_tokens=FORCED_ANSWER_TOKENS,
            seed=derive_seed("judge-answer", record.id, vote, self.seed),
            guided_regex=self.style.answer_regex(len(record.steps)))
