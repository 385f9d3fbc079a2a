"""`--format qwen`: the Qwen2.5-Math-PRM convention, `<extra_0>` after each step (steps joined by
nothing else unless a separator is given), as `prompt`/`response` and as chat `messages`, labels
1/0 or floats. The consumer reads the labels at `<extra_0>`'s id in the chat-templated text."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.export.formats import ExportOptions
from prm_annotate.export.placement import TokenCheck
from prm_annotate.export.tagged import TaggedFormat

QWEN_TAG = "<extra_0>"
QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class Qwen(TaggedFormat):
    def fields(self, problem: str, steps: list[str], values: list[Any], opts: ExportOptions,
               check: TokenCheck | None) -> dict[str, Any]:
        response = opts.sep.join(f"{s}{opts.tag}" for s in steps)
        return {"prompt": problem, "response": response,
                "messages": [{"role": "system", "content": QWEN_SYSTEM}, {"role": "user", "content": problem},
                             {"role": "assistant", "content": response}],
                "labels": values if opts.soft else [int(v) for v in values]}

    def text(self, row: dict[str, Any], tokenizer: Any) -> str:
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(row["messages"], tokenize=False)
        return row["prompt"] + row["response"]


FORMAT = Qwen("qwen", summary="Qwen2.5-Math-PRM's <extra_0> after each step, one label each",
              consumer="the Qwen2.5-Math-PRM <extra_0> convention", step_sep="", default_tag=QWEN_TAG,
              soft=True)
