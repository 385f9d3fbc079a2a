"""The estimate before a run (`prm-annotate plan rollout|judge`): what a rollout or judge run over a
file will ask of its engine and what it will cost (engines/bill.py's terms), with no model loaded.

The requests are the stage's own: the stage is built without an engine and asked for the request of
each probe, so prompts, keys and budgets are exactly the run's. Prompt tokens are counted with the
model's tokenizer when `--model` names one found locally (the chat template rendered as the
in-process engine renders it), else estimated at `CHARS_PER_TOKEN` characters per token (said so in
the estimate: then the token bounds are estimates too).

Every figure is a `Bound` [low, high]:

- requests and completions: exact for exhaustive (steps-1 x K per response; with shared prefixes,
  the distinct prefixes of each problem's run of responses x K). A strategy that decides as it goes
  is bounded by walking its own plans over every assignment of step labels (the plan's choices
  depend on the labels only): low, the fewest completions (each probed step decided by its first
  completions: right for a 1, wrong for a 0); high, K at every step the plan probes in its longest
  walk. With shared prefixes the engine's low is each problem-run's largest single response (one
  response's completions are distinct requests), its high the sum; a strategy that takes witnesses
  can answer every probe without sampling (low 0).
- prompt tokens: each request's prompt tokens weighted the same way.
- prefill tokens (uncached): low, one token per request (the engine computes at least the last
  prompt token); high, every prompt token (no cache at all).
- decode tokens: low, one per request; high, the budget (max tokens per request; a constrained
  vote's forced answer at most its format's longest match, `answer_tokens`).
- compute: (prefill + decode) x the model's parameter count (counted from its config, or
  `--model-params`), for low, high and modelled.

Low and high are guaranteed (with a tokenizer; at 4 characters a token they are estimates). Where
the guaranteed high is loose (a budget many times what a completion writes), a `modelled` figure
says what the run costs if a named model of it holds; it is an upper figure, not a bound:

- prefill: each distinct prompt computed once, its repeats (a step's K completions, a record's
  votes) served by the prefix cache but for their tail past the last whole block (`_tail`,
  CACHE_BLOCK); a cache that evicts, a larger block, or repeats that run before their prefix is
  cached compute more.
- rollout decode: each completion from step s at most as long as the longest response to its problem
  (`generator.generated_tokens`, the policy's own lengths at its own temperature) less the tokens of
  the steps before s, since a completion continues a response from a step.
- judge decode: each verdict as long as the paragraphs it reads as the prompt lays them out
  (VERDICT_PER_READ_TOKEN tokens written per token read: a judge that copies or analyses each
  paragraph), then its answer format's longest match; a judge that thinks first (`--reasoning`) is
  modelled at its budget.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import re
import shutil
import tempfile
from array import array
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional

from prm_annotate.engines.bill import UNIT, billions, model_params
from prm_annotate.engines.defaults import CPU_BLOCK_SIZE
from prm_annotate.errors import InputError
from prm_annotate.io.inputs import read_records
from prm_annotate.io.jsonl import STDIO, is_stream, open_input
from prm_annotate.records import Response
from prm_annotate.strategies import Plan, Probe, ProbeResult

CHARS_PER_TOKEN = 4.0  # the estimate without a tokenizer (English and LaTeX run 3-4.5)
MAX_LEAVES = 4096  # label walks per plan before the bound falls back to K at every step
# The prefix cache's block in the modelled prefill: a repeated prompt is served whole blocks only
# and computes its tail past the last one (at least its last token): `_tail`. The in-process
# engine's on CPU (engines/defaults.py); vLLM's GPU default, 16, computes less.
CACHE_BLOCK = CPU_BLOCK_SIZE
# The modelled verdict: tokens written per token of the paragraphs the judge reads. A judge that
# reads paragraph by paragraph (the world judge copies each one up to the first error; a critic
# analyses each) writes about what it reads; one that writes more per paragraph, or thinks first,
# is not this model (docs/cost.md).
VERDICT_PER_READ_TOKEN = 1.0


@dataclass(frozen=True)
class Bound:
    low: float
    high: float
    # A modelled upper figure, not a bound: what the run costs if the named model of the module
    # docstring holds (a warm prefix cache, verdicts as long as the paragraphs they read); None: none.
    modelled: Optional[float] = None

    @property
    def exact(self) -> bool:
        return self.low == self.high

    def __add__(self, other: "Bound") -> "Bound":
        modelled = None if self.modelled is None or other.modelled is None else self.modelled + other.modelled
        return Bound(self.low + other.low, self.high + other.high, modelled)

    def holds(self, measured: float) -> bool:
        return self.low <= measured <= self.high

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"low": _num(self.low), "high": _num(self.high)}
        if self.modelled is not None:
            out["modelled"] = _num(self.modelled)
        return out


ZERO = Bound(0, 0, 0)


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


@dataclass(frozen=True)
class Estimate:
    """What a run will ask and cost (module docstring).

    Attributes:
        stage: "rollout" or "judge".
        records: input records read.
        figures: name -> Bound: requests, completions, prompt_tokens, prefill_tokens,
            decode_tokens, compute.
        params: the model's parameter count (None: unknown, compute not bounded).
        params_from: "config", "given" or "unknown".
        counted_by: how prompt tokens were counted: "tokenizer <model>" or "estimate: N characters per token".
        notes: what a reader should know (a strategy's bounds that fell back, a named choice).
    """

    stage: str
    records: int
    figures: dict[str, Bound]
    params: int | None
    params_from: str
    counted_by: str
    notes: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"stage": self.stage, "records": self.records, "params": self.params, "params_from": self.params_from,
                "counted_by": self.counted_by, "unit": UNIT,
                "figures": {k: b.record() for k, b in self.figures.items()}, "notes": self.notes}


# ---- counting prompt tokens without an engine --------------------------------------------------


def prompt_counter(model: str) -> tuple[Callable[[Any], int], str]:
    """(request -> prompt tokens, how): the model's tokenizer when found locally, else characters / 4."""
    tokenizer = _tokenizer(model)
    if tokenizer is not None:
        from prm_annotate.engines.vllm_engine import render_prompt

        @functools.lru_cache(maxsize=None)
        def by_text(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False))

        return (lambda request: by_text(render_prompt(tokenizer, request))), f"tokenizer {model}"

    def by_chars(request: Any) -> int:
        return max(1, round(sum(len(m.get("content") or "") for m in request.messages) / CHARS_PER_TOKEN))

    return by_chars, f"estimate: {CHARS_PER_TOKEN:g} characters per token (no tokenizer found for {model!r})"


