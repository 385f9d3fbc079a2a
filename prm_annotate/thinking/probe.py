"""How a stage knows whether its model thinks, and where the thought is (docs/pipeline.md, "Thinking
traces").

`--reasoning` (sample, judge): `off` reads every completion as the answer; `think` splits
`<think>…</think>`; a vLLM reasoning parser's name has the engine split (in process the parser, over
HTTP the server's); `auto` (the default) thinks when the chat template does (in process), and over
HTTP reads the server's split when it gives one.

Over HTTP under `auto`, a server with no reasoning parser returns the thought inside the content.
Before the batch, `probed` sends the first record's first request alone (the next record's where
it failed, up to PROBE_TRIES) and looks at what came
back: a split from the server (nothing to do); `</think>` or a leading `<think>` in the content
(split here from then on, and, `</think>` without `<think>`, the template opened the thought); no
tag in a finished answer (no thought); no tag in an answer cut at max tokens (nothing tells whether
the model was thinking: the run stops with exit status 2, saying to give `--reasoning think` or
`off`). The probe's request is the stage's own, fitted to the context as its job fits it, and its
answer is that job's (`ProbeAnswer`): nothing is asked twice. Where what was found changes the
request, the answer still serves when it could not have come out otherwise: a budget lowered back
(no thought found) that the finished answer fits in, or the thought split here (`reasoning`
`think` is read by the engine, never sent to the server); else the job asks again.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Generator, Iterator

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult
from prm_annotate.thinking.split import THINK, template_thinks
from prm_annotate.errors import UsageError
from prm_annotate.thinking.tags import CLOSED, END, MODEL, OPEN, START, Trace, prompt_thought, read_trace

AUTO, OFF = "auto", "off"


def on_server(engine: Engine) -> bool:
    """The chat template is a server's (the engine cannot render it)."""
    return bool(getattr(engine, "template_on_server", False))


def template_state(engine: Engine, messages: tuple[dict, ...]) -> str | None:
    """The thought state of the engine's generation prompt after `messages` (thinking.tags.prompt_thought);
    None when the engine cannot render (over HTTP)."""
    render = getattr(engine, "generation_prompt", None)
    if render is None:
        return None
    return prompt_thought(render(messages))


def engine_thinks(engine: Engine) -> bool | None:
    """Whether the engine's chat template thinks; None when it cannot tell (over HTTP)."""
    thinks = getattr(engine, "chat_template_thinks", None)
    return None if thinks is None else bool(thinks())


@dataclass(frozen=True)
class Found:
    """What a probe found: `split` None (no thought) or THINK (split here), `state` where the
    thought starts, and a sentence for the summary."""

    split: str | None
    state: str
    said: str
    server_splits: bool = False
    answered: bool = True  # False: no request was sent (no record to send), nothing was found


# What a manifest says of `--reasoning auto` over HTTP while no answer has told it (the probe not
# answered, or nothing sent): never a split or a thought state it did not see.
UNANSWERED = "auto: not known (no answer came back)"


def probe_result(result: GenerationResult, stage: str, tries: int = 1) -> Found:
    """What one answer of an `auto` run over HTTP says (module docstring); UsageError when it cannot
    tell. `tries`: the requests sent, this one the last."""
    if not result.ok:  # nothing was answered: nothing to say of reasoning, only of the failure
        raise UsageError(f"{stage}: the first {tries} request(s) failed (the last: {result.error}); the run "
                         "stopped there: fix what the error names and rerun the same command")
    if result.reasonings:
        return Found(None, MODEL, "the server splits the thought (its reasoning parser)", server_splits=True)
    text = result.texts[0]
    if text.lstrip().startswith(START):
        return Found(THINK, MODEL, "the thought is inside the content (the model opens it): split here")
    if END in text:
        return Found(THINK, OPEN, "the thought is inside the content (the template opens it): split here")
    if result.finish_reasons[:1] == ["length"]:
        raise UsageError(f"{stage} --reasoning auto over HTTP: the first answer was cut at --max-tokens with no "
                         "<think> or </think> in it, so whether the server returns a thought inside the content "
                         "cannot be told: give --reasoning think (split <think>…</think> here) or --reasoning off")
    return Found(None, CLOSED, "no thought in the first answer")


