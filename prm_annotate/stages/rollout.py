"""rollout: responses -> rollouts (Monte Carlo estimation of each step's value).

For step i the completer continues the response's own assistant turn from the prefix
`join(steps[: i + 1]) + sep` (the conversation the policy saw, the partial answer left open), so
all completions of a response share one cached prefix. Each completion is graded against the
gold answer on the whole text (prefix + completion): the solution that continuation makes.
Which probes run is the strategy's business (prm_annotate/strategies); each record (or, with
shared prefixes, each problem's group of responses) is one job on the scheduler: its next round
goes to the engine as soon as its last round is back and graded, while other records generate.

Decisions:
- The completer continues under the system prompt the policy saw: the one the response records
  (`generator.system_prompt`, checked against `generator.system_prompt_sha256`). `--system-prompt`
  must be that one unless `--force-system-prompt`: a different one is bad input (exit 2, file and
  line). A response without that record (not written by `sample`) is continued under
  `--system-prompt`, else the default. `mc.system_prompt` names what was used.
- The last step is never rolled out: the response's own graded answer decides it (score 1.0 or
  0.0; this project's rule, the paper does not say). If the input's `correct` is null (not
  graded), the response is graded here.
- A completion the grader cannot decide counts as not correct; `mc.grade_errors` counts them.
- A completion cut at --max-tokens counts as `cut_completions` says: `graded` (as its text is
  graded, like any other: most have no final answer and are wrong), `wrong` or `right`.
  `mc.cut[i]` counts step i's cut completions (null where none was made); the stage counts the
  first errors at a step with a cut completion (`first_errors_at_cut_steps`), since a cut can
  move a first error earlier, and those at the last step of a response that was itself cut.
- `--label soft` is recorded as `mc.label` and needs a strategy that scores every step; export
  takes the scores as targets only with its own `--soft`. `first_error` always follows the hard
  rule, score > threshold.
- Any failed engine request of a record fails the whole record (left for a rerun): never
  partial labels.
- Each completion is its own n=1 request with a seed from (response id, step, completion index,
  --seed): vLLM's n>1 under one seed does not give prefix-stable samples, and this way K=16
  repeats the 8 completions of K=8 and adds 8 new ones.
- `share_prefixes=True`: a completion's seed comes from what it continues (problem text, step
  prefix text, completion index, --seed) instead of the response id, so responses of one problem
  with identical step prefixes ask for identical completions; each is generated and graded once
  per problem and its result handed to every response that asked (also to a later round's ask).
  Sharing is among consecutive responses of the same problem and answer (as `sample` writes them):
  they run as one unit, in rounds, so what is shared and witnessed does not depend on timing,
  `--batch-size` or which other records are in flight.
  A record's `mc.completions`/`generated_tokens` count every completion its labels rest on,
  `mc.shared_completions` how many of them another response paid for; the stage's
  `engine_completions` and `generated_tokens` count what the engine did.
  With a strategy that `uses_witnesses` (binary, scan), sharing also uses witnesses: a prefix
  whose exact text (the text the completion would continue, the join after the step included)
  begins a solution known to reach the gold answer (a correct response of the problem, a prefix
  + a right completion) is answered as a 1 without sampling (`Witnesses`: no text is cut into
  steps again); the record's `mc.witnessed` lists those steps.
- A strategy that `needs_judged` (verify) reads `--judged` whole before any work (`JudgedFile`:
  a bad line is exit 2; a judged record holding other steps for a response's id is bad input at
  the response's line) and plans each response from its judge verdict; the record says what MC
  found of it (`mc.verified`), the claim (`mc.judge_first_error`) and the file's sha256
  (`mc.judged_sha256`, also in the manifest with its path), so a resume against another judged
  file can be refused.
- A thinking response (`thought_steps` set, prm_annotate/thinking/tags.py): the prefix of step j is
  its steps joined by `step_joins` (the join after the thought's last step holds `</think>`),
  after `<think>\n` where the template's generation prompt does not open the thought itself; in
  process it is appended raw to the generation prompt (`append_raw`), so a template that strips
  thoughts from assistant turns (Qwen3's, R1's) never strips the prefix being continued, and a
  prefix inside the thought is continued as that thought (never a second `<think>`). Each
  completion's answer is read after `</think>` (thinking/grading.py): a completion that never
  closed its thought has no answer (wrong, or as `--cut-completions` says when cut; counted in
  `mc.cut_in_thought`). A response whose thought is unfinished (`thought_finished: false`) or
  that has no single answer is set aside (no record, its reason counted in the summary): its
  last step has no answer to label. Max tokens left at 2,048 rise to 32,768 for thinking
  responses.
- Before a record's first request its longest prefix (through the last step a strategy may
  probe, the one before the last) is measured against the completer's context
  (stages/context_check.py, engines/context.py). A --max-tokens that does not fit beside it is
  clamped to what does for every completion of the record, so its steps' scores rest on one
  budget (`mc.max_tokens_clamped`; with shared prefixes the budget is part of the completion's
  key, so records of other budgets do not share it); a prefix that leaves fewer than `MIN_ROOM`
  tokens is refused for good, with its reason, before any completion is paid for, while the
  other records (of its problem too) go on.
- `--zero-rule` other than the default (all-k: a 0 needs all K to fail) is passed to the plans of
  the strategies that sample in rounds; the records say which rule and prior called their 0s
  (`mc.zero_rule`), and default records are as before.
"""
from __future__ import annotations

