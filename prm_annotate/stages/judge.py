"""judge: responses -> judged (an LLM finds the first wrong step).

The response's steps are shown as tagged paragraphs in a judge prompt (prompts/judge_paper.txt,
numbered from 1, or prompts/judge_processbench.txt, numbered from 0, or the user's own file with
one of those two answer styles). Each of `votes` verdicts is its own request with a seed from
(record id, vote, --seed); the verdicts are parsed strictly (prm_annotate/judge_parsing.py) and the
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
from typing import Any, Callable, Iterable

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult
from prm_annotate.judge_parsing import STYLES, ParseFailure, Style, aggregate_votes
from prm_annotate.prompt_files import PromptFile, load_prompt
from prm_annotate.prompting import render_judge_prompt
from prm_annotate.records import Judged, Response
from prm_annotate.runner import Outcome, StageBase
from prm_annotate.seeds import derive_seed
from prm_annotate.stages.common import generate

# Room for the longest forced answer ("<conclusion>\nIncorrect: paragraph 1234\n</conclusion>", 52 characters)
# even with a byte-level tokenizer: a cut answer would not parse.
FORCED_ANSWER_TOKENS = 80

JUDGE_PROMPTS = {"paper": "judge_paper.txt", "processbench": "judge_processbench.txt"}


def style_for(prompt: str, style: str | None) -> Style:
    """The answer style: given, or that of the built-in prompt; a custom file defaults to processbench."""
    name = style or (prompt if prompt in STYLES else "processbench")
    return STYLES[name]


class JudgeStage(StageBase):
    name = "judge"
    input_model = Response
    output_model = Judged

    def __init__(self, engine: Engine | None, *, prompt: PromptFile | None = None, style: Style | None = None,
                 votes: int = 1, temperature: float | None = None, top_p: float = 1.0, max_tokens: int = 2048,
                 seed: int = 0, constrained: bool = False, engine_info: dict[str, Any] | None = None):
        self.engine = engine
        self.prompt = prompt or load_prompt("processbench", JUDGE_PROMPTS)
        self.style = style or style_for(self.prompt.name, None)
        if "{paragraphs}" not in self.prompt.text:
            from prm_annotate.errors import UsageError

            raise UsageError(f"{self.prompt.path}: a judge prompt needs a {{paragraphs}} placeholder")
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

    def process(self, batch: list[Response]) -> Iterable[Outcome]:
        jobs = [(record, vote) for record in batch for vote in range(self.votes)]
        requests = [self._request(r, v, stop=(self.style.answer_lead,) if self.constrained else ()) for r, v in jobs]
        results = generate(self.engine, requests)
        texts: dict[str, str] = {}
        tokens: Counter = Counter()
        errors: dict[str, str] = {}
        for (record, vote), request in zip(jobs, requests):
            result = results[request.key]
            self._count(result)
            tokens[record.id] += result.generated_tokens
            if not result.ok:
                errors.setdefault(record.id, f"vote {vote}: {result.error}")
            else:
                texts[request.key] = result.texts[0]
        if self.constrained:
            self._force_answers(jobs, requests, texts, tokens, errors)
        for record in batch:
            if record.id in errors:
                yield Outcome(record.id, error=errors[record.id])
                continue
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
            yield Outcome.one(self._judged(record, votes, failures, texts, tokens))

    def _judged(self, record: Response, votes: list[int | None], failures: list[str], texts: dict[str, str],
                tokens: Counter) -> Judged:
        out = record.dump()
        out["judge"] = {
            "first_error": aggregate_votes(votes), "votes": votes, "parse_failures": len(failures),
            "model": self.engine_info.get("model", self.engine.model), "prompt": self.prompt.name,
            "prompt_sha256": self.prompt.sha256, "style": self.style.name, "constrained": self.constrained,
            "temperature": self.temperature, "generated_tokens": tokens[record.id],
            "outputs": [texts[f"{record.id}\x00{v}"] for v in range(self.votes)],
        }
        if failures:
            out["judge"]["parse_errors"] = failures
        self.stats["no_verdict"] += out["judge"]["first_error"] is None
        return Judged.make(out)

    def _force_answers(self, jobs: list[tuple[Response, int]], requests: list[GenerationRequest],
                       texts: dict[str, str], tokens: Counter, errors: dict[str, str]) -> None:
        """Second pass: continue each free analysis with a forced answer (lead included)."""
        follow: list[GenerationRequest] = []
        for (record, vote), request in zip(jobs, requests):
            if record.id in errors:
                continue
            analysis = texts[request.key]
            follow.append(GenerationRequest(
                key=request.key,
                messages=request.messages + ({"role": "assistant", "content": analysis},),
                continue_final=True, temperature=self.temperature, top_p=self.top_p, max_tokens=FORCED_ANSWER_TOKENS,
                seed=derive_seed("judge-answer", record.id, vote, self.seed),
                guided_regex=self.style.answer_regex(len(record.steps))))
        results = generate(self.engine, follow)
        for request in follow:
            result = results[request.key]
            self._count(result)
            rid = request.key.split("\x00")[0]
            tokens[rid] += result.generated_tokens
            if not result.ok:
                errors.setdefault(rid, f"forced answer: {result.error}")
            else:
                texts[request.key] = request.messages[-1]["content"] + result.texts[0]
