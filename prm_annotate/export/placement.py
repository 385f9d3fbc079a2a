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

`--format tokens` is built here too: the conversation in the tokenizer's chat template, a
step-end marker after each step, and labels on the marker tokens only.
"""
from __future__ import annotations

from typing import Any

from prm_annotate.errors import UsageError


class Misplaced(Exception):
    """A row whose labels would not land one per step on the tokens ending the steps."""


IGNORE = -100  # transformers' ignore index for token classification and LM losses
# Default step-end markers for --format tokens, in order of preference: Qwen's PRM token when the
# tokenizer has it, Math-Shepherd's tag (one "▁ки" piece in Llama/Mistral SentencePiece vocabularies),
# then a blank line or a newline (one token in most byte-level BPEs).
STEP_END_CANDIDATES = ("<extra_0>", " ки", "\n\n", "\n")


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


def chat_text(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise UsageError("--tokenizer has no chat template; --format tokens renders the conversation with it")
    return tokenizer.apply_chat_template(messages, tokenize=False)


def response_text(steps: list[str], step_end: str, sep: str) -> tuple[str, list[int]]:
    """The response and the character offset just past each step's marker (known by construction:
    a marker that also occurs inside a step is harmless, the labels are explicit)."""
    # A whitespace marker is itself the separator: another newline after it would merge with it.
    joint = sep if step_end.strip() else ""
    parts, ends, length = [], [], 0
    for step in steps:
        parts.append(f"{step}{step_end}")
        length += len(parts[-1])
        ends.append(length)
        parts.append(joint)
        length += len(joint)
    return "".join(parts), ends


def step_end_positions(ids: list[int], offsets: list[tuple[int, int]], ends: list[int], marker_id: int) -> list[int] | str:
    """The marker token ending each step (the labels are explicit here, so the marker id may also
    occur elsewhere, e.g. a blank line in the problem), or why a step has none."""
    by_end = {end: i for i, ((_, end), t) in enumerate(zip(offsets, ids)) if t == marker_id}
    positions = []
    for step, end in enumerate(ends):
        if end not in by_end:
            return (f"step {step + 1}'s end marker is not one token in context (the tokenizer merges it with the "
                    f"text around it): choose another --step-end")
        positions.append(by_end[end])
    return positions


def _tokens(tokenizer: Any, problem: str, steps: list[str], step_end: str, marker_id: int,
            sep: str) -> tuple[list[int], list[int]] | str:
    response, ends = response_text(steps, step_end, sep)
    text = chat_text(tokenizer, [{"role": "user", "content": problem}, {"role": "assistant", "content": response}])
    start = text.rfind(response)
    if start < 0:
        return "the chat template changes the response text, so its steps cannot be found"
    ids, offsets = encode_with_offsets(tokenizer, text)
    positions = step_end_positions(ids, offsets, [start + e for e in ends], marker_id)
    return positions if isinstance(positions, str) else (ids, positions)


def default_step_end(tokenizer: Any, sep: str) -> str:
    """The first candidate that is one token alone and stays one token between two steps."""
    for marker in STEP_END_CANDIDATES:
        ids = tokenizer.encode(marker, add_special_tokens=False)
        if len(ids) == 1 and not isinstance(_tokens(tokenizer, "Add 2 and 3.", ["2 + 3 = 5.", "So 5."],
                                                    marker, ids[0], sep), str):
            return marker
    raise UsageError(f"none of {', '.join(map(repr, STEP_END_CANDIDATES))} is a single token in context for this "
                     "tokenizer: choose one with --step-end (an added special token is safest)")


def tokens_row(row_id: str, problem: str, steps: list[str], values: list[Any], tokenizer: Any, step_end: str,
               marker_id: int, sep: str) -> dict[str, Any]:
    """`input_ids`, `attention_mask` and `labels` (IGNORE except on each step's end marker)."""
    got = _tokens(tokenizer, problem, steps, step_end, marker_id, sep)
    if isinstance(got, str):
        raise Misplaced(got)
    ids, positions = got
    soft = any(isinstance(v, float) for v in values)
    labels: list[Any] = [float(IGNORE) if soft else IGNORE] * len(ids)
    for pos, value in zip(positions, values):
        labels[pos] = float(value) if soft else int(value)
    return {"id": row_id, "input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels}


def check_row(row: dict[str, Any], fmt: str, tokenizer: Any, tag: str, ids: dict[str, int],
              trl_separator: str) -> None:
    """Raise Misplaced if the row's labels would not land one per step on the token ending that step."""
    problem = _row_problem(row, fmt, tokenizer, tag, ids, trl_separator)
    if problem is not None:
        raise Misplaced(problem)


def _row_problem(row: dict[str, Any], fmt: str, tokenizer: Any, tag: str, ids: dict[str, int],
                 trl_separator: str) -> str | None:
    if fmt == "trl":
        # TRL's tokenize_row labels the last token of step + separator, each encoded on its own.
        sep = len(tokenizer.encode(trl_separator, add_special_tokens=False))
        for k, step in enumerate(row["completions"]):
            if not sep and not tokenizer.encode(step, add_special_tokens=False):
                return f"step {k + 1} is empty and the step separator is no token: its label would land on the next step"
        return None
    if fmt == "qwen":
        text = (tokenizer.apply_chat_template(row["messages"], tokenize=False)
                if getattr(tokenizer, "chat_template", None) else row["prompt"] + row["response"])
    else:
        text = row["input"]
    got, offsets = encode_with_offsets(tokenizer, text)
    positions = marker_positions(got, offsets, marker_ends(text, tag), ids["tag"])
    if isinstance(positions, str):
        return positions
    if fmt == "math-shepherd":
        # Math-Shepherd's readers take the label token at the tag's position in the tokenized label text.
        label_ids, label_offsets = encode_with_offsets(tokenizer, row["label"])
        if len(label_ids) != len(got):
            return (f"the label text is {len(label_ids)} tokens and the input {len(got)}: "
                    f"{tag!r} and '+'/'-' do not tokenize alike, so the labels cannot be read at the tag positions")
        at = set(positions)
        for k, pos in enumerate(positions):
            mark = row["label"][label_offsets[pos][0]:label_offsets[pos][1]].strip()
            if mark not in ("+", "-"):
                return f"step {k + 1}'s label token reads {mark!r}, not '+' or '-'"
        if [a for i, a in enumerate(got) if i not in at] != [b for i, b in enumerate(label_ids) if i not in at]:
            return "the label text does not tokenize like the input outside the tag positions"
    return None


def consumer_ids(fmt: str, tokenizer: Any, tag: str, soft: bool) -> dict[str, int]:
    """The one-token checks each consumer makes before reading any row (exit 2 here instead of an
    assertion in the trainer)."""
    if fmt == "trl":
        return {}
    hint = (": add it to the tokenizer as a special token, or pick one of the tokenizer's own special tokens "
            "with --placeholder (docs/export.md)")
    ids = {"tag": single_token_id(tokenizer, tag, "the step tag", hint)}
    if fmt == "openrlhf" and not soft:
        # OpenRLHF's --reward_tokens + - are converted the same way; its loss then reads them.
        ids["+"] = single_token_id(tokenizer, "+", "OpenRLHF's reward token")
        ids["-"] = single_token_id(tokenizer, "-", "OpenRLHF's reward token")
    return ids
