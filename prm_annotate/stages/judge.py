"""judge: responses -> judged (an LLM finds the first wrong step).

The response's steps are shown as tagged paragraphs in a judge prompt (prompts/judge_paper.txt,
the paper's protocol numbered from 1 and the default, or prompts/judge_processbench.txt, numbered
from 0, or the user's own file, which declares its answer style: prm_annotate/judging). The
protocol (`--protocol`, prm_annotate/judging/protocols.py) says how votes are sampled and read:

- `strict` (labels): each of `votes` verdicts is its own request with a seed from (record id,
  vote, --seed); the verdicts are parsed strictly by the style and the majority wins, ties going
  to the earliest error. A vote that cannot be parsed is None in `votes` and counted in
  `parse_failures`; with no parsed vote, `first_error` is null. Such a record is final, like any
  written record: the judge answered, and a rerun with the same seeds would get the same
  unparseable text (with a seeded engine). To try other seeds on them, drop them from the output
  (`jq -c 'select(.judge.first_error != null)'`) and rerun with another --seed.
- `processbench-official` (evaluating critics): the votes are the n samples of one request
  seeded 42, read as ProcessBench's run_eval.py reads them.

A reasoning judge's thought is split off before its verdict is read (`--reasoning`: the engine
splits it, in process with vLLM's reasoning parser or the plain `<think>` split, over HTTP the
server: prm_annotate/thinking/split.py); its tokens are recorded apart from the answer's. A vote
cut at max_tokens (finish reason `length`: a thought with no answer, or a cut answer) is recorded
as cut and never parsed under `strict`.

An answer that thinks again (a `<think>` block after the first `</think>`) and gives a verdict on
each side is read only when its verdicts agree; two different verdicts are refused as unparsed
with that reason (never one of them picked), as two verdicts in one answer are by the style's
parser. Under `--reasoning auto` over HTTP, the first response's first vote is asked alone before
the batch (thinking/probe.py): a thought inside the content (a server with no reasoning parser)
is split here from then on, and an answer that cannot tell stops the run (exit status 2).

Before a record's first vote its prompt is measured against the judge's context
(stages/context_check.py, engines/context.py): a max_tokens that does not fit beside it is clamped
to what does (`judge.max_tokens_clamped`), and a prompt that leaves fewer than `MIN_ROOM` tokens
is refused for good, with its reason, before any vote is paid for; the other records go on.

`constrained` (strict only): the judge writes its analysis freely up to the answer lead
(`\\boxed` or `<conclusion>`, a stop string), then a second request continues that text with the
answer, lead included, forced by a regular expression (vLLM structured outputs): a paragraph index
of this response, or the paper's Correct|Incorrect. What it costs in quality is for the evaluation
to show.

A cascade (`--escalate-from FIRST.jsonl`, judging/cascade.py): before a record's first vote, the
first judge's record of it decides whether its verdict stands (written with no request) or the
record is judged here; `--verdict-logprobs` keeps each vote's verdict probability, a first judge's
confidence.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult
from prm_annotate.engines.bill import charge, record_bill
from prm_annotate.thinking.split import THINK
from prm_annotate.engines.sampling import JUDGE_BUDGET, sampling_record
from prm_annotate.judging.cascade import FIRST, Decision, verdict_logprob
from prm_annotate.stages.cascade import Cascade
from prm_annotate.judging import (JUDGE_PROMPTS, JUDGE_PROTOCOLS, JudgePrompt, Reading, load_judge_prompt, reason_kind,
                                  render_judge_prompt)
from prm_annotate.records import Judged, Response
from prm_annotate.pipeline.runner import Outcome, RunSummary
from prm_annotate.pipeline.summary import ENGINE_FAILED, Nouns
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.pipeline.scheduler import Job
from prm_annotate.stages.common import ModelStage
from prm_annotate.stages.context_check import ContextCheck, clamp
from prm_annotate.stages.config import JudgeConfig, configured, entry
from prm_annotate.thinking.probe import AUTO, UNANSWERED, ProbeAnswer, asked, on_server, probed, template_state
from prm_annotate.judging.styles import one_verdict
from prm_annotate.thinking.tags import CLOSED, answer_parts, thinks_again


@dataclass(frozen=True)
class Vote:
    """One verdict as read: the answer text (the thought split off), the thought, and whether it was
    cut at max_tokens (then never parsed)."""

    text: str
    reasoning: str | None = None
    cut: bool = False

    @staticmethod
    def of(result: GenerationResult, whole: bool = False) -> list["Vote"]:
        """The votes of one result; `whole`: the thought and answer joined again (a protocol that reads
        the whole text, when a server split it)."""
        reasonings = result.reasonings or [None] * len(result.texts)
        finishes = result.finish_reasons or [""] * len(result.texts)
        return [Vote(f"{thought}{text}" if whole and thought is not None else text,
                     thought, finish == "length") for text, thought, finish in zip(result.texts, reasonings, finishes)]


# Room for the longest forced answer ("\\boxed{1234}", "<conclusion>\nIncorrect\n</conclusion>": 36
# characters) even with a byte-level tokenizer: a cut answer would not parse.
FORCED_ANSWER_TOKENS = 80


class JudgeStage(ModelStage):
    name = "judge"
    input_model = Response
    output_model = Judged
    nouns = Nouns("response", "judged", details=(("no_verdict", "without a verdict"),))

    def __init__(self, engine: Engine | None, config: JudgeConfig | None = None, *, prompt: JudgePrompt | str | None = None,
                 engine_info: dict[str, Any] | None = None, cascade: Cascade | None = None, **settings: Any):
        """`settings` override fields of `config` (JudgeStage(engine, votes=3) is JudgeConfig(votes=3));
        `prompt` is a loaded prompt, or a name or file like `config.prompt` (then loaded with `config.style`);
        `cascade`: `config.escalate_from` already read (else it is read here)."""
        if isinstance(prompt, str):
            settings["prompt"], prompt = prompt, None
        self.engine = engine
        self.config = configured(config or JudgeConfig(), settings)
        self.protocol = JUDGE_PROTOCOLS[self.config.protocol]
        self.prompt = prompt or load_judge_prompt(self.config.prompt_choice, self.config.style)
        self.style = self.prompt.style
        self.engine_info = engine_info or {"model": engine.model}
        self.sampling = self.protocol.sampling(self.config, self.engine_info.get("model", ""))
        self.reasoning = self._reasoning_split()
        if self.reasoning is not None and self.config.sampling.max_tokens is None:
            self.sampling = replace(self.sampling, max_tokens=JUDGE_BUDGET.thinking)
        self.context = ContextCheck(engine)
        self.stats: Counter = Counter()
        self.reasons: Counter = Counter()  # why votes were not read, by kind (the summary's tally)
        self.examples: dict[str, str] = {}  # each kind's first reason, whole
        # auto over HTTP: whether the thought comes inside the content is asked of the first answer
        self.probe = (self.reasoning is None and (self.config.reasoning or AUTO) == AUTO and on_server(engine)
                      and "reasoning" not in self.protocol.fixed and not self.config.constrained)
        if self.probe and self.config.sampling.max_tokens is None:
            self.sampling = replace(self.sampling, max_tokens=JUDGE_BUDGET.thinking)
        self.probe_answer: ProbeAnswer | None = None  # its request's answer, for the job that asks it
        c = self.config
        self.cascade = cascade or (Cascade.make(c.escalate_from, c.confidence, c.escalate_below, c.budget)
                                   if c.escalate_from is not None else None)

    def stream(self, records, window):
        if self.probe:
            found, records, self.probe_answer = probed(self.engine, iter(records), self._probe_request, self.name)
            self.reasoning, self.probe = found.split, not found.answered
            if found.split is None and not found.server_splits and self.config.sampling.max_tokens is None:
                self.sampling = self.protocol.sampling(self.config, self.engine_info.get("model", ""))
            self.stats[f"reasoning auto: {found.said}"] += 1
        return super().stream(records, window)

    def _probe_request(self, record: Response) -> GenerationRequest | None:
        """The first vote's request as the record's job would send it (its budget fitted to the context);
        None for a record that will be refused."""
        return self.context.as_sent(self._request(record, 0), what="the judge's prompt")

    def _reasoning_split(self) -> str | None:
        """How each verdict's thought is split from its answer (`GenerationRequest.reasoning`): None
        under a protocol that reads the whole text, `--reasoning off`, or auto where the engine does
        not say its chat template thinks (over HTTP a server's split is still read)."""
        choice = self.config.reasoning or "auto"
        if "reasoning" in self.protocol.fixed or choice == "off":
            return None
        if choice == "auto":
            thinks = getattr(self.engine, "chat_template_thinks", None)
            if self.config.constrained or thinks is None or not thinks():
                return None
            # a template that closes an empty thought in its prompt (thinking off): the whole answer is the verdict
            closed = template_state(self.engine, ({"role": "user", "content": "?"},)) == CLOSED
            return None if closed else THINK
        return choice

    def settings(self) -> dict[str, Any]:
        """The config with what the protocol made of it: the prompt loaded, the sampling resolved."""
        out: dict[str, Any] = dict(self.engine_info)
        sampling = entry(self.sampling)
        for key, value in entry(self.config).items():
            if key == "prompt":
                out["prompt"], out["prompt_sha256"] = self.prompt.name, self.prompt.file.sha256
            elif key == "style":
                out["style"] = self.style.name
            elif key == "reasoning":
                out["reasoning"] = self.reasoning if not self.probe else UNANSWERED
            else:
                out[key] = sampling.get(key, value)
        out["one_request"] = self.protocol.one_request
        if self.cascade is not None:
            out["cascade"] = self.cascade.settings()
        out.update(self.context.settings())
        return out

    def _messages(self, record: Response) -> tuple[dict, ...]:
        text = render_judge_prompt(self.prompt.file.text, record.problem, record.steps, start=self.style.first_paragraph,
                                   problem_as_given=self.protocol.problem_as_given)
        return ({"role": "user", "content": text},)

    def _request(self, record: Response, vote: int, **extra: Any) -> GenerationRequest:
        s = self.sampling
        if self.protocol.one_request:  # every vote from one request under the protocol's own seed
            key, seed, extra["n"] = f"{record.id}\x00votes", s.seed, self.config.votes
        else:
            key, seed = f"{record.id}\x00{vote}", derive_seed("judge", record.id, vote, s.seed)
        return GenerationRequest(key=key, messages=self._messages(record), sampling=replace(s, seed=seed),
                                 reasoning=self.reasoning, logprobs=self.config.verdict_logprobs, **extra)

    def _count(self, result: GenerationResult, cost: Counter) -> None:
        charge(self.stats, result)
        charge(cost, result)  # the record's own (its `bill`)
        if result.reasoning_tokens:
            self.stats["reasoning_tokens"] += result.reasoning_tokens
        if result.reasonings and result.reasoning_tokens is None:
            self.stats["reasoning_untold"] += 1  # requests whose thought's tokens the server did not tell
        if result.reasonings:
            cost["split"] += 1
            cost["reasoning_tokens"] += result.reasoning_tokens or 0
            cost["reasoning_untold"] += result.reasoning_tokens is None

    def job(self, unit: list[Response]) -> Job:
        """One response: its votes (one request each, or one request of n), each constrained vote
        followed by a forced answer, then read by the protocol."""
        (record,) = unit
        escalation = None
        if self.cascade is not None:
            try:
                escalation = self.cascade.decide(record.id, record.steps)
            except ValueError as exc:
                return [Outcome.refused(record.id, str(exc), reason="not in the first judge's file")]
            self.stats[f"cascade: decided by the {escalation[1].by} judge"] += 1
            if escalation[1].by == FIRST:
                self._charge_first(escalation[0])
                return [Outcome.one(Judged.make(self.cascade.stood(record.dump(), *escalation)))]
        stop = (self.style.answer_lead,) if self.config.constrained else ()
        requests = [self._request(record, v, stop=stop)
                    for v in range(1 if self.protocol.one_request else self.config.votes)]
        # Every vote has the same prompt: measured once, before any vote is asked for. A constrained
        # vote's forced answer follows its analysis in the same context.
        fitted = self.context.fit(requests[0], self.stats, what="the judge's prompt",
                                  reserve=FORCED_ANSWER_TOKENS if self.config.constrained else 0)
        if fitted is not None and fitted.refused:
            return [Outcome.refused(record.id, fitted.refused)]
        clamped = fitted.max_tokens if fitted is not None and fitted.clamped else None
        requests = [clamp(r, clamped) for r in requests]
        results = yield from asked(requests, self.probe_answer)
        votes: list[Vote] = []
        logprobs: list[float | None] = []
        cost: Counter = Counter()
        for vote, request in enumerate(requests):
            result = results[request.key]
            self._count(result, cost)
            if not result.ok:
                return [Outcome(record.id, error=f"vote {vote}: {result.error}", reason=ENGINE_FAILED)]
            votes += Vote.of(result, whole="reasoning" in self.protocol.fixed)
            if self.config.verdict_logprobs:  # the thought split off: offsets no longer place the answer
                logprobs += [None if result.reasonings and result.reasonings[i] is not None else
                             verdict_logprob(text, self.style.answer_lead, tokens) for i, (text, tokens) in
                             enumerate(zip(result.texts, result.token_logprobs or [[]] * len(result.texts)))]
        if self.config.constrained:  # every analysis, cut or not, is continued by its forced answer
            follow = [(i, self._forced_answer(record, i, requests[i], v.text)) for i, v in enumerate(votes)]
            results = yield [request for _, request in follow]
            for i, request in follow:
                result = results[request.key]
                self._count(result, cost)
                if not result.ok:
                    return [Outcome(record.id, error=f"forced answer: {result.error}", reason=ENGINE_FAILED)]
                votes[i] = replace(votes[i], text=votes[i].text + result.texts[0],
                                   cut=result.finish_reasons[:1] == ["length"])
        refused: list[str | None] = [None] * len(votes)
        for i, v in enumerate(votes):
            if v.reasoning is not None and thinks_again(v.text) and "reasoning" not in self.protocol.fixed:
                text, refused[i] = one_verdict(answer_parts(v.text), len(record.steps), self.style.read_all)
                if text is not None:
                    votes[i] = replace(v, text=text)
        extra = {"refused": refused} if any(refused) else {}
        reading = self.protocol.read([v.text for v in votes], len(record.steps), self.style,
                                     cut=[v.cut for v in votes], **extra)
        self.stats["votes"] += len(reading.votes)
        self.stats["parse_failures"] += len(reading.errors)
        cut = sum(v.cut for v in votes)
        if cut:
            self.stats["cut_votes"] += cut
        for error in reading.errors:
            self.reasons[reason_kind(error)] += 1
            self.examples.setdefault(reason_kind(error), error)
        return [Outcome.one(self._judged(record, reading, votes, cost, clamped,
                                         logprobs if self.config.verdict_logprobs else None, escalation))]

    def _charge_first(self, block: dict[str, Any]) -> None:
        """The first judge's bill of a record this run wrote, beside this judge's (`first: ...` counters)."""
        for key, value in (block.get("bill") or {}).items():
            self.stats[f"first: {key}"] += value

    def _judged(self, record: Response, reading: Reading, votes: list[Vote], cost: Counter,
                clamped: int | None = None, logprobs: list[float | None] | None = None,
                escalation: tuple[dict[str, Any], Decision] | None = None) -> Judged:
        out = record.dump()
        out["judge"] = {
            "first_error": reading.first_error, "votes": reading.votes, "parse_failures": len(reading.errors),
            "model": self.engine_info.get("model", self.engine.model), "prompt": self.prompt.name,
            "prompt_sha256": self.prompt.file.sha256, "style": self.style.name, "protocol": self.protocol.name,
            "constrained": self.config.constrained, **sampling_record(self.sampling),
            "generated_tokens": cost["generated_tokens"], "prompt_tokens": cost["prompt_tokens"],
            "bill": record_bill(cost),
        }
        if clamped is not None:  # the budget its votes had: max_tokens did not fit beside the prompt
            out["judge"]["max_tokens_clamped"] = clamped
        if cost["split"]:  # the thought's tokens apart from the answer's (null where the server did not tell)
            thought = None if cost["reasoning_untold"] else cost["reasoning_tokens"]
            out["judge"]["reasoning_tokens"] = thought
            out["judge"]["answer_tokens"] = None if thought is None else cost["generated_tokens"] - thought
        out["judge"]["cut"] = sum(v.cut for v in votes)
        out["judge"]["outputs"] = [v.text for v in votes]
        if logprobs is not None:
            out["judge"]["verdict_logprobs"] = logprobs
        if self.config.keep_reasoning and cost["split"]:
            out["judge"]["reasoning"] = [v.reasoning for v in votes]
        out["judge"].update(reading.extra)
        if reading.errors:
            out["judge"]["parse_errors"] = reading.errors
        if escalation is not None and self.cascade is not None:  # the first judge's block kept beside
            self._charge_first(escalation[0])
            self.cascade.escalated(out["judge"], *escalation)
        self.stats["no_verdict"] += out["judge"]["first_error"] is None
        return Judged.make(out)

    def notes(self, summary: RunSummary) -> list[str]:
        """How much of what the judge wrote was read, and why not: the lines before the sentence."""
        stats, votes = self.stats, self.stats["votes"]
        cascade = [] if self.cascade is None else [self.cascade.note(stats)]
        if not votes:
            return cascade

        def share(n: int) -> str:
            return f"{100.0 * n / votes:.1f}%"

        lines = [f"judge: {stats['parse_failures']} of {votes} verdicts could not be parsed "
                 f"({share(stats['parse_failures'])}); {stats['no_verdict']} responses have no verdict"]
        if self.reasons:  # by kind, each with its first reason whole where the kind shortened it
            lines.append("judge: not parsed: " + "; ".join(
                f"{n} {kind}" + (f" (the first: {self.examples[kind]})" if self.examples[kind] != kind else "")
                for kind, n in self.reasons.most_common()))
        if stats["parse_failures"] == votes > stats["cut_votes"]:
            lines.append(self._unread_advice())
        cut = f"judge: {stats['cut_votes']} of {votes} votes cut at --max-tokens ({share(stats['cut_votes'])})"
        if stats["reasoning_untold"]:
            cut += f"; the reasoning's share of the generated tokens untold for {stats['reasoning_untold']} requests"
        elif stats["reasoning_tokens"]:
            cut += (f"; {stats['reasoning_tokens']:,} generated tokens of reasoning, "
                    f"{stats['generated_tokens'] - stats['reasoning_tokens']:,} of answer")
        lines.append(cut)
        return cascade + lines

    def _unread_advice(self) -> str:
        """What a run none of whose verdicts was read says: what it asked for, and what else to ask."""
        choices = ", ".join(f"{name} ({load_judge_prompt(name).style.summary})" for name in JUDGE_PROMPTS)
        return (f"judge: no verdict was read: this run asked for the {self.prompt.name} prompt's answer "
                f"({self.style.summary}) under --protocol {self.protocol.name}; the model may answer "
                f"another prompt's: --prompt {choices}, or a file of your own")

    def _forced_answer(self, record: Response, vote: int, request: GenerationRequest,
                       analysis: str) -> GenerationRequest:
        """The second pass of a constrained vote: its free analysis continued with a forced answer
        (lead included)."""
        return GenerationRequest(
            key=request.key,
            messages=request.messages + ({"role": "assistant", "content": analysis},),
            continue_final=True,
            sampling=replace(self.sampling, max_tokens=FORCED_ANSWER_TOKENS,
                             seed=derive_seed("judge-answer", record.id, vote, self.sampling.seed)),
            guided_regex=self.style.answer_regex(len(record.steps)))
