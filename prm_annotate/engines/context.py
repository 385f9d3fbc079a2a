"""A model's context, and what fits in it: measured before a record's first request.

A prompt and its completion share the model's context (`max_model_len`). vLLM, in process and
as `vllm serve`, cuts a completion budget that does not fit without saying so (other servers may
answer 400), and refuses a prompt that fills the context. Found only when the request runs, a
refused prompt fails a record in the middle of its work, after the requests before it were paid
for, and a rerun fails it again. So the stages measure a record's longest prompt first (`Engine.context()` and
`Engine.prompt_tokens(request)`, where the engine can tell) and `fit` decides:

- the budget fits beside the prompt: nothing changes;
- it does not, but at least `MIN_ROOM` tokens (or the whole budget asked, when that is smaller) are
  left: the budget is clamped to what is left, and the record says so;
- fewer are left: the record is refused for good (its input does not fit this model: another
  attempt would fail the same way), before any of its requests, and the others go on.

Why `MIN_ROOM` = 64 tokens: below it a completion is paid for but says nothing. A rollout
completion from the longest prefix has to write at least the response's last step and its boxed
answer, and a judge at least its verdict; a completion cut short of its answer is graded wrong or
never parsed. 64 tokens hold a short final step with `\\boxed{...}` or a bare verdict in the usual
tokenizers (a math word is 1 to 3 tokens), and are under 2% of a 4,096-token context, so the rule
refuses only prompts that have all but filled the context.

How an engine counts (`Context.counter`):
- `engine`: the in-process engine's own tokenizer on the prompt as it renders it (exact);
- `server`: a vLLM server's `/tokenize`, with the chat request's own template flags (exact);
- `estimate`: the UTF-8 bytes of the messages plus `ESTIMATE_OVERHEAD` tokens per message. An
  upper bound for byte-level BPE and byte-fallback tokenizers (no token is shorter than one byte),
  so it never lets an over-long prompt through; it may clamp or refuse a prompt that would fit
  (typical text is 3 to 4 bytes a token). Used over HTTP when the server has no `/tokenize`.

Nothing here imports vLLM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MIN_ROOM = 64
# Tokens a chat template may add per message (role markers, separators) to the estimate: ChatML
# adds 5, Llama-3's 5 to 8; a system prompt the template adds on its own is counted by the margin.
ESTIMATE_OVERHEAD = 16

ENGINE, SERVER, ESTIMATE = "engine", "server", "estimate"


@dataclass(frozen=True)
class Context:
    """A model's context as an engine knows it.

    Attributes:
        max_model_len: prompt and completion tokens together.
        source: where the length came from: `engine` (the in-process engine), `option`
            (--max-model-len), `server` (the server's /v1/models).
        counter: how prompts are counted: `engine`, `server` (/tokenize) or `estimate`.
    """

    max_model_len: int
    source: str
    counter: str

    def describe(self) -> dict:
        return {"max_model_len": self.max_model_len, "source": self.source, "counter": self.counter}


@dataclass(frozen=True)
class Fit:
    """What `fit` decided for one record: the budget its requests get, or why it is refused."""

    prompt_tokens: int
    asked: int  # the completion budget asked for (max_tokens)
    max_tokens: int  # the budget that fits (== asked when it fits; 0 when refused)
    refused: str | None = None

    @property
    def clamped(self) -> bool:
        return self.refused is None and self.max_tokens < self.asked


def fit(prompt_tokens: int, max_tokens: int, context: Context, *, reserve: int = 0, what: str = "the prompt",
        least: int = MIN_ROOM) -> Fit:
    """Fit a completion budget of `max_tokens` beside a prompt of `prompt_tokens` in `context`.
    `reserve`: tokens a later request of the same record needs on top (a forced answer after the
    analysis); `what` names the prompt in the refusal."""
    room = context.max_model_len - prompt_tokens - reserve
    if room >= max_tokens:
        return Fit(prompt_tokens, max_tokens, max_tokens)
    if room >= min(least, max_tokens):
        return Fit(prompt_tokens, max_tokens, room)
    counted = " (estimated)" if context.counter == ESTIMATE else ""
    kept = f" and {reserve} kept for the forced answer" if reserve else ""
    return Fit(prompt_tokens, max_tokens, 0, refused=(
        f"{what} has {prompt_tokens} tokens{counted}{kept}, the model's context is {context.max_model_len} "
        f"({context.source}): {max(room, 0)} left for a completion, fewer than the {min(least, max_tokens)} "
        "it needs; permanent: this input does not fit this model"))


def estimate_tokens(messages: Sequence[dict]) -> int:
    """An upper bound on the prompt tokens of `messages` without their tokenizer (see the module)."""
    return sum(len(str(m.get("content") or "").encode()) + ESTIMATE_OVERHEAD for m in messages) + ESTIMATE_OVERHEAD
