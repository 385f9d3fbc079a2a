"""`--format tokens`: `input_ids`, `attention_mask`, `labels` for a token classification head: the
conversation in the tokenizer's chat template, a step-end marker after each step, and labels on
the marker tokens only (IGNORE elsewhere)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.errors import UsageError
from prm_annotate.export.formats import ExportFormat, ExportOptions
from prm_annotate.export.placement import Misplaced, TokenCheck, encode_with_offsets, single_token_id

IGNORE = -100  # transformers' ignore index for token classification and LM losses
# Default step-end markers, in order of preference: Qwen's PRM token when the tokenizer has it,
# Math-Shepherd's tag (one "▁ки" piece in Llama/Mistral SentencePiece vocabularies), then a blank
# line or a newline (one token in most byte-level BPEs).
STEP_END_CANDIDATES = ("<extra_0>", " ки", "\n\n", "\n")


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


@dataclass(frozen=True)
class Tokens(ExportFormat):
    def token_check(self, opts: ExportOptions, tokenizer: Any) -> TokenCheck:
        step_end = opts.step_end if opts.step_end is not None else default_step_end(tokenizer, opts.sep)
        return TokenCheck(tokenizer, single_token_id(tokenizer, step_end, "--step-end"), step_end)

    def fields(self, problem: str, steps: list[str], values: list[Any], opts: ExportOptions,
               check: TokenCheck | None) -> dict[str, Any]:
        """`input_ids`, `attention_mask` and `labels` (IGNORE except on each step's end marker);
        the labels are placed by construction, so a marker that cannot carry one is Misplaced here.
        `check` is always there: iter_rows refuses this format without a tokenizer."""
        got = _tokens(check.tokenizer, problem, steps, check.step_end, check.tag_id, opts.sep)
        if isinstance(got, str):
            raise Misplaced(got)
        ids, positions = got
        soft = any(isinstance(v, float) for v in values)
        labels: list[Any] = [float(IGNORE) if soft else IGNORE] * len(ids)
        for pos, value in zip(positions, values):
            labels[pos] = float(value) if soft else int(value)
        return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels}

    def label_positions(self, row: dict[str, Any], opts: ExportOptions, tokenizer: Any,
                        max_completion_length: int | None) -> list[int | None]:
        return [i for i, v in enumerate(row["labels"]) if v != IGNORE]


FORMAT = Tokens("tokens", summary="token ids with a label on each step-end marker (needs --tokenizer)",
                consumer="a token classification head", soft=True, tagged=True, step_end=True,
                needs_tokenizer=True)
