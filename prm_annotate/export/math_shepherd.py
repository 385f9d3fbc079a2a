"""`--format math-shepherd`: `{"input", "label"}` as in Math-Shepherd: `input` tags each step with
" ки", `label` is the same text with "+" or "-" in place of each tag."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.export.formats import ExportOptions
from prm_annotate.export.placement import Misplaced, TokenCheck, encode_with_offsets
from prm_annotate.export.tagged import TaggedFormat, tagged_text

SHEPHERD_TAG = "ки"


@dataclass(frozen=True)
class MathShepherd(TaggedFormat):
    def fields(self, problem: str, steps: list[str], values: list[Any], opts: ExportOptions,
               check: TokenCheck | None) -> dict[str, Any]:
        return {"input": tagged_text(problem, steps, [opts.tag] * len(steps), opts, self.lead),
                "label": tagged_text(problem, steps, ["+" if v else "-" for v in values], opts, self.lead)}

    def check_placement(self, row: dict[str, Any], opts: ExportOptions, check: TokenCheck) -> None:
        got, positions = self.placed(row, opts, check)
        # Math-Shepherd's readers take the label token at the tag's position in the tokenized label text.
        label_ids, label_offsets = encode_with_offsets(check.tokenizer, row["label"])
        if len(label_ids) != len(got):
            raise Misplaced(f"the label text is {len(label_ids)} tokens and the input {len(got)}: "
                            f"{opts.tag!r} and '+'/'-' do not tokenize alike, so the labels cannot be read "
                            "at the tag positions")
        at = set(positions)
        for k, pos in enumerate(positions):
            mark = row["label"][label_offsets[pos][0]:label_offsets[pos][1]].strip()
            if mark not in ("+", "-"):
                raise Misplaced(f"step {k + 1}'s label token reads {mark!r}, not '+' or '-'")
        if [a for i, a in enumerate(got) if i not in at] != [b for i, b in enumerate(label_ids) if i not in at]:
            raise Misplaced("the label text does not tokenize like the input outside the tag positions")


FORMAT = MathShepherd("math-shepherd", summary="Math-Shepherd's text with ки tags and its +/- label text",
                      consumer="Math-Shepherd's tag reader", lead=" ", default_tag=SHEPHERD_TAG)