class TemplateOnly:
    """What the stages ask of an engine before a run, answered by the tokenizer alone: the
    generation prompt (whether the template opens a thought, so a thinking record's prefix does not
    open a second one, as under the in-process engine)."""

    def __init__(self, model: str, tokenizer: Any) -> None:
        self.model, self._tokenizer = model, tokenizer

    def generation_prompt(self, messages: Any) -> str:
        from prm_annotate.engines.vllm_engine import generation_prompt

        return generation_prompt(self._tokenizer, messages)


def template_only(model: str) -> TemplateOnly | None:
    """The stage's stand-in for an engine (None without a local tokenizer: prompts as over HTTP)."""
    tokenizer = _tokenizer(model)
    return None if tokenizer is None else TemplateOnly(model, tokenizer)


def model_context(model: str) -> int | None:
    """The context an in-process engine gives `model` by default (its config's
    max_position_embeddings), found as its tokenizer is (a local checkpoint or a name in the local
    cache); None when no config is found."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model, local_files_only=True)
    except (OSError, ValueError, KeyError, ImportError):
        return None
    length = getattr(config.get_text_config(), "max_position_embeddings", None)
    return int(length) if isinstance(length, int) else None


def context_notes(counted_by: str, longest_prompts: Iterable[int], budget: int, engine_info: dict[str, Any],
                  what: str) -> list[str]:
    """What the stage's context check (engines/context.py) will do with these records' longest
    prompts: how many it refuses and clamps (none said when the prompts were not counted by the
    model's tokenizer, its context is not known, or all fit)."""
    from prm_annotate.engines.context import ENGINE, Context, fit

    length = model_context(str(engine_info.get("model", "")))
    if length is None or not counted_by.startswith("tokenizer"):
        return []
    context = Context(length, "config", ENGINE)
    counted = refused = clamped = 0
    for p in longest_prompts:
        f = fit(p, budget, context)
        counted, refused, clamped = counted + 1, refused + (f.refused is not None), clamped + f.clamped
    if not refused and not clamped:
        return []
    return [f"context: {refused} of {counted} records' {what} leave too little of the model's {length:,}-token "
            f"context (max_position_embeddings) and will be refused, {clamped} clamped below {budget} tokens; "
            "the figures count them as if run (a --max-model-len below it refuses more)"]


@functools.lru_cache(maxsize=8)
def _tokenizer(model: str) -> Any:
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model, local_files_only=True)
    except (OSError, ValueError, KeyError, ImportError):
        return None