import bisect
import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator

import orjson
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult
from prm_annotate.engines.bill import charge, record_bill
from prm_annotate.engines.sampling import sampling_record
from prm_annotate.errors import UsageError
from prm_annotate.grading.grader import Grader
from prm_annotate.io.prompt_files import NO_PROMPT, SYSTEM_PROMPTS, PromptFile
from prm_annotate.records import Response, Rollout
from prm_annotate.pipeline.runner import Outcome, RunSummary
from prm_annotate.pipeline.summary import ENGINE_FAILED, Nouns
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.pipeline.scheduler import Job, Round, one_unit_each
from prm_annotate.stages.common import ModelStage, chat, config_settings, system_prompt_file
from prm_annotate.grading.grader import Verdict
from prm_annotate.thinking.grading import TWO_ANSWERS, UNFINISHED, finished_by_length, grade_traces
from prm_annotate.stages.config import RolloutConfig, configured, reasoning_budget
from prm_annotate.stages.context_check import ContextCheck
from prm_annotate.thinking.probe import template_state
from prm_annotate.segmenting.texts import record_trace
from prm_annotate.thinking.tags import MODEL, continuation_opening, read_trace, written_state
from prm_annotate.stages.judged_file import JudgedFile
from prm_annotate.steps import join_steps, prefix_text
from prm_annotate.strategies import Plan, Probe, ProbeResult, get_strategy
from prm_annotate.strategies.verify import OUTCOMES
from prm_annotate.strategies.zero_rules import ALL_K


class RolloutInput(Response):
    """A response with its gold answer: rollouts grade against it."""

    answer: str = Field(min_length=1)


