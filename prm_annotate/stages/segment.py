"""segment: re-cut the steps of any responses file by a named segmenter (segmenting.SEGMENTERS).

Each record's text is its steps joined as the record says (`step_joins`, else its segmenter's `sep`,
else "\\n\\n"), so nothing but the cuts changes; `confidence` reads the record's `token_logprobs`
(kept by `sample --keep-logprobs` or `--segment confidence`). A record with labels of its old steps
(`mc`, `judge`, `labels`) is refused: its labels would name steps that no longer exist.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.errors import UsageError
from prm_annotate.records import Response, describe_validation_error
from prm_annotate.segmenting import Segmenter
from prm_annotate.steps import join_record, record_joins

LABELLED = ("mc", "judge", "labels")


def kept_logprobs(text: str, first_step: str, tokens: Iterable[TokenLogprob]) -> list[list[Any]]:
    """Tokens as a record keeps them: offsets into the text its steps join to (which starts at the
    first step: white space the paragraphs rule dropped before it is not part of it)."""
    shift = max(text.find(first_step), 0)
    return [[None if t.offset is None or t.offset < shift else t.offset - shift, t.logprob] for t in tokens]


def record_tokens(record: dict[str, Any]) -> list[TokenLogprob] | None:
    raw = record.get("token_logprobs")
    if raw is None:
        return None
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
            raise UsageError(f"{source}: {where}: not a response record: {detail}") from None
        labelled = [k for k in LABELLED if k in data]
        if labelled:
            raise UsageError(f"{source}: {where}: record {data['id']} has labels of its steps ({', '.join(labelled)}); "
                             "segment the responses file before rollout or judge")
        tokens = record_tokens(data)
        if segmenter.needs_logprobs and tokens is None:
            raise UsageError(f"{source}: {where}: record {data['id']} has no token_logprobs, which --segment "
                             f"{segmenter.name} needs (sample with --keep-logprobs)")
        text = join_record(data)
        steps, joins = segmenter.segment(text, tokens)
        if not steps:
            raise UsageError(f"{source}: {where}: record {data['id']}: no steps left (blank text)")
        out = {k: v for k, v in data.items() if k not in ("step_joins", "segmenter", "token_logprobs")}
        out["steps"] = steps
        kept = record_joins(joins)
        if kept is not None:
            out["step_joins"] = kept
        out["segmenter"] = segmenter.record()
        if tokens is not None:
            out["token_logprobs"] = data["token_logprobs"]
        stats.before.append(len(data["steps"]))
        stats.after.append(len(steps))
        stats.changed += steps != data["steps"]
        yield out