def _read(path: str, model: type, name: str) -> Iterator[Any]:
    """The input's records one by one, each validated: a bad line is exit 2 naming the file (`name`:
    `path` may be standard input's copy) and line, as the stage says it. Nothing is written before
    the estimate is made, so a bad line anywhere still changes nothing."""
    from pydantic import ValidationError

    from prm_annotate.records import describe_validation_error

    try:
        for where, row in read_records(path):
            try:
                yield model.model_validate(row)
            except ValidationError as exc:
                raise InputError(name, where, describe_validation_error(exc)) from None
    except InputError as exc:
        if exc.path == name:
            raise
        raise InputError(name, exc.where, exc.message) from None


@contextlib.contextmanager
def _rereadable(path: str) -> Iterator[str]:
    """A path that can be read twice: the file itself, or a stream (standard input, a pipe) copied
    to a temporary file of the same stem (`stdin` for standard input: the stem a record without an
    id takes)."""
    if not is_stream(path):
        yield path
        return
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / ("stdin.jsonl" if path == STDIO else Path(path).name)
        with open(copy, "wb") as fh:
            shutil.copyfileobj(open_input(path), fh)
        yield str(copy)


# ---- a strategy's plans walked over every assignment of step labels ----------------------------


@dataclass(frozen=True)
class Walks:
    """A plan's walks: per walk, the completions each probed step asked for when decided fastest."""

    walks: tuple[tuple[tuple[int, int], ...], ...]  # ((step, fewest completions), ...) per walk
    complete: bool  # False: more than MAX_LEAVES walks; the bound is K at every probe-able step


def walk_plan(plan: Plan, probe_able: int) -> Walks:
    """Every label assignment's walk through `plan` (a deep copy per branch). A step's label is
    chosen when the plan first probes it; its results are all right (a 1) or all wrong (a 0), the
    fastest way to either label, so the counts are each walk's fewest."""
    leaves: list[tuple[tuple[int, int], ...]] = []
    todo: list[tuple[Plan, dict[int, bool], dict[int, int]]] = [(plan, {}, {})]
    while todo:
        if len(leaves) + len(todo) > MAX_LEAVES:
            return Walks((), False)
        current, labels, asked = todo.pop()
        probes = current.next_round()
        if not probes:
            leaves.append(tuple(sorted(asked.items())))
            continue
        new = sorted({p.step for p in probes} - set(labels))
        for choice in _assignments(new):
            branch, branch_labels, branch_asked = (copy.deepcopy(current), {**labels, **choice}, dict(asked))
            for p in probes:
                branch_asked[p.step] = branch_asked.get(p.step, 0) + 1
            branch.observe([ProbeResult(p, branch_labels[p.step], 1) for p in probes])
            todo.append((branch, branch_labels, branch_asked))
    return Walks(tuple(leaves), True)