class CompletionPrompts:
    """The system prompt each response is continued under (see the module's decisions). Each
    (name, sha256) a response records is resolved once."""

    def __init__(self, choice: str | None, force: bool = False):
        self.given = system_prompt_file(choice) if choice is not None else None
        self.force = force
        self._resolved: dict[tuple[Any, Any], PromptFile] = {}

    def for_record(self, record: Response) -> PromptFile:
        """ValueError when the prompt the response was sampled under cannot be used."""
        generator = (record.model_extra or {}).get("generator")
        generator = generator if isinstance(generator, dict) else {}
        name, sha = generator.get("system_prompt"), generator.get("system_prompt_sha256")
        if not isinstance(sha, (str, type(None))):
            raise ValueError(f"generator.system_prompt_sha256 must be a string, got {sha!r}")
        recorded = (name if isinstance(name, str) else None, sha)
        if recorded not in self._resolved:
            self._resolved[recorded] = self._resolve(*recorded)
        return self._resolved[recorded]

    def resolved(self) -> dict[str, str]:
        """Name -> sha256 of every prompt resolved so far: those of the input, once it is validated."""
        return {p.name: p.sha256 for p in self._resolved.values()}

    def _resolve(self, name: str | None, sha: str | None) -> PromptFile:
        said = f"{name!r} (sha256 {str(sha)[:12]})" if name is not None else f"sha256 {str(sha)[:12]}"
        if self.given is not None:
            if sha is None or sha == self.given.sha256 or self.force:
                return self.given
            raise ValueError(f"the response was sampled under the system prompt {said}, not --system-prompt "
                             f"{self.given.name} (sha256 {self.given.sha256[:12]}): leave --system-prompt out to "
                             "continue under the response's own, or add --force-system-prompt")
        if sha is None:
            return system_prompt_file(None)
        candidates = [name] if name is not None else []
        candidates += [n for n in (*SYSTEM_PROMPTS, NO_PROMPT) if n != name]  # by sha256, whatever the name
        for candidate in candidates:
            try:
                prompt = system_prompt_file(candidate)
            except UsageError:  # a file named by the response that is not here
                continue
            if prompt.sha256 == sha:
                return prompt
        raise ValueError(f"the response was sampled under the system prompt {said}, which is neither built in nor "
                         "found as it was: give it with --system-prompt FILE")


def rollout_input_model(prompts: CompletionPrompts, judged: JudgedFile | None = None) -> type[RolloutInput]:
    """`RolloutInput` that also refuses a response whose system prompt `prompts` cannot continue
    under, or (verify) whose judged record holds other steps, so the runner reports it as bad input
    (file and line, exit 2) before any work."""

    class CheckedRolloutInput(RolloutInput):
        @model_validator(mode="after")
        def _system_prompt(self) -> "CheckedRolloutInput":
            try:
                prompts.for_record(self)
                if judged is not None:
                    judged.check(self)
            except ValueError as exc:
                raise PydanticCustomError("system_prompt", "{reason}", {"reason": str(exc)}) from None
            return self

    return CheckedRolloutInput


@dataclass
class _Work:
    record: RolloutInput
    plan: Plan
    last_correct: bool
    completions: int = 0
    generated_tokens: int = 0
    grade_errors: int = 0
    cut_in_thought: int = 0
    shared: int = 0  # of the completions, those another response (or an earlier round) paid for
    paid: Counter = field(default_factory=Counter)  # the requests this record paid for (engines/bill.py)
    error: str | None = None
    refused: bool = False  # the error is permanent: the record does not fit the context
    max_tokens: int | None = None  # the completions' budget, clamped to the context; None: --max-tokens
    probes: list[Probe] = field(default_factory=list)
    cut: dict[int, int] = field(default_factory=dict)  # step -> its cut completions, for steps with completions
    kept: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # step -> completions kept (keep_completions)

    @property
    def truncated(self) -> int:
        """The completions cut at their budget, over every step."""
        return sum(self.cut.values())


