"""merge: consecutive paragraphs joined into one step while the step stays within a token budget
(ReasonFlux-PRM's coarser steps). A paragraph longer than the budget is a step on its own: merge
never cuts inside a paragraph."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from prm_annotate.engines.sampling import TokenLogprob
from prm_annotate.segmenting.base import Segmenter, Span, group_spans, paragraph_spans

# Without a tokenizer a token is counted as 4 characters (rounded up per paragraph), the usual rule
# of thumb for English text under BPE vocabularies; give `tokenizer` to count the policy's tokens.
CHARS_PER_TOKEN = 4
# Chosen on the real traces of tests/data/long_traces.jsonl (81-357 paragraphs, up to 26k
# characters): at 256 tokens the longest has 28 steps, under the 40 a labelling run can afford
# (384: 18, 512: 13 — coarser steps say less about where an error is); tests/segmenting checks it.
DEFAULT_BUDGET = 256


@functools.lru_cache(maxsize=4)
def _tokenizer_counter(name: str) -> Callable[[str], int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def approximate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Merge(Segmenter):
    """Attributes:
        budget: tokens a merged step may hold at most (a longer paragraph stands alone).
        sep: the paragraph separator.
        tokenizer: a Hugging Face tokenizer (name or path) to count tokens with; None: characters / 4.
    """

    name = "merge"
    summary = "paragraphs joined up to a token budget"
    budget: int = DEFAULT_BUDGET
    sep: str = "\n\n"
    tokenizer: Optional[str] = None

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ValueError(f"merge: budget {self.budget} is below 1")

    def spans(self, text: str, tokens: Sequence[TokenLogprob] | None) -> list[Span]:
        count = _tokenizer_counter(self.tokenizer) if self.tokenizer else approximate_tokens
        paragraphs = paragraph_spans(text, self.sep)
        starts, held = [], 0
        for s, e in paragraphs:
            n = count(text[s:e])
            new = held == 0 or held + n > self.budget
            held = n if new else held + n
            starts.append(new)
        return group_spans(paragraphs, starts)
