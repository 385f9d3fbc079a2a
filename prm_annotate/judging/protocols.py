"""Judge protocols: how a judge is sampled and how its verdicts become one first error.

A protocol is a registry entry (`JUDGE_PROTOCOLS` in `prm_annotate.judging`):
- `strict` (the default) makes labels: the prompt's answer style parses each verdict strictly
  (never guessed), the majority of the parsed votes wins, sampling follows the judge's options.
- `processbench-official` (processbench_official.py) reproduces QwenLM/ProcessBench's
  `code/run_eval.py` for evaluating critics: its template, sampling, extraction and voting.

`sampling(options, model)` reads the judge's options (a `JudgeConfig`: prompt, votes, constrained,
style, and its `sampling`, a `SamplingOverrides`: None where not given) and the model as named by
`--model`, and returns the `Sampling` of its requests. A protocol that sets options itself lists
them in `fixed` ("sampling": every sampling field): giving one is a usage error (exit 2), so a run
under the official protocol is never quietly something else.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from prm_annotate.engines.sampling import JUDGE_BUDGET, Sampling
from prm_annotate.errors import UsageError
from prm_annotate.judging.styles import JudgeStyle, ParseFailure
from prm_annotate.judging.votes import aggregate_votes



@dataclass(frozen=True)
class Reading:
    """The votes of one response read into its first error (None: no verdict)."""

    first_error: int | None
    votes: list[int | None]  # each vote's first error, None where it was not read
    errors: list[str]  # why, for each vote not read
    extra: dict[str, Any] = field(default_factory=dict)  # recorded beside them in `judge`


@dataclass(frozen=True)
class JudgeProtocol:
    name: str
    summary: str  # one line, for --help
    prompt: str  # the built-in judge prompt when --prompt is not given
    sampling: Callable[[Any, str], Sampling]  # (the judge's options, the model as named) -> sampling
    # (verdict texts, steps, style, cut=flags of the votes cut at max_tokens) -> reading
    read: Callable[..., Reading]
    fixed: tuple[str, ...] = ()  # options the protocol sets itself ("sampling": all of it): refused when given
    problem_as_given: bool = False  # the problem goes into the prompt unstripped
    # True: the votes are the n samples of ONE request under the sampling's seed (the official
    # script's way); False: each vote is its own request, seeded from (record id, vote, seed).
    one_request: bool = False

    def check(self, options: Any) -> None:
        """UsageError (exit 2) for an option this protocol sets itself."""
        given = [name for fixed in self.fixed
                 for name in (options.sampling.given() if fixed == "sampling" else (fixed,))
                 if fixed == "sampling" or getattr(options, name) not in (None, False)
                 and not (name == "prompt" and options.prompt == self.prompt)]
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise UsageError(f"--protocol {self.name} sets {flags} itself: leave {'it' if len(given) == 1 else 'them'} out")


def strict_sampling(options: Any, model: str) -> Sampling:
    """The sampling as given; temperature by default greedy for one vote and 0.7 for several
    (identical greedy votes would make voting pointless), seed 0, the rest `Sampling`'s defaults."""
    return Sampling(**{"temperature": 0.0 if options.votes == 1 else 0.7, "max_tokens": JUDGE_BUDGET.answer,
                       "seed": 0, **options.sampling.given()})


CUT = "cut at --max-tokens"


T = TypeVar("T")


def read_each(texts: list[str], n_steps: int, parse: Callable[[str, int], T], cut: Sequence[bool] = (),
              refused: Sequence[str | None] = ()) -> tuple[list[T | None], list[str]]:
    """Each vote by `parse` (None where not read) and why each unread one was not: a vote cut at
    max_tokens is not read (a draft answer before the cut is not the verdict), nor one refused
    before reading (`refused[i]`, its reason)."""
    read: list[T | None] = []
    errors: list[str] = []
    for i, text in enumerate(texts):
        try:
            if i < len(cut) and cut[i]:
                raise ParseFailure(CUT)
            if i < len(refused) and refused[i] is not None:
                raise ParseFailure(refused[i])
            read.append(parse(text, n_steps))
        except ParseFailure as exc:
            read.append(None)
            errors.append(str(exc))
    return read, errors


def read_strictly(texts: list[str], n_steps: int, style: JudgeStyle, cut: Sequence[bool] = (),
                  refused: Sequence[str | None] = ()) -> Reading:
    """Each vote by the style's parser (`read_each`); the majority of the read votes wins."""
    votes, errors = read_each(texts, n_steps, style.parse, cut, refused)
    return Reading(aggregate_votes(votes), votes, errors)


STRICT = JudgeProtocol(
    "strict", "labels: the prompt's answer style parses every verdict strictly; the majority wins, ties go to "
    "the earliest error", "paper", strict_sampling, read_strictly)
