"""`--format trl`: TRL's stepwise-supervision rows `{"prompt", "completions": [steps], "labels": [bool]}`,
what `PRMTrainer` (trl.experimental.prm, TRL <= 1.13) tokenizes; its step separator is a trainer
setting (`PRMConfig.step_separator`, given to the checks here as --step-sep), not part of the data."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.export.formats import ExportFormat, ExportOptions
from prm_annotate.export.placement import Misplaced, TokenCheck

TRL_CONSUMER = "TRL's PRMTrainer.tokenize_row"


def trl_label_positions(row: dict[str, Any], tokenizer: Any, step_separator: str,
                        max_completion_length: int | None = None) -> list[int | None]:
    """Token positions of the labels as TRL's PRMTrainer.tokenize_row places them: BOS (if any),
    the prompt, then each step followed by the separator, its label on the separator's last token.
    None for a label that `max_completion_length` cuts off first."""
    prompt = len(tokenizer(row["prompt"], add_special_tokens=False)["input_ids"])
    if tokenizer.bos_token_id is not None:
        prompt += 1
    sep = len(tokenizer.encode(step_separator, add_special_tokens=False))
    positions: list[int | None] = []
    offset = 0
    for step in row["completions"]:
        offset += len(tokenizer(step, add_special_tokens=False)["input_ids"]) + sep
        cut = max_completion_length is not None and offset - 1 >= max_completion_length
        positions.append(None if cut else prompt + offset - 1)
    return positions


@dataclass(frozen=True)
class Stepwise(ExportFormat):
    def fields(self, problem: str, steps: list[str], values: list[Any], opts: ExportOptions,
               check: TokenCheck | None) -> dict[str, Any]:
        return {"prompt": problem, "completions": steps, "labels": values}

    def check_placement(self, row: dict[str, Any], opts: ExportOptions, check: TokenCheck) -> None:
        # TRL's tokenize_row labels the last token of step + separator, each encoded on its own.
        tokenizer = check.tokenizer
        if tokenizer.encode(opts.sep, add_special_tokens=False):
            return
        for k, step in enumerate(row["completions"]):
            if not tokenizer.encode(step, add_special_tokens=False):
                raise Misplaced(f"step {k + 1} is empty and the step separator is no token: "
                                "its label would land on the next step")

    def label_positions(self, row: dict[str, Any], opts: ExportOptions, tokenizer: Any,
                        max_completion_length: int | None) -> list[int | None]:
        return trl_label_positions(row, tokenizer, opts.sep, max_completion_length)


FORMAT = Stepwise("trl", summary="TRL's stepwise-supervision rows (prompt, completions, labels)", consumer=TRL_CONSUMER,
                  completion_limit=True)
