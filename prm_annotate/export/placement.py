"""Where each step label lands in the tokens a trainer sees, checked the way each consumer reads it.

Every tagged format is read by finding a marker token in the token ids: OpenRLHF's
ProcessRewardDataset (0.5.6 to 0.9.5) encodes the placeholder on its own, asserts it is one token,
then labels every position where `input_ids == placeholder_id`, in order (PRMLoss reads the same
mask); Qwen2.5-Math-PRM does the same with `<extra_0>`; Math-Shepherd's readers do it with " ки"
and read "+"/"-" at the same positions of the tokenized label text. So a label is right only if
the marker is one token alone AND every marker in the text becomes exactly that token. Neither
holds for every tokenizer: "ки" is two tokens for SmolLM2's byte-level BPE; a byte-level BPE whose
merges prefer " к" splits " ки" inside text (no marker token at all: OpenRLHF's loss is then NaN);
a step ending in whitespace can let the tokenizer fold the tag into another piece, and labels
shift. `marker_positions` finds these cases; the caller turns them into exit status 2.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from prm_annotate.errors import UsageError, require


class Misplaced(Exception):
    """A row whose labels would not land one per step on the tokens ending the steps."""


@dataclass(frozen=True)
class TokenCheck:
    """With --tokenizer: the consumer's one-token checks, done once, and the tokenizer for each row."""
    tokenizer: Any
    tag_id: int | None = None  # the token that carries each label (the step tag, or tokens' step end)
    step_end: str | None = None  # tokens: the step-end marker


def load_tokenizer(name_or_path: str) -> Any:
    require("transformers", "--tokenizer", "pip install -e '.[tokenizer]' in the repository, or pip install transformers")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--tokenizer {name_or_path}: cannot load a tokenizer ({exc})") from None


def single_token_id(tokenizer: Any, text: str, what: str, hint: str = "") -> int:
    """The id of `text` encoded alone, as OpenRLHF's convert_token_to_id and Qwen's PRM code take it."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise UsageError(f"{what} {text!r} is {len(ids)} tokens for this tokenizer, not one ({ids}); "
                         f"a trainer cannot put a step label on it{hint}")
    return ids[0]


def marker_ends(text: str, marker: str) -> list[int]:
    """Character offset just past each occurrence of `marker` in `text`."""
    ends, start = [], 0
    while (found := text.find(marker, start)) >= 0:
        start = found + len(marker)
        ends.append(start)
    return ends


def encode_with_offsets(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    if not getattr(tokenizer, "is_fast", False):
        raise UsageError("--tokenizer: a fast (Rust) tokenizer is needed to check label positions "
                         "(tokenizer.json; transformers converts a SentencePiece model when `sentencepiece` is installed)")
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def marker_positions(ids: list[int], offsets: list[tuple[int, int]], ends: list[int], marker_id: int) -> list[int] | str:
    """Token positions a consumer labels (`ids == marker_id`, in order), or why they are not
    exactly one token at the end of each step's marker."""
    found = [i for i, t in enumerate(ids) if t == marker_id]
    if len(found) != len(ends):
        return (f"{len(found)} marker tokens for {len(ends)} steps: the tokenizer merges or splits the marker in "
                f"context, so labels would be dropped or shifted")
    for step, (pos, end) in enumerate(zip(found, ends)):
        if offsets[pos][1] != end:
            return f"step {step + 1}'s label would land on token {pos}, which is not the end of its step"
    return found


def tag_positions(text: str, tag: str, tokenizer: Any) -> list[int]:
    """Index of the token that ends each tag occurrence in `text` (the token a trainer labels)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ends = [end for _, end in enc["offset_mapping"]]
    return [bisect_left(ends, end) for end in marker_ends(text, tag)]