def _assignments(steps: list[int]) -> Iterable[dict[int, bool]]:
    if len(steps) > 12:  # 4096 branches at once: the walk gives up (MAX_LEAVES)
        yield from ({s: bool((i >> n) & 1) for n, s in enumerate(steps)} for i in range(MAX_LEAVES + 1))
        return
    for i in range(2 ** len(steps)):
        yield {s: bool((i >> n) & 1) for n, s in enumerate(steps)}


def _bounds(walks: Walks, k: int, probe_able: int, weight: Callable[[int], float]) -> tuple[float, float]:
    """[fewest, most] of sum(completions x weight(step)) over the walks."""
    if not walks.complete:
        return 0, k * sum(weight(s) for s in range(probe_able))
    lows = [sum(n * weight(s) for s, n in w) for w in walks.walks]
    highs = [sum(k * weight(s) for s, _ in w) for w in walks.walks]
    return min(lows), max(highs)


# ---- rollout ------------------------------------------------------------------------------------


def estimate_rollout(path: str, config: Any, engine_info: dict[str, Any]) -> Estimate:
    """The estimate of `rollout path` with `config` (a RolloutConfig) and the engine `engine_info`
    describes (`EngineConfig.describe()`: its model, and `model_params` when given). The input is
    read twice (the policy's lengths, then the requests), holding one problem's run of responses."""
    from prm_annotate.stages.judged_file import JudgedFile
    from prm_annotate.stages.rollout import RolloutStage, rollout_input_model

    judged = JudgedFile.load(config.judged) if config.judged is not None else None
    stage = RolloutStage(template_only(str(engine_info.get("model", ""))), config, engine_info=engine_info,
                         judged_file=judged)
    model = rollout_input_model(stage.prompts, judged)
    count, counted_by = prompt_counter(str(engine_info.get("model", "")))
    k, strategy, notes = config.k, stage.strategy, []
    exhaustive = strategy.name == "exhaustive"
    witnesses = config.share_prefixes and getattr(strategy, "uses_witnesses", False)
    budget = stage.config.sampling.max_tokens
    walked: dict[tuple, Walks] = {}
    records, completions, prompt, prefill_modelled, decode_high = 0, ZERO, ZERO, ZERO, 0
    shared = (ZERO, ZERO, ZERO)  # requests, prompt and prefill tokens when prefixes are shared
    last_prompts = array("q")
    with _rereadable(path) as source:
        longest, of_problem = _policy_lengths(_read(source, model, path))
        # a run: consecutive responses of one problem and answer, as the stage groups them
        for _, run in itertools.groupby(_read(source, model, path), key=lambda r: (r.problem, r.answer)):
            run_figures: list[dict[str, Bound]] = []
            run_keys: list[set[str]] = []
            for record in run:
                records += 1
                n = len(record.steps)
                probe_able = max(0, n - 1)
                prompts = [count(stage._request(record, Probe(s, 0))) for s in range(probe_able)]
                last_prompts.extend(prompts[-1:])  # a prefix grows with its step: the record's longest prompt
                lengths = _modelled_lengths(prompts, of_problem.get(record.problem, longest), budget)
                distinct = set()
                if exhaustive:
                    figures = _exact(probe_able, k, prompts)
                    figures["decode_modelled"] = Bound(0, k * sum(lengths))
                else:
                    figures = _walked_figures(stage, record, judged, walked, notes, k, prompts, lengths)
                    if witnesses:
                        figures = {name: Bound(0, b.high) for name, b in figures.items()}
                completions += figures["completions"]
                prompt += figures["prompt_tokens"]
                prefill_modelled += figures["prefill_modelled"]
                decode_high += figures["decode_modelled"].high
                if config.share_prefixes:
                    distinct = {stage._request(record, Probe(s, i)).key for s in range(probe_able) for i in range(k)}
                run_figures.append(figures)
                run_keys.append(distinct)
            if config.share_prefixes:
                shared = tuple(total + part for total, part in
                               zip(shared, _shared(run_figures, run_keys, exhaustive, k)))
    requests = completions
    if config.share_prefixes:
        requests, prompt, prefill_modelled = shared
    decode_modelled = None if longest is None else decode_high
    if longest is not None and config.share_prefixes and completions.high:
        decode_modelled *= requests.high / completions.high  # the shared completions are made once
    if longest is None:
        notes.append("no response records its generated tokens (generator.generated_tokens): no modelled decode figure")
    figures = {
        "requests": requests, "completions": completions, "prompt_tokens": prompt,
        "prefill_tokens": Bound(requests.low, prompt.high, prefill_modelled.high),
        "decode_tokens": Bound(requests.low, requests.high * budget, decode_modelled),
    }
    if not exhaustive:
        notes.append(f"{strategy.name}: bounded over every assignment of step labels its plans can meet")
    notes += context_notes(counted_by, last_prompts, budget, engine_info, "longest prefixes (the last step's)")
    return _with_compute(Estimate("rollout", records, figures, *model_params(engine_info), counted_by, notes))


