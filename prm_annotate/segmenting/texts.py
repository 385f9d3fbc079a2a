"""Any text into steps, the thought kept apart: the one way a text becomes a record's steps.

`segment_text(text, segmenter, tokens, thinks)` (in base.py, beside `Segmenter`, whose `segment`
is it for a text with no thought) cuts `text` by a segmenter (the modules beside this
one) between its `<think>`/`</think>` tags (thinking.tags.tag_spans), never across one:

- a text with no tag and no thought is cut whole, as the segmenter cuts it;
- any other is cut region by region (the text between two tags, or a tag and an end), each region's
  edge white space going into the joins beside it: no step holds a tag or starts or ends with the
  white space next to one, and every tag is in a join (or before the first step: the thought's
  opening `<think>`);
- with `thinks`, the steps before the first `</think>` are the thought's (`thought_steps`; all of
  them when there is none: an unfinished thought). A preamble the model wrote before its own
  `<think>` counts with the thought (its steps come before `</think>`); an answer that thinks again
  keeps its second thought's steps among the answer's, the tags in the joins, and the grader reads
  its answers apart (thinking.tags.answer_parts).

Steps and joins come from spans of the text, never found again in it: `join_steps(steps, joins)` is
`text` from the first step's first character to the last step's last, byte for byte.

`sample` cuts its completions here, `segment` re-cuts records (`segment_record`), the reward server
cuts an RL client's text; rollout and judge read a record back as a trace (`record_trace`).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.segmenting.base import Segmented, Segmenter, segment_text
from prm_annotate.steps import DEFAULT_SEP, join_record, join_steps
from prm_annotate.thinking.tags import OPEN, Trace, read_trace


def segment_trace(trace: Trace, segmenter: Segmenter, tokens: Sequence[TokenLogprob] | None = None) -> Segmented:
    """A completion read as a trace (thinking.tags.read_trace), cut: its thought's steps, then its answer's."""
    return segment_text(trace.text, segmenter, tokens, trace.thinks)


def record_text(record: Mapping[str, Any] | Any) -> tuple[str, bool]:
    """A response record's text (its steps joined as it says) and whether it holds a thought."""
    get = record.get if isinstance(record, Mapping) else (lambda k, d=None: getattr(record, k, d))
    return join_record(record), bool(get("thought_steps"))


def segment_record(record: Mapping[str, Any], segmenter: Segmenter,
                   tokens: Sequence[TokenLogprob] | None = None) -> Segmented:
    """A response record's text cut again; its thought (if any) kept apart as `sample` cut it."""
    text, thinks = record_text(record)
    return segment_text(text, segmenter, tokens, thinks)


def record_trace(steps: list[str], joins: list[str] | None, thought_steps: int | None,
                 thought_finished: bool | None, sep: str = DEFAULT_SEP) -> Trace:
    """A response record's steps read back as its trace (the thought's steps, then the answer's)."""
    text = join_steps(steps, joins, sep)
    if not thought_steps:
        return Trace(text, None, text)
    if thought_finished is False:
        return Trace(text, text, "", finished=False)
    return read_trace(text, OPEN)
