"""segment: re-cut the steps of any responses file by a named segmenter (segmenting.SEGMENTERS).

Each record's text is its steps joined as the record says (`step_joins`, else its segmenter's `sep`,
else "\\n\\n"), so nothing but the cuts changes; it is cut as `sample` cuts a completion
(segmenting/texts.py): a thinking record's thought is cut apart from its answer, `thought_steps`
counts the steps before its `</think>` again, and no step holds a tag. `confidence` reads the
record's `token_logprobs` (kept by `sample --keep-logprobs` or `--segment confidence`). A record
with labels of its old steps (`mc`, `judge`, `labels`) is refused: its labels would name steps that
no longer exist.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.errors import InputError
from prm_annotate.records import Response, describe_validation_error
from prm_annotate.segmenting import Segmenter
from prm_annotate.segmenting.texts import segment_record

LABELLED = ("mc", "judge", "labels")


def record_tokens(record: dict[str, Any]) -> list[TokenLogprob] | None:
    """A record's `token_logprobs` ([offset or null, logprob] pairs); ValueError when they are not."""
    raw = record.get("token_logprobs")
    if raw is None:
        return None
    ok = isinstance(raw, list) and all(
        isinstance(t, list) and len(t) == 2 and (t[0] is None or type(t[0]) is int)
        and isinstance(t[1], (int, float)) and not isinstance(t[1], bool) for t in raw)
    if not ok:
        raise ValueError("token_logprobs must be a list of [offset or null, logprob] pairs")
    return [TokenLogprob(o, float(lp)) for o, lp in raw]


@dataclass
class Resegmented:
    """What `resegment` did: each record's number of steps before and after, in order."""

    before: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)
    changed: int = 0  # records whose steps are not the ones they had

    @property
    def records(self) -> int:
        return len(self.after)


def resegment(rows: Iterable[tuple[str, dict[str, Any]]], segmenter: Segmenter, source: str,
              stats: Resegmented) -> Iterator[dict[str, Any]]:
    """Each record of `rows` ((where, record) pairs of file `source`) with its steps cut again."""
    for where, data in rows:
        try:
            Response.model_validate(data)
        except Exception as exc:  # pydantic's ValidationError: said as the file's other errors are
            detail = describe_validation_error(exc) if hasattr(exc, "errors") else str(exc)
            raise InputError(source, where, f"not a response record: {detail}") from None
        labelled = [k for k in LABELLED if k in data]
        if labelled:
            raise InputError(source, where, f"record {data['id']} has labels of its steps ({', '.join(labelled)}); "
                             "segment the responses file before rollout or judge")
        try:
            tokens = record_tokens(data)
        except ValueError as exc:
            raise InputError(source, where, f"record {data['id']}: {exc}") from None
        if segmenter.needs_logprobs and tokens is None:
            raise InputError(source, where, f"record {data['id']} has no token_logprobs, which --segment "
                             f"{segmenter.name} needs (sample with --keep-logprobs)")
        made = segment_record(data, segmenter, tokens)
        if not made.spans:
            raise InputError(source, where, f"record {data['id']}: no steps left (blank text)")
        out = {k: v for k, v in data.items() if k not in ("step_joins", "segmenter", "token_logprobs")}
        out["steps"] = steps = made.steps
        if "thought_steps" in data:
            out["thought_steps"] = made.thought_steps
        if made.record_joins is not None:
            out["step_joins"] = made.record_joins
        out["segmenter"] = segmenter.record()
        if tokens is not None:
            out["token_logprobs"] = made.record_tokens(tokens)
        stats.before.append(len(data["steps"]))
        stats.after.append(len(steps))
        stats.changed += steps != data["steps"]
        yield out
