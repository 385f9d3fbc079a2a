"""A thinking policy's completion read as a thought and an answer, and made steps.

A reasoning model (DeepSeek-R1 distills, QwQ, Qwen3 thinking) writes `<think>…</think>` and then
its answer. Where the thought starts depends on the chat template's generation prompt
(`prompt_thought`):

- `open`: the prompt ends inside a thought (`…<think>\\n`, R1 distills and QwQ): the completion is
  thought up to its first `</think>`; with no `</think>` it is an unfinished thought, never an answer;
- `closed`: the prompt closes an empty thought (`<think>\\n\\n</think>\\n\\n`, Qwen3 with thinking
  switched off): the whole completion is the answer;
- `model`: the prompt says nothing (Qwen3 thinking): a completion that starts with `<think>` is a
  thought up to `</think>` (unfinished without it), one with a `</think>` but no `<think>` before
  it was opened by a template we cannot see (over HTTP), and any other is all answer.

The answer is what follows the first `</think>`. An answer that thinks again (`<think>` after it)
holds several answers (`answer_parts`): they must agree, or the completion has none
(grading/thinking.py, the judge's reading).

Steps (`trace_steps`): the thought and the answer are segmented apart, so no step holds a tag;
`thought_steps` of them are the thought's. The text between two steps is their join: the
separator, except between the thought's last step and the answer's first, where it holds
`</think>`. Joining the steps with their joins gives the completion back from its first step to
its last (the lead before the first, `<think>\\n` where the model opened the thought, and trailing
whitespace are not steps). Both parts are cut by the run's segmenter
(prm_annotate/segmenting/; `split_steps` when none is given).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from prm_annotate.steps import DEFAULT_SEP, join_steps, record_joins, split_steps

START, END = "<think>", "</think>"
OPEN, CLOSED, MODEL = "open", "closed", "model"
PROMPT_STATES = (OPEN, CLOSED, MODEL)
# What a rollout writes before a thought's steps when the prompt does not open the thought itself.
THOUGHT_OPENING = START + "\n"


def prompt_thought(prompt: str) -> str:
    """Whether a rendered generation prompt leaves a thought open, closes an empty one, or neither."""
    tail = prompt.rstrip()
    if tail.endswith(START):
        return OPEN
    if tail.endswith(END):
        return CLOSED
    return MODEL


@dataclass(frozen=True)
class Trace:
    """A completion read: `thought` None when there was none; `finished` False when the thought has
    no `</think>` (then `answer` is "")."""

    text: str
    thought: str | None
    answer: str
    finished: bool = True

    @property
    def thinks(self) -> bool:
        return self.thought is not None


def read_trace(text: str, state: str = MODEL) -> Trace:
    """`text` read under a prompt in `state` (module docstring)."""
    if state == CLOSED:
        return Trace(text, None, text)
    stripped = text.lstrip()
    if stripped.startswith(START):
        body = stripped[len(START):]
    elif state == OPEN or END in text:
        body = text
    else:
        return Trace(text, None, text)
    thought, ended, answer = body.partition(END)
    if not ended:
        return Trace(text, thought, "", finished=False)
    return Trace(text, thought, answer)


_THOUGHT_BLOCK = re.compile(re.escape(START) + r".*?(?:" + re.escape(END) + r"|\Z)|" + re.escape(END), re.S)


def answer_parts(answer: str) -> list[str]:
    """The answers an answer holds between thoughts it went back to (one when it never did)."""
    return [part for part in _THOUGHT_BLOCK.split(answer) if part.strip()] or [answer]


def thinks_again(answer: str) -> bool:
    return START in answer or END in answer


@dataclass(frozen=True)
class TraceSteps:
    steps: list[str]
    joins: list[str] | None  # None: every join is the separator
    thought_steps: int


def _joins(text: str, steps: list[str]) -> list[str]:
    """The exact text between consecutive steps, found in order in `text`."""
    joins, pos = [], 0
    ends = []
    for step in steps:
        start = text.index(step, pos)
        ends.append((start, start + len(step)))
        pos = start + len(step)
    for (_, end), (start, _) in zip(ends, ends[1:]):
        joins.append(text[end:start])
    return joins


def trace_steps(trace: Trace, sep: str = DEFAULT_SEP, cut: Callable[[str], list[str]] | None = None) -> TraceSteps:
    """The steps of a completion: the thought's, then the answer's, each cut apart (module docstring)
    by `cut` (a segmenter's steps of a text, verbatim pieces of it; None: `split_steps` at `sep`)."""
    cut = cut or (lambda text: split_steps(text, sep))
    if not trace.thinks:
        steps = cut(trace.text)
        return TraceSteps(steps, record_joins(_joins(trace.text, steps)), 0)
    # Each part's edge whitespace goes to the joins beside the tag, so no step ends with it.
    thought = cut((trace.thought or "").strip())
    steps = thought + cut(trace.answer.strip())
    return TraceSteps(steps, record_joins(_joins(trace.text, steps)), len(thought))


def record_trace(steps: list[str], joins: list[str] | None, thought_steps: int | None,
                 thought_finished: bool | None, sep: str = DEFAULT_SEP) -> Trace:
    """A response record's steps read back as its trace (the thought's steps, then the answer's)."""
    text = join_steps(steps, joins, sep)
    if not thought_steps:
        return Trace(text, None, text)
    if thought_finished is False:
        return Trace(text, text, "", finished=False)
    return read_trace(text, OPEN)


def continuation_opening(state: str, thought_steps: int) -> str:
    """What a rollout writes before a thinking response's first step, so that its prefix continues
    the same thought under a generation prompt in `state`: `<think>\\n` where the prompt does not
    open the thought itself (never a second one where it does)."""
    if thought_steps == 0:
        return END + "\n\n" if state == OPEN else ""
    return "" if state == OPEN else THOUGHT_OPENING