def _walked_figures(stage: Any, record: Any, judged: Any, walked: dict[tuple, Walks], notes: list[str], k: int,
                    prompts: list[int], lengths: list[int]) -> dict[str, Bound]:
    """A record's figures under a strategy that decides as it goes: its plans walked (once per step
    count, last answer and judge's claim: `walked`) for every last answer it may have."""
    n = len(record.steps)
    probe_able = max(0, n - 1)
    lasts = [record.correct] if record.correct is not None else [True, False]
    claim = judged.claim(record.id) if judged is not None else None
    low = high = None
    for last in lasts:
        key = (n, last, None if claim is None else (claim.first_error, getattr(claim, "parsed", None)))
        if key not in walked:
            walked[key] = walk_plan(stage._plan(record, last), probe_able)
            if not walked[key].complete:
                notes.append(f"a {n}-step response has more than {MAX_LEAVES} label walks: "
                             "bounded by K at every step")
        c = _bounds(walked[key], k, probe_able, lambda s: 1)
        p = _bounds(walked[key], k, probe_able, lambda s: prompts[s])
        # the modelled prefill: each probed step's prompt once, its repeats their tails
        u = _bounds(walked[key], k, probe_able, lambda s: (prompts[s] + (k - 1) * _tail(prompts[s])) / k)
        d = _bounds(walked[key], k, probe_able, lambda s: lengths[s])
        low = (c[0], p[0], u[0], d[0]) if low is None else tuple(map(min, low, (c[0], p[0], u[0], d[0])))
        high = (c[1], p[1], u[1], d[1]) if high is None else tuple(map(max, high, (c[1], p[1], u[1], d[1])))
    return {"completions": Bound(low[0], high[0]), "prompt_tokens": Bound(low[1], high[1]),
            "prefill_modelled": Bound(min(low[2], high[2]), high[2]), "decode_modelled": Bound(0, high[3])}


def _modelled_lengths(prompts: list[int], longest: int | None, budget: int) -> list[int]:
    """The modelled length of a completion from each step s: the longest response to its problem
    less the steps it already has (the module docstring's model); the budget when none is known."""
    if longest is None:
        return [budget] * len(prompts)
    return [min(budget, max(1, longest - (p - prompts[0]))) for p in prompts]


def _exact(probe_able: int, k: int, prompts: list[int]) -> dict[str, Bound]:
    c = probe_able * k
    return {"completions": Bound(c, c), "prompt_tokens": Bound(k * sum(prompts), k * sum(prompts)),
            "prefill_modelled": Bound(*[sum(p + (k - 1) * _tail(p) for p in prompts)] * 2)}


