"""DeltaBench as published (OpenStellarTeam/DeltaBench, `Deltabench_v1.jsonl`, arXiv 2502.19361): a
long chain of thought cut into sections, each labelled by humans. The fields its evaluation script
(`evaluation.py`) reads: `question`, `sections_content` (or `section_content`: the script takes
either), the whole trace as `section1:` / `section2:` ... blocks, `reason_error_section_numbers`
and `reason_unuseful_section_numbers` (1-based sections with an error, and with unuseful
reasoning), `task_l1` (its domain: math, code, PCB, general). Every other field of the row is kept.

A row becomes a response whose steps are its sections, in order, each without its `sectionK:`
header: a judge numbers them from 1 as DeltaBench's critic prompt does, and a PRM scores one step
per section. The id is the row's `id` where it has one, else `deltabench-<file stem>-<row>`
(the script itself matches rows by their question). Sections that are not numbered 1, 2, ... in
order leave `steps` unset: `evaluate --benchmark deltabench` refuses the row, naming its line.
"""
from __future__ import annotations

import re
from typing import Any

from prm_annotate.io.inputs.base import FieldMap, InputFormat

SECTION = re.compile(r"^section(\d+):[ \t]*\n?", re.M)


def content(obj: dict[str, Any]) -> Any:
    """The trace as the script takes it: `sections_content` if present, else `section_content`."""
    return obj["sections_content"] if "sections_content" in obj else obj.get("section_content")


def sections(text: Any) -> list[str] | None:
    """The sections' texts, or None when the trace is not `section1:` ... `sectionN:` in order."""
    if not isinstance(text, str):
        return None
    heads = list(SECTION.finditer(text))
    if not heads or text[:heads[0].start()].strip() or [int(h.group(1)) for h in heads] != list(range(1, len(heads) + 1)):
        return None
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return [text[h.end():end].strip() for h, end in zip(heads, ends)]


def detect(obj: dict[str, Any]) -> bool:
    return ("sections_content" in obj or "section_content" in obj) and "reason_error_section_numbers" in obj


def normalise(obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    out = dict(obj)
    rid = obj.get("id")
    out["id"] = str(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) and rid != "" else \
        f"deltabench-{stem}-{index}"
    out["problem"] = obj.get("question")
    out["steps"] = sections(content(obj))
    return out


FORMAT = InputFormat("deltabench", normalise, detect, summary="DeltaBench's long traces with their error sections")
