"""Formats whose steps are joined into one text, each followed by a step tag: the consumer finds
the tag's token in the token ids and reads one label there per step (placement.py says how that
goes wrong, and how it is checked)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.export.formats import ExportFormat, ExportOptions
from prm_annotate.export.placement import (
    Misplaced,
    TokenCheck,
    encode_with_offsets,
    marker_ends,
    marker_positions,
    single_token_id,
    tag_positions,
)

TAG_HINT = (": add it to the tokenizer as a special token, or pick one of the tokenizer's own special tokens "
            "with --placeholder (docs/export.md)")


def tagged_text(problem: str, steps: list[str], marks: list[str], opts: ExportOptions, lead: str) -> str:
    """The problem, `lead`, then each step followed by a space and its mark, joined by the step separator."""
    return lead.join([problem, opts.sep.join(f"{s} {m}" for s, m in zip(steps, marks))])


@dataclass(frozen=True)
class TaggedFormat(ExportFormat):
    tagged: bool = True

    def text(self, row: dict[str, Any], tokenizer: Any) -> str:
        """The text the consumer tokenizes."""
        return row["input"]

    def token_check(self, opts: ExportOptions, tokenizer: Any) -> TokenCheck:
        return TokenCheck(tokenizer, single_token_id(tokenizer, opts.tag, "the step tag", TAG_HINT))

    def placed(self, row: dict[str, Any], opts: ExportOptions, check: TokenCheck) -> tuple[list[int], list[int]]:
        """The row's token ids and the positions the consumer labels; Misplaced unless they are one
        per step, on the token ending its tag."""
        text = self.text(row, check.tokenizer)
        ids, offsets = encode_with_offsets(check.tokenizer, text)
        positions = marker_positions(ids, offsets, marker_ends(text, opts.tag), check.tag_id)
        if isinstance(positions, str):
            raise Misplaced(positions)
        return ids, positions

    def check_placement(self, row: dict[str, Any], opts: ExportOptions, check: TokenCheck) -> None:
        self.placed(row, opts, check)

    def label_positions(self, row: dict[str, Any], opts: ExportOptions, tokenizer: Any,
                        max_completion_length: int | None) -> list[int | None]:
        return list(tag_positions(self.text(row, tokenizer), opts.tag, tokenizer))
