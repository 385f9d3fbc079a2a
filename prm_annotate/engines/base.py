"""The one small protocol every stage uses to talk to a model.

Requests stream: `submit` hands requests to the engine at any time, `poll` returns the results
that have finished since the last call (each carries its `request.key`, so nothing relies on the
order of results). The scheduler (prm_annotate/pipeline/scheduler.py) keeps the engine full this way,
submitting a record's next requests while other records' requests are still generating.
`generate` is the one-batch convenience built on the two: submit a batch, wait for all of it.

Engines that can only run a whole batch at once (test doubles) derive from `BatchEngine`: they
implement `generate` and get `submit`/`poll` from it.

An engine may also say its model's context, `context() -> engines.context.Context | None`, and
count a request's prompt as it will send it, `prompt_tokens(request) -> int | None`: the stages
measure a record's longest prompt with them before its first request (stages/context_check.py).
Both engines here have them; one without them is not checked.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol, Sequence

from prm_annotate.thinking.split import END, split_think
from prm_annotate.engines.sampling import Sampling, TokenLogprob


@dataclass(frozen=True)
class GenerationRequest:
    key: str
    # Chat messages ({"role", "content"}). With `continue_final`, the last message is an assistant
    # turn holding a partial answer that the model extends in place (chat template applied with the
    # assistant turn left open, not a new turn) — how rollouts extend a step prefix.
    messages: tuple[dict, ...]
    continue_final: bool = False
    # With `continue_final`: the template renders the messages before the final one up to its
    # generation prompt and the final message's text is appended as it is, so a template that
    # rewrites or strips an assistant turn's thought (Qwen3's) never touches the text continued
    # (a rollout inside a thought). In process only; a server renders `continue_final` its own way.
    append_raw: bool = False
    n: int = 1
    # Temperature, top-p, top-k, max tokens and the request's own seed (engines/sampling.py).
    sampling: Sampling = Sampling()
    stop: tuple[str, ...] = ()
    # Optional structured output: the completion must match this regular expression.
    guided_regex: str | None = None
    # How a reasoning model's output is split into reasoning and answer (thinking/split.py):
    # a vLLM reasoning parser's name or "think"; None: the output is the answer as written.
    reasoning: str | None = None
    # Opt-in: the sampled tokens' log-probabilities come back in `GenerationResult.token_logprobs`
    # (the confidence segmenter's input); off, engines ask for none (they cost memory and bytes).
    logprobs: bool = False


@dataclass
class GenerationResult:
    key: str
    texts: list[str] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    # Prompt tokens served from the prefix cache; None when the engine does not tell.
    cached_prompt_tokens: int | None = None
    generated_tokens: int = 0
    # Set when the request failed (after retries): then `texts` is empty — never invented.
    error: str | None = None
    # A reasoning model's output split (thinking/split.py): then `texts` hold the answers ("" where
    # the thought never ended) and `reasonings` the reasoning of each (None: it had none). Empty: not split.
    reasonings: list[str | None] = field(default_factory=list)
    reasoning_tokens: int | None = None  # of `generated_tokens`; None: not split, or not told
    # With `request.logprobs`: per completion, each sampled token's (offset in the whole generated
    # text, thought included, logprob), engines/sampling.py's `align_tokens`. Empty: not asked.
    token_logprobs: list[list[TokenLogprob]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def split_here(self, counts: Sequence[int | None] = ()) -> "GenerationResult":
        """The texts' `<think>…</think>` split off into `reasonings`: what a request whose `reasoning`
        is `think` gets back from a server that did not split. `counts`: the tokens of each text's
        `thought_span`, where the caller could count them (the thought's tokens are told when all are)."""
        parts = [split_think(t) for t in self.texts]
        told = len(counts) == len(self.texts) and None not in counts
        return replace(self, texts=[p.answer or "" for p in parts], reasonings=[p.reasoning for p in parts],
                       reasoning_tokens=sum(counts) if told else None)  # type: ignore[arg-type]

    def thought_spans(self) -> list[str]:
        """What of each text the thought's tokens are: up to the end of `</think>`, all of a thought
        that never ended (as the in-process engine counts them: thinking/split.py)."""
        return [t[:t.index(END) + len(END)] if END in t else t for t in self.texts]


class Engine(Protocol):
    model: str

    def submit(self, requests: Sequence[GenerationRequest]) -> None:
        """Start `requests`; their keys must differ from those of every request still in flight."""
        ...

    def poll(self) -> list[GenerationResult]:
        """Results finished since the last call, in any order. Blocks until there is at least one
        while requests are in flight; returns [] at once when none are. A request that failed
        comes back with `error` set; only a failure of the engine itself raises."""
        ...

    def in_flight(self) -> int:
        """Requests submitted and not yet returned by `poll`."""
        ...

    def cancel(self, keys: Sequence[str]) -> int:
        """Stop these in-flight requests where the engine can; their results are never returned.
        Returns the tokens they had generated, as far as the engine knows (0 when it cannot tell)."""
        ...

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        """Submit `requests` and wait for all of them (nothing else may be in flight)."""
        ...

    def close(self) -> None:
        ...


class Streaming:
    """`generate` for engines that implement `submit`, `poll` and `in_flight`."""

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        check_keys(requests)
        if self.in_flight():  # type: ignore[attr-defined]
            raise RuntimeError("generate() needs an idle engine: other requests are in flight")
        self.submit(requests)  # type: ignore[attr-defined]
        results: dict[str, GenerationResult] = {}
        while self.in_flight():  # type: ignore[attr-defined]
            for result in self.poll():  # type: ignore[attr-defined]
                results[result.key] = result
        return results


class BatchEngine:
    """`submit`/`poll` for an engine that runs whole batches: `submit` only collects requests,
    `poll` runs everything collected in one `generate` call. Driven by the scheduler this is
    lock-step: every record in flight waits for the slowest request of the batch."""

    def __init__(self) -> None:
        self._queued: list[GenerationRequest] = []

    def submit(self, requests: Sequence[GenerationRequest]) -> None:
        self._queued.extend(requests)
        check_keys(self._queued)

    def poll(self) -> list[GenerationResult]:
        batch, self._queued = self._queued, []
        return list(self.generate(batch).values()) if batch else []

    def in_flight(self) -> int:
        return len(self._queued)

    def cancel(self, keys: Sequence[str]) -> int:
        dropped = set(keys)
        self._queued = [r for r in self._queued if r.key not in dropped]
        return 0  # queued requests have not run

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        raise NotImplementedError


def check_keys(requests: Sequence[GenerationRequest]) -> None:
    """Raise ValueError on a duplicate key: results are keyed, so keys must be unique in a batch."""
    seen: set[str] = set()
    for r in requests:
        if r.key in seen:
            raise ValueError(f"duplicate request key {r.key!r}")
        seen.add(r.key)