class RolloutStage(ModelStage):
    name = "rollout"
    input_model = RolloutInput
    output_model = Rollout
    nouns = Nouns("response", "labelled", details=(("first_error_found", "with a first error"),))

    def __init__(self, engine: Engine | None, config: RolloutConfig | None = None, *, grader: Grader | None = None,
                 engine_info: dict[str, Any] | None = None, judged_file: JudgedFile | None = None, **settings: Any):
        """`settings` override fields of `config` (RolloutStage(engine, k=4) is RolloutConfig(k=4));
        `strategy` may also be a `Strategy` object (one not in the registry: tests, experiments).
        `judged_file`: `config.judged` already read (else it is read here, for a strategy that needs it)."""
        given = settings.get("strategy")
        if given is not None and not isinstance(given, str):
            settings["strategy"] = given.name
        config = configured(config or RolloutConfig(), settings)
        if config.speculate is None:
            config = replace(config, speculate=0)
        self.config = config
        self.engine = engine
        self._aside: dict[str, str] = {}  # id -> why a response of the unit in flight cannot be labelled
        self.strategy = get_strategy(config.strategy, config.label) if given is None or isinstance(given, str) else given
        self.speculate = config.speculate
        self.zero_rule = config.zero_rule_object
        self.prompts = CompletionPrompts(config.system_prompt, config.force_system_prompt)
        self.judged: JudgedFile | None = None
        if getattr(self.strategy, "needs_judged", False):  # a duck-typed strategy may not say
            if config.judged is None:
                raise UsageError(f"--strategy {self.strategy.name} needs --judged")
            self.judged = judged_file or JudgedFile.load(config.judged)
        self.input_model = rollout_input_model(self.prompts, self.judged)
        self.grader = grader or Grader()
        self.context = ContextCheck(engine)
        self.engine_info = engine_info or {"model": engine.model}
        self.stats: Counter = Counter()
        self._states: dict[str, str] = {}

    def settings(self) -> dict[str, Any]:
        given = self.prompts.given
        out = {**self.engine_info, **config_settings(self.config, given or system_prompt_file(None))}
        if given is None:
            out["system_prompt"], out["system_prompt_sha256"] = "the responses' own", None
        if self.judged is not None:
            out["judged"] = self.judged.settings()
        else:
            del out["judged"]
        del out["zero_tolerance"]
        del out["recovery_drop"]
        rule = self.config.recovery_rule_object
        if rule is None:  # a run without it records what it always did
            del out["recovery_rule"]
        else:
            out["recovery_rule"] = rule.settings()
        out["zero_rule"] = self.zero_rule.settings()  # with its prior and tolerance
        # The input is validated (in this process, also under Ray) before the manifest is written.
        out["system_prompts_used"] = self.prompts.resolved()
        out.update(self.context.settings())
        return out

    def completion_seed(self, response_id: str, step: int, index: int) -> int:
        return derive_seed("rollout", response_id, step, index, self.config.sampling.seed)

    def shared_seed(self, problem: str, prefix: str, index: int) -> int:
        return derive_seed("rollout-prefix", problem, prefix, index, self.config.sampling.seed)

    def _state(self, system_prompt: PromptFile, problem: str) -> str:
        """The thought state of the completer's generation prompt (MODEL over HTTP), once per system prompt."""
        if system_prompt.sha256 not in self._states:
            state = template_state(self.engine, chat(system_prompt.text.strip(), problem)) if self.engine else None
            self._states[system_prompt.sha256] = state or MODEL
        return self._states[system_prompt.sha256]

    def _prefix(self, record: RolloutInput, step: int, system_prompt: PromptFile) -> str:
        if record.thought_steps is None:
            return prefix_text(record.steps, record.step_joins, step, self.config.step_sep)
        opening = continuation_opening(self._state(system_prompt, record.problem), record.thought_steps,
                                       join_steps(record.steps, record.step_joins, self.config.step_sep))
        return opening + prefix_text(record.steps, record.step_joins, step, self.config.step_sep)

    def _request(self, record: RolloutInput, probe: Probe, max_tokens: int | None = None) -> GenerationRequest:
        """`max_tokens`: the record's budget where the context clamped it."""
        system_prompt = self.prompts.for_record(record)
        prefix = self._prefix(record, probe.step, system_prompt)
        if self.config.share_prefixes:
            seed = self.shared_seed(record.problem, prefix, probe.index)
            # The key names the content (and the gold answer it is graded against): equal keys are
            # the same completion with the same verdict.
            content = [record.problem, prefix, probe.index, record.answer, system_prompt.sha256]
            key = hashlib.blake2b(orjson.dumps(content + ([max_tokens] if max_tokens is not None else [])),
                                  digest_size=16).hexdigest()
        else:
            seed = self.completion_seed(record.id, probe.step, probe.index)
            key = f"{record.id}\x00{probe.step}\x00{probe.index}"
        thinking = record.thought_steps is not None
        sampling = reasoning_budget(self.config.sampling) if thinking else self.config.sampling
        return GenerationRequest(
            key=key, messages=chat(system_prompt.text.strip(), record.problem, prefix), continue_final=True,
            sampling=replace(sampling, seed=seed, **({} if max_tokens is None else {'max_tokens': max_tokens})),
            append_raw=thinking,
        )

    def _fit(self, w: _Work) -> _Work:
        """Measure the record's longest prefix against the context before its first request: clamp
        its budget, or refuse it (module decisions)."""
        last = len(w.record.steps) - 2  # the last step is never rolled out
        if last < 0:
            return w
        fitted = self.context.fit(self._request(w.record, Probe(last, 0)), self.stats,
                                  what=f"the longest prefix (through step {last})")
        if fitted is not None and fitted.refused:
            w.error, w.refused = fitted.refused, True
        elif fitted is not None and fitted.clamped:
            w.max_tokens = fitted.max_tokens
        return w

    def _counted(self, verdict: Any, cut: bool) -> bool | None:
        """What a graded completion counts as: its verdict, unless it was cut and --cut-completions
        says otherwise."""
        if cut and self.config.cut_completions != "graded":
            return self.config.cut_completions == "right"
        return verdict.correct

    def _set_aside(self, record: RolloutInput) -> str | None:
        """Why a thinking response cannot be labelled (None: it can): its last step has no answer."""
        if record.unfinished_thought:
            return UNFINISHED
        error = (record.model_extra or {}).get("grade_error")
        if record.correct is None and isinstance(error, str) and error.startswith(TWO_ANSWERS):
            return TWO_ANSWERS
        return None

    def _trace(self, record: RolloutInput):
        return record_trace(record.steps, record.step_joins, record.thought_steps, record.thought_finished,
                            self.config.step_sep)

    def _grade_completions(self, pairs: list[tuple[str, str, bool, bool]]) -> list[Verdict]:
        """(gold, prefix + completion, thinking, cut) -> verdicts; a thinking completion by its answer
        only, one that never closed its thought has none (wrong); a cut one by an answer it closed
        before the cut only (answers.extract_final_answer)."""
        plain = [i for i, (_, _, thinking, _) in enumerate(pairs) if not thinking]
        out: dict[int, Verdict] = dict(zip(plain, self.grader.grade_many([pairs[i][:2] for i in plain],
                                                                         [pairs[i][3] for i in plain])))
        thinking = [i for i in range(len(pairs)) if i not in out]
        traces = [read_trace(pairs[i][1], written_state(pairs[i][1])) for i in thinking]
        for i, trace, verdict in zip(thinking, traces, grade_traces(self.grader, [pairs[i][0] for i in thinking],
                                                                    traces, [pairs[i][3] for i in thinking])):
            out[i] = Verdict(None, False, UNFINISHED) if not trace.finished else verdict
        return [out[i] for i in range(len(pairs))]

    def _last_correct(self, batch: list[RolloutInput]) -> list[bool]:
        ungraded = [r for r in batch if r.correct is None]
        verdicts = grade_traces(self.grader, [r.answer for r in ungraded], [self._trace(r) for r in ungraded],
                                [finished_by_length(r) for r in ungraded])
        graded = {r.id: v.correct is True for r, v in zip(ungraded, verdicts)}
        self.stats["responses_graded_here"] += len(ungraded)
        return [r.correct if r.correct is not None else graded[r.id] for r in batch]

    def units(self, records: Iterable[RolloutInput]) -> Iterator[list[RolloutInput]]:
        """With shared prefixes, the consecutive responses of one problem (same problem text and
        answer) are one unit: they share completions and witnesses. Otherwise each response alone."""
        if not self.config.share_prefixes:
            yield from one_unit_each(records)
            return
        group: list[RolloutInput] = []
        for record in records:
            if group and (record.problem, record.answer, self.prompts.for_record(record).sha256) != (
                    group[0].problem, group[0].answer, self.prompts.for_record(group[0]).sha256):
                yield group
                group = []
            group.append(record)
        if group:
            yield group

    def job(self, unit: list[RolloutInput]) -> Job:
        """The rounds of one unit: every plan's next probes at once, graded when they are all back."""
        order = [r.id for r in unit]
        unit = self._labellable(unit)
        work = [self._fit(_Work(r, self._plan(r, last), last)) for r, last in zip(unit, self._last_correct(unit))]
        # Completed (and graded) requests of this unit by key, for sharing across rounds.
        done: dict[str, tuple[GenerationResult, Any]] = {}
        # Thinking responses share completions (keyed by exact prefix text), not witnesses: a witness
        # inside a thought has not been measured against the thinking world's truth (docs/pipeline.md).
        use_witnesses = (self.config.share_prefixes and self.strategy.uses_witnesses
                         and all(w.record.thought_steps is None for w in work))
        witnesses = Witnesses()
        if use_witnesses:
            for w in work:
                if w.last_correct:
                    witnesses.add(join_steps(w.record.steps, w.record.step_joins, self.config.step_sep))
        while True:
            asks: dict[str, list[tuple[_Work, Probe]]] = {}
            requests: dict[str, GenerationRequest] = {}
            by_work: dict[int, list[ProbeResult]] = {}
            for w in work:
                if w.error is None:
                    for probe in w.plan.next_round():
                        if use_witnesses and w.plan.takes_witness(probe.step) and self._witnessed(
                                witnesses, w.record, probe.step):
                            by_work.setdefault(id(w), []).append(ProbeResult(probe, True, 0, witness=True))
                            continue
                        request = self._request(w.record, probe, w.max_tokens)
                        if request.key in asks and not self.config.share_prefixes:
                            raise RuntimeError(f"strategy asked twice for {probe} of {w.record.id}")
                        asks.setdefault(request.key, []).append((w, probe))
                        if request.key not in done:
                            requests.setdefault(request.key, request)
            if not asks and not by_work:
                break
            self.stats["rounds"] += 1
            ahead, spare = (self._guesses(work, requests, done, witnesses if use_witnesses else None)
                            if self.speculate and requests else ([], []))
            results = (yield Round(list(requests.values()), ahead, spare)) if requests else {}
            ok_keys: list[str] = []
            for key, result in results.items():
                charge(self.stats, result)
                charge(asks[key][0][0].paid, result)  # the first asker pays; the others share it
                self.stats["engine_completions"] += result.ok
                if result.ok:
                    ok_keys.append(key)
            verdicts = self._grade_completions(
                [(asks[key][0][0].record.answer, requests[key].messages[-1]["content"] + results[key].texts[0],
                  asks[key][0][0].record.thought_steps is not None, _cut(results[key])) for key in ok_keys])
            for key, verdict in zip(ok_keys, verdicts):
                done[key] = (results[key], verdict)
                # A witness is a solution that reached the answer by its own text (a cut one too, unless
                # --cut-completions wrong), never a cut text only counted right.
                if use_witnesses and verdict.correct is True and self._counted(verdict, _cut(results[key])) is True:
                    witnesses.add(requests[key].messages[-1]["content"] + results[key].texts[0])
            for key, askers in asks.items():
                for n, (w, probe) in enumerate(askers):
                    if key not in done:
                        w.error = w.error or f"step {probe.step} completion {probe.index}: {results[key].error}"
                        continue
                    result, verdict = done[key]
                    cut = _cut(result)
                    counted = self._counted(verdict, cut)
                    w.completions += 1
                    w.shared += n > 0 or key not in results  # another response (or an earlier round) paid
                    w.generated_tokens += result.generated_tokens
                    w.cut[probe.step] = w.cut.get(probe.step, 0) + cut
                    w.cut_in_thought += cut and verdict.error == UNFINISHED
                    if counted is None:
                        w.grade_errors += 1
                    self._keep(w, probe.step, result.texts[0], counted, cut)
                    by_work.setdefault(id(w), []).append(ProbeResult(probe, counted, result.generated_tokens))
            for w in work:
                if w.error is None:
                    w.plan.observe(by_work.get(id(w), []))
        return self._outcomes(work, order)

    def _labellable(self, unit: list[RolloutInput]) -> list[RolloutInput]:
        """The unit without the responses set aside (counted by reason)."""
        kept = []
        for record in unit:
            why = self._set_aside(record)
            if why is None:
                kept.append(record)
            else:
                self.stats[f"set aside: {why}"] += 1
                self._aside[record.id] = why
        return kept

    def _outcomes(self, work: list[_Work], order: list[str]) -> list[Outcome]:
        """In input order; a response set aside is done with no record (not a failure)."""
        outcomes = {w.record.id: (Outcome.refused(w.record.id, w.error) if w.refused else
                                  Outcome(w.record.id, error=w.error, reason=ENGINE_FAILED)) if w.error is not None
                    else Outcome.one(self._rollout(w)) for w in work}
        return [outcomes.get(rid) or Outcome(rid, reason=self._aside.pop(rid, None)) for rid in order]

    def _keep(self, w: _Work, step: int, text: str, counted: bool | None, cut: bool) -> None:
        """A completion's text kept for the record while its step has fewer than `keep_completions`."""
        if len(w.kept.get(step, ())) < self.config.keep_completions:
            w.kept.setdefault(step, []).append({"text": text, "correct": counted, "cut": cut})

    def _plan(self, record: RolloutInput, last_correct: bool) -> Plan:
        extra = {"judged": self.judged.claim(record.id)} if self.judged is not None else {}
        if self.zero_rule != ALL_K:
            extra["zero_rule"] = self.zero_rule
        return self.strategy.plan(len(record.steps), self.config.k, self.config.threshold, last_correct, **extra)

    def _guesses(self, work: list[_Work], requests: dict[str, GenerationRequest], done: dict[str, Any],
                 witnesses: "Witnesses | None") -> tuple[list[GenerationRequest], list[GenerationRequest]]:
        """Requests the plans may ask for in later rounds, for the scheduler to start early while
        the engine has room (`speculate`): their `ahead` probes, and their `spare` ones not
        already among those."""
        found: tuple[dict[str, GenerationRequest], dict[str, GenerationRequest]] = ({}, {})
        for w in work:
            if w.error is None:
                for kind, probes in zip(found, (w.plan.ahead(), w.plan.spare())):
                    for probe in probes:
                        if witnesses is not None and w.plan.takes_witness(probe.step) and self._witnessed(
                                witnesses, w.record, probe.step):
                            continue
                        request = self._request(w.record, probe, w.max_tokens)
                        if request.key not in requests and request.key not in done:
                            kind.setdefault(request.key, request)
        ahead, spare = found
        return list(ahead.values()), [r for key, r in spare.items() if key not in ahead]

    def _witnessed(self, witnesses: "Witnesses", record: RolloutInput, step: int) -> bool:
        return self._prefix(record, step, self.prompts.for_record(record)) in witnesses

    def close(self) -> None:
        self.grader.close()

    def notes(self, summary: RunSummary) -> list[str]:
        """The completions and what cut ones did to the labels (and verify's outcomes): before the sentence."""
        if not summary.written:
            return []
        s = self.stats
        lines = [f"rollout: {s['completions']:,} completions, {s['completions_cut']:,} of them cut at --max-tokens "
                 f"(counted {self.config.cut_completions}); {s['first_error_found']} of {summary.written} responses "
                 f"have a first error, {s['first_errors_at_cut_steps']} of them at a step with cut completions "
                 f"and {s['first_errors_at_cut_responses']} at the last step of a response cut at sample's "
                 f"--max-tokens; {s['grade_errors']} completions could not be graded"]
        if s["completions_cut_in_thought"]:
            lines.append(f"rollout: {s['completions_cut_in_thought']:,} completions cut inside their thought (no answer)")
        if self.judged is not None:
            lines.append("rollout --strategy verify: " + ", ".join(f"{s[f'verified: {o}']} {o}" for o in OUTCOMES)
                         + " (consensus keeps the confirmed)")
        return lines

    def _rollout(self, w: _Work) -> Rollout:
        result = w.plan.result()
        n_steps = len(w.record.steps)
        cut = [w.cut.get(step) for step in range(n_steps)]
        system_prompt = self.prompts.for_record(w.record)
        self.stats["completions"] += w.completions
        self.stats["completions_cut"] += w.truncated
        self.stats["grade_errors"] += w.grade_errors
        self.stats["first_error_found"] += result.first_error >= 0
        if result.first_error >= 0:
            self.stats["first_errors_at_cut_steps"] += bool(cut[result.first_error])
            generator = (w.record.model_extra or {}).get("generator")
            self.stats["first_errors_at_cut_responses"] += (
                result.first_error == n_steps - 1 and isinstance(generator, dict)
                and generator.get("finish_reason") == "length")
        out = w.record.dump()
        extra_mc: dict[str, Any] = {}
        if result.sampled is not None:
            extra_mc["sampled"] = result.sampled
        if result.witnessed:
            extra_mc["witnessed"] = result.witnessed
        if self.zero_rule != ALL_K:
            extra_mc["zero_rule"] = self.zero_rule.settings()
        if w.record.thought_steps is not None:
            extra_mc["cut_in_thought"] = w.cut_in_thought
            self.stats["completions_cut_in_thought"] += w.cut_in_thought
        if self.config.keep_completions:
            extra_mc["kept_completions"] = [w.kept.get(step) for step in range(n_steps)]
        if w.max_tokens is not None:  # the budget its completions had: --max-tokens did not fit the context
            extra_mc["max_tokens_clamped"] = w.max_tokens
        rule = self.config.recovery_rule_object
        if rule is not None:
            extra_mc["recovery_rule"] = rule.settings()
            extra_mc["recovery"] = rule.read(result.scores, self.config.threshold).to_json()
        if self.judged is not None:
            self.stats[f"verified: {result.verified}"] += 1
            extra_mc["verified"] = result.verified
            extra_mc["judge_first_error"] = self.judged.claim(w.record.id).first_error
            extra_mc["judged_sha256"] = self.judged.sha256
        out["mc"] = {
            "k": self.config.k, "label": self.config.label, "strategy": self.strategy.name,
            "scores": result.scores, "first_error": result.first_error,
            "completions": w.completions, "generated_tokens": w.generated_tokens,
            "shared_completions": w.shared, "bill": record_bill(w.paid),
            "model": self.engine_info.get("model", self.engine.model), "threshold": self.config.threshold,
            "last_step": "graded response" if w.record.correct is not None else "graded here",
            "last_correct": w.last_correct, "grade_errors": w.grade_errors, "truncated": w.truncated,
            "cut": cut, "cut_completions": self.config.cut_completions,
            **sampling_record(reasoning_budget(self.config.sampling) if w.record.thought_steps is not None
                              else self.config.sampling),
            "system_prompt": system_prompt.name, "system_prompt_sha256": system_prompt.sha256,
            "share_prefixes": self.config.share_prefixes, **extra_mc,
        }
        return Rollout.make(out)


class Witnesses:
    """The texts of one unit (a problem's responses, one gold answer) known to reach the gold answer:
    a right response's own text, a prefix with a right completion. A step's prefix is witnessed when
    one of them starts with exactly the text a rollout continues from it (its steps, their joins and
    the join after it): no text is cut into steps again to find it."""

    def __init__(self) -> None:
        self._texts: list[str] = []  # sorted: the texts a prefix begins are the run from its place

    def add(self, text: str) -> None:
        bisect.insort(self._texts, text)

    def __contains__(self, prefix: str) -> bool:
        at = bisect.bisect_left(self._texts, prefix)
        return at < len(self._texts) and self._texts[at].startswith(prefix)


def _cut(result: GenerationResult) -> bool:
    """The completion stopped at --max-tokens (or the model's context), not at its end."""
    return bool(result.finish_reasons) and result.finish_reasons[0] == "length"
