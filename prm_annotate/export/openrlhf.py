"""`--format openrlhf`: `{"input", "label"}` for OpenRLHF's ProcessRewardDataset (`--input_key input
--label_key label --placeholder_token ки --reward_tokens + -`): the problem, then each step
followed by " <placeholder>", and one "+"/"-" label per placeholder."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.export.formats import ExportOptions
from prm_annotate.export.math_shepherd import SHEPHERD_TAG
from prm_annotate.export.placement import TokenCheck, single_token_id
from prm_annotate.export.tagged import TaggedFormat, tagged_text


@dataclass(frozen=True)
class OpenRLHF(TaggedFormat):
    def fields(self, problem: str, steps: list[str], values: list[Any], opts: ExportOptions,
               check: TokenCheck | None) -> dict[str, Any]:
        return {"input": tagged_text(problem, steps, [opts.tag] * len(steps), opts, self.lead),
                "label": ["+" if v else "-" for v in values]}

    def token_check(self, opts: ExportOptions, tokenizer: Any) -> TokenCheck:
        check = super().token_check(opts, tokenizer)
        # OpenRLHF's --reward_tokens + - are converted the same way; its loss then reads them.
        single_token_id(tokenizer, "+", "OpenRLHF's reward token")
        single_token_id(tokenizer, "-", "OpenRLHF's reward token")
        return check


FORMAT = OpenRLHF(
    "openrlhf", summary="OpenRLHF's PRM rows: one text with ки tags, +/- labels",
    consumer="OpenRLHF's ProcessRewardDataset and PRMLoss", lead=" ", default_tag=SHEPHERD_TAG,
    # ProcessRewardDataset writes float labels into a tensor of token ids (index_put fails):
    # no OpenRLHF release with a PRM trainer (0.5.6 to 0.9.5) reads them.
    hard_only="--soft: OpenRLHF's ProcessRewardDataset (0.5.6 to 0.9.5) cannot read float labels "
              "(it puts them into a tensor of token ids and fails); export hard labels, "
              "or soft ones with --format qwen or --format tokens")
