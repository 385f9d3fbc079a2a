"""The one reading of `<think>` tags: a completion as a thought and an answer.

A reasoning model (DeepSeek-R1 distills, QwQ, Qwen3 thinking) writes `<think>…</think>` and then
its answer. Where the thought starts depends on the chat template's generation prompt
(`prompt_thought`):

- `open`: the prompt ends inside a thought (`…<think>\\n`, R1 distills and QwQ): the completion is
  thought up to its first `</think>`; with no `</think>` it is an unfinished thought, never an answer;
- `closed`: the prompt closes an empty thought (`<think>\\n\\n</think>\\n\\n`, Qwen3 with thinking
  switched off): the whole completion is the answer;
- `model`: the prompt says nothing (Qwen3 thinking): a completion with a `<think>` before any
  `</think>` thinks from there (unfinished without a `</think>`), one with a `</think>` but no
  `<think>` before it was opened by a template we cannot see (over HTTP), and any other is all answer.

The thought runs to the first `</think>`; the answer is what follows it. Text the model wrote before
its own `<think>` (a preamble) is neither (DeepSeek-R1's rule, as vLLM's parser reads it): it stays
in the completion's text, and its steps count with the thought's (prm_annotate/segmenting/texts.py).
An answer that thinks again (`<think>` after it) holds several answers (`answer_parts`): they must
agree, or the completion has none (thinking/grading.py, the judge's reading).

Nothing here cuts steps: prm_annotate/segmenting/ owns that, cutting between the tags found here
(`tag_spans`), so that no step ever holds a tag.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

START, END = "<think>", "</think>"
OPEN, CLOSED, MODEL = "open", "closed", "model"
PROMPT_STATES = (OPEN, CLOSED, MODEL)
# What a rollout writes before a thought's steps when the prompt does not open the thought itself.
THOUGHT_OPENING = START + "\n"
_TAG = re.compile(re.escape(END) + "|" + re.escape(START))


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


def _opened_by_model(text: str) -> int | None:
    """Where the thought's body starts when the model wrote its own `<think>` before any `</think>`."""
    start, end = text.find(START), text.find(END)
    if start >= 0 and (end < 0 or start < end):
        return start + len(START)
    return None


def read_trace(text: str, state: str = MODEL) -> Trace:
    """`text` read under a prompt in `state` (module docstring)."""
    if state == CLOSED:
        return Trace(text, None, text)
    body = _opened_by_model(text)
    if body is None:
        if state != OPEN and END not in text:
            return Trace(text, None, text)
        body = 0
    thought, ended, answer = text[body:].partition(END)
    if not ended:
        return Trace(text, thought, "", finished=False)
    return Trace(text, thought, answer)


def tag_spans(text: str) -> list[tuple[int, int]]:
    """Where `<think>` and `</think>` stand in `text`, in order."""
    return [m.span() for m in _TAG.finditer(text)]


_THOUGHT_BLOCK = re.compile(re.escape(START) + r".*?(?:" + re.escape(END) + r"|\Z)|" + re.escape(END), re.S)


def answer_parts(answer: str) -> list[str]:
    """The answers an answer holds between thoughts it went back to (one when it never did)."""
    return [part for part in _THOUGHT_BLOCK.split(answer) if part.strip()] or [answer]


def thinks_again(answer: str) -> bool:
    return START in answer or END in answer


def written_state(text: str) -> str:
    """The state to read a text a rollout wrote (a prefix and its completion) under: the text opened
    its thought itself when it starts with `<think>`, else the generation prompt did."""
    return MODEL if text.lstrip().startswith(START) else OPEN


def continuation_opening(state: str, thought_steps: int, text: str = "") -> str:
    """What a rollout writes before a thinking response's first step (`text`: the steps joined), so
    that its prefix continues the same thought under a generation prompt in `state`: `<think>\\n`
    where neither the prompt nor the text itself (a preamble, then the model's own `<think>`) opens
    the thought; never a second one."""
    if thought_steps == 0:
        return END + "\n\n" if state == OPEN else ""
    return "" if state == OPEN or _opened_by_model(text) is not None else THOUGHT_OPENING
