"""`Sampling`: the values that shape how a request is sampled, one type from the command line to the
engine. A stage config holds one (`config.sampling`, its command's --temperature, --top-p...), a
`GenerationRequest` carries one, each engine maps it in one function (`vllm_engine.sampling_params`,
`openai_engine.sampling_body`), and `sampling_record` writes it into records and manifests.

Adding a sampling parameter: its field here (a `setting`: default, bounds, flag, help), and its line in
the two engine mappings; every model stage's options, records, manifests, the judge protocols' checks
and every stage's requests follow (tests/test_extension_points.py makes that change in a copy of the
package). "{output}" and "{request}" in a help are the stage's words (its config's `group(...)`).
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Optional

from prm_annotate.errors import UsageError
from prm_annotate.settings import declare, declared, setting


@dataclass(frozen=True)
class Budget:
    """A stage role's default max_tokens: for a model that answers, and one that thinks first."""

    answer: int
    thinking: int


# The stages' budgets, said here once (a --max-tokens given replaces them).
# A policy's response, and a rollout's completion of it. A thinking policy's thought of thousands of
# tokens comes first: 32,768 is what DeepSeek-R1's and Qwen3's own evaluations give them; 2,048
# would cut most thoughts.
POLICY_BUDGET = Budget(answer=2048, thinking=32768)
# A verdict: room for the paper protocol's analysis of a long solution by a 72B judge (one analysis
# per paragraph). The official ProcessBench script gives critics the same: 8,192, and 32,768 to a
# reasoning critic (QwQ), which thinks first.
JUDGE_BUDGET = Budget(answer=8192, thinking=32768)


@dataclass(frozen=True)
class Sampling:
    """How one request is sampled; the defaults are a bare request's.

    Attributes:
        max_tokens: tokens to generate at most.
        seed: a request's own seed (the same seed and model give the same text whatever else is in
            the batch); in a stage config, the run seed each request's seed derives from. None:
            unseeded.
    """

    temperature: float = setting(0.7, flags="--temperature", min=0.0, help="Softmax temperature; 0 is greedy.")
    top_p: float = setting(1.0, flags="--top-p", min=0.0, max=1.0,
                           help="Nucleus sampling: the smallest set of tokens holding this much probability.")
    top_k: int = setting(0, flags="--top-k", min=0, help="Sample from the k likeliest tokens only; 0: off.")
    max_tokens: int = setting(512, flags="--max-tokens", min=1, help="Tokens per {output}.")
    seed: Optional[int] = setting(None, flags="--seed", help="Run seed; each {request}'s seed derives from it.")

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise UsageError(f"sampling: temperature {self.temperature} is below 0")
        if not 0 <= self.top_p <= 1:
            raise UsageError(f"sampling: top_p {self.top_p} is not within 0..1")
        if self.top_k < 0:
            raise UsageError(f"sampling: top_k {self.top_k} is below 0 (0 is off)")
        if self.max_tokens < 1:
            raise UsageError(f"sampling: max_tokens {self.max_tokens} is below 1")


def sampling_record(sampling: Sampling) -> dict[str, Any]:
    """A sampling as records and manifests write it: every field, in field order."""
    return dataclasses.asdict(sampling)


def _overrides() -> type:
    """`SamplingOverrides`: `Sampling`'s fields, each None unless given."""
    hints = typing.get_type_hints(Sampling)
    # Each field's setting is Sampling's, declared there (its origin, for the one-declaration check).
    fields = [(f.name, Optional[hints[f.name]], declare(declared(f), None, origin=f)) for f in dataclasses.fields(Sampling)]

    def given(self: Any) -> dict[str, Any]:
        """The fields given (not None)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    doc = ("Sampling values as given, None where not: what fills the rest is the user's (a judge protocol: "
           "`JudgeProtocol.sampling`). The fields are `Sampling`'s.")
    return dataclasses.make_dataclass("SamplingOverrides", fields, frozen=True,
                                      namespace={"given": given, "__doc__": doc, "__module__": __name__})


SamplingOverrides = _overrides()


def sampling_fields() -> tuple[str, ...]:
    """The names of `Sampling`'s fields, in order."""
    return tuple(f.name for f in dataclasses.fields(Sampling))


class TokenLogprob(typing.NamedTuple):
    """One sampled token: where its text starts in the completion (a character offset; None when the
    token's text does not start a character of the completion, as a piece of a multi-byte character
    does not) and its log-probability under the policy."""

    offset: Optional[int]
    logprob: float


def align_tokens(text: str, pieces: typing.Sequence[tuple[str, float]]) -> list[TokenLogprob]:
    """Each sampled token's (text, logprob) placed in the completion `text`. A token's text is found
    where the previous one ended; one that is not there (a piece of a multi-byte character, decoded
    as U+FFFD) gets no offset, and the next token that is found a few characters on resumes."""
    out, pos = [], 0
    for piece, logprob in pieces:
        if piece and "\ufffd" not in piece and text.startswith(piece, pos):
            out.append(TokenLogprob(pos, float(logprob)))
            pos += len(piece)
            continue
        found = text.find(piece, pos, pos + len(piece) + 4) if piece and "\ufffd" not in piece else -1
        if found > pos and out and out[-1].offset is None:  # after the pieces of a character
            out.append(TokenLogprob(found, float(logprob)))
            pos = found + len(piece)
        else:
            out.append(TokenLogprob(None, float(logprob)))
    return out