@dataclass
class ProbeAnswer:
    """The probe's request and its answer, handed once to the job that asks the same (module docstring)."""

    request: GenerationRequest
    result: GenerationResult
    used: bool = False
    # The engine's token count, for a thought split here from the answer (its tokens billed apart).
    count: Callable[[str], int | None] | None = None

    def serves(self, request: GenerationRequest) -> GenerationResult | None:
        """The answer `request` would have got, where the probe's answer is that; else None."""
        asked, result = self.request, self.result
        budget = request.sampling.max_tokens
        if self.used or not result.ok or replace(request, sampling=replace(
                request.sampling, max_tokens=asked.sampling.max_tokens), reasoning=asked.reasoning) != asked:
            return None
        if budget != asked.sampling.max_tokens and ("length" in result.finish_reasons or (
                budget is not None and result.generated_tokens >= budget)):
            return None  # a lower budget could have cut it
        if request.reasoning == asked.reasoning:
            return result
        if (asked.reasoning, request.reasoning) != (None, THINK):
            return None
        count = self.count or (lambda text: None)
        return result.split_here([count(t) for t in result.thought_spans()])

    def take(self, requests: list[GenerationRequest]) -> dict[str, GenerationResult]:
        """{key: answer} for the one of `requests` the probe answered (at most once a run)."""
        for request in requests:
            answer = self.serves(request)
            if answer is not None:
                self.used = True
                return {request.key: replace(answer, key=request.key)}
        return {}


def asked(requests: list[GenerationRequest],
          probe: ProbeAnswer | None) -> Generator[list[GenerationRequest], dict, dict[str, GenerationResult]]:
    """A job's round less what the probe already answered: `results = yield from asked(requests, probe)`."""
    known = probe.take(requests) if probe is not None else {}
    send = [r for r in requests if r.key not in known]
    results = (yield send) if send else {}
    return {**results, **known}


PROBE_TRIES = 3  # records whose first request may fail (a transient error) before the probe gives up


def probed(engine: Engine, records: Iterator[Any], first_request,
           stage: str) -> tuple[Found, Iterator[Any], ProbeAnswer | None]:
    """Probe with the first record's first request, or, where that request failed, the next record's
    (up to PROBE_TRIES records); a record whose `first_request` is None (refused before any request)
    is passed over. The records given back whole, in order, and the probe's answer for the job."""
    taken: list[Any] = []
    result: GenerationResult | None = None
    sent: GenerationRequest | None = None
    tries = 0
    for record in records:
        taken.append(record)
        request: GenerationRequest | None = first_request(record)
        if request is None:  # it sends nothing (its prompt does not fit the context): the next one
            continue
        sent, result = request, engine.generate([request])[request.key]
        tries += 1
        if result.ok or len(taken) >= PROBE_TRIES:
            break
    if result is None or sent is None:  # no record sent anything: all of them are given back
        return Found(None, MODEL, "no records", answered=False), iter(taken), None

    def again() -> Iterator[Any]:
        yield from taken
        yield from records

    count = getattr(engine, "count_tokens", None)
    return probe_result(result, stage, tries), again(), ProbeAnswer(sent, result, count=count)


def trace_of(result: GenerationResult, index: int, state: str, split: str | None) -> Trace:
    """Completion `index` of a result as a thought and an answer. A split the engine or server made
    (`result.reasonings`) is taken as it is: the answer missing or blank counts as a thought with no
    `</think>` (neither says whether one was written)."""
    text = result.texts[index]
    if result.reasonings:
        thought = result.reasonings[index]
        if thought is None:
            return Trace(text, None, text)
        if not text.strip():
            return Trace(thought, thought, "", finished=False)
        return Trace(f"{thought}{END}{text}", thought, text)
    if split is None:
        return Trace(text, None, text)
    return read_trace(text, state)


def thought_tokens(engine: Engine, trace: Trace, result: GenerationResult) -> int | None:
    """Tokens of the thought, `</think>` included (all of them for an unfinished thought), by the
    engine's tokenizer (over HTTP the server's /tokenize); None where it cannot be told."""
    if not trace.thinks:
        return 0
    if result.reasonings:
        return result.reasoning_tokens if len(result.texts) == 1 else None
    if not trace.finished:
        return result.generated_tokens if len(result.texts) == 1 else None
    count = getattr(engine, "count_tokens", None)
    if count is None:
        return None
    end = trace.text.index(END) + len(END)
    return count(trace.text[:end])


__all__ = ["AUTO", "OFF", "UNANSWERED", "Found", "ProbeAnswer", "asked", "engine_thinks", "on_server", "probe_result", "probed",
           "template_state", "template_thinks", "thought_tokens", "trace_of"]