def _shared(figures: list[dict[str, Bound]], keys: list[set[str]], exhaustive: bool,
            k: int) -> tuple[Bound, Bound, Bound]:
    """The engine's requests, prompt and modelled prefill tokens for one run of responses (of one
    problem and answer, as the stage groups them) sharing prefixes. Exhaustive: exactly the distinct
    keys; else between the run's largest response and the sum."""
    if exhaustive:
        distinct = set().union(*keys)
        share = len(distinct) / max(1, sum(len(keys_of) for keys_of in keys))
        total_prompt = sum(f["prompt_tokens"].high for f in figures) * share
        # the same prefixes' prompts: the run's prompt tokens scaled by its distinct share; each
        # distinct prompt once, and each of its repeats at most a block past the cached ones
        once = total_prompt / k + len(distinct) * (1 - 1 / k) * CACHE_BLOCK
        return Bound(len(distinct), len(distinct)), Bound(total_prompt, total_prompt), Bound(once, once)
    return tuple(Bound(max(f[name].low for f in figures), sum(f[name].high for f in figures))
                 for name in ("completions", "prompt_tokens", "prefill_modelled"))


def _tail(prompt: int) -> int:
    """The tokens a repeat of a `prompt`-token prompt computes when the cache holds it: past its
    last whole block short of the final token, which is always computed (1..CACHE_BLOCK)."""
    return prompt - CACHE_BLOCK * ((prompt - 1) // CACHE_BLOCK) if prompt > 0 else 0


def _policy_lengths(records: Iterable[Any]) -> tuple[int | None, dict[str, int]]:
    """The input's longest response and each problem's (`generator.generated_tokens`): the policy's
    own lengths, which the modelled decode takes a completion's from."""
    of_problem: dict[str, int] = {}
    for record in records:
        n = _generated(record)
        if n is not None:
            of_problem[record.problem] = max(n, of_problem.get(record.problem, 0))
    return max(of_problem.values(), default=None), of_problem


def _generated(record: Any) -> int | None:
    generator = (record.model_extra or {}).get("generator")
    value = generator.get("generated_tokens") if isinstance(generator, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _with_compute(estimate: Estimate) -> Estimate:
    if estimate.params is None:
        estimate.notes.append("model size unknown: give --model-params N to bound the compute")
        return estimate
    prefill, decode = estimate.figures["prefill_tokens"], estimate.figures["decode_tokens"]
    modelled = (None if prefill.modelled is None or decode.modelled is None
                else billions(prefill.modelled + decode.modelled, estimate.params))
    estimate.figures["compute"] = Bound(billions(prefill.low + decode.low, estimate.params),
                                        billions(prefill.high + decode.high, estimate.params), modelled)
    return estimate


# ---- judge --------------------------------------------------------------------------------------


def answer_tokens(style: Any, n_steps: int) -> int:
    """At most the tokens of a forced answer (`style.answer_regex`) for a response of `n_steps`: its
    longest match's characters (every token but the end one spells at least one character) and the
    end token, and never past the forced request's own budget, FORCED_ANSWER_TOKENS."""
    from prm_annotate.stages.judge import FORCED_ANSWER_TOKENS

    widest = _widest_match(style.answer_regex(max(1, n_steps)))
    return FORCED_ANSWER_TOKENS if widest is None else min(FORCED_ANSWER_TOKENS, widest + 1)


@functools.lru_cache(maxsize=256)
def _widest_match(pattern: str) -> int | None:
    """The most characters `pattern` can match; None if unbounded or not known. The width is what
    the standard library's regex compiler computes for the pattern (its parser, as `re` runs it)."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        high = _parser.parse(pattern).getwidth()[1]
    except (ImportError, AttributeError, re.error):
        return None
    return None if high >= _parser.MAXREPEAT else int(high)


def estimate_judge(path: str, config: Any, engine_info: dict[str, Any]) -> Estimate:
    """The estimate of `judge path` with `config` (a JudgeConfig): every record's requests are known
    (its votes, one request of n under a one-request protocol, and a forced answer after each
    constrained vote); only their lengths are bounded, and modelled (the module docstring)."""
    from prm_annotate.stages.judge import JudgeStage

    stage = JudgeStage(None, config, engine_info=engine_info)
    records: Iterable[Any] = _read(path, Response, path)
    cascaded = None
    if stage.cascade is not None:  # only the escalated records are this judge's
        records, cascaded = stage.cascade.plan(records)
    count, counted_by = prompt_counter(str(engine_info.get("model", "")))
    votes = config.votes
    first = 1 if stage.protocol.one_request else votes
    budget = stage.sampling.max_tokens
    constrained = config.constrained
    thinks = stage.reasoning is not None  # a thought before the verdict: its length is not modelled
    prompt = decode = ZERO
    prefill = 0  # the modelled prefill: each record's prompt once, each constrained analysis once more
    judge_prompts, asked = array("q"), 0
    for record in records:
        asked += 1
        p = count(stage._request(record, 0))
        judge_prompts.append(p)
        # The paragraphs as the prompt lays them out: what a verdict reads, paragraph by paragraph.
        reading = max(0, p - count(stage._request(record.model_copy(update={"steps": []}), 0)))
        answer = answer_tokens(stage.style, len(record.steps))
        if constrained:  # a free analysis (stopped at the answer's lead), then the forced answer
            analysis = budget if thinks else min(budget, round(VERDICT_PER_READ_TOKEN * reading))
            # each forced answer's prompt: the vote's prompt and its analysis (1..budget tokens)
            prompt += Bound(first * p + votes * (p + 1), first * p + votes * (p + budget),
                            first * p + votes * (p + analysis))
            decode += Bound(0, votes * (budget + answer), votes * (analysis + answer))
            # the forced answer past the cached prompt: its tail, the analysis and the lead
            prefill += p + (first - 1) * _tail(p) + votes * (CACHE_BLOCK + analysis)
        else:
            verdict = budget if thinks else min(budget, round(VERDICT_PER_READ_TOKEN * reading) + answer)
            prompt += Bound(first * p, first * p, first * p)
            decode += Bound(0, votes * budget, votes * verdict)
            prefill += p + (first - 1) * _tail(p)
    requests = asked * first * (2 if constrained else 1)
    figures = {
        "requests": Bound(requests, requests), "completions": Bound(asked * votes, asked * votes),
        "prompt_tokens": Bound(prompt.low, prompt.high, None if prompt.exact else prompt.modelled),
        "prefill_tokens": Bound(requests, prompt.high, prefill),
        # low: one token per request (a request of n votes makes at least one)
        "decode_tokens": Bound(requests, decode.high, decode.modelled),
    }
    params, params_from = model_params(engine_info)
    said = ("the budget (a thinking judge's thought is not modelled)" if thinks
            else "each verdict as long as the paragraphs it reads, then its answer")
    notes = [f"judge: the modelled decode is {said}: a model of the judge, not a bound"] + ([cascaded()] if cascaded else [])
    notes += context_notes(counted_by, judge_prompts, budget, engine_info, "judge prompts")
    return _with_compute(Estimate("judge", asked, figures, params, params_from, counted_by, notes))


def by_stage() -> dict[str, Callable[..., Estimate]]:
    return {"rollout": estimate_rollout, "judge": estimate_judge}


def table_rows(estimate: Estimate) -> list[tuple[str, str, str, str]]:
    """(figure, low, high, modelled) as the table shows them."""
    rows = []
    for name, b in estimate.figures.items():
        fmt = (lambda x: f"{x:,.4g}") if name == "compute" else (lambda x: f"{x:,.0f}")
        rows.append((name.replace("_", " ") + (" (exact)" if b.exact else ""), fmt(b.low), fmt(b.high),
                     "" if b.modelled is None else fmt(b.modelled)))
    return rows

