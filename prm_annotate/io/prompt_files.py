"""Prompt files: which are built in, and how one is loaded. Stages, the CLI and the world's lab
tools all load prompts here (judge prompts and their answer styles: `prm_annotate.judging`).

Prompt files are the built-in ones in `prompts/` at the top of the project, or a user's own file.
A run records which prompt it used by name and by sha256, so a manifest tells apart two runs
whose prompt file changed in between.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry

# prm_annotate/prompts links to the top-level prompts/ folder, so wheels carry the prompt files too.
PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"

# Built-in prompts by name, per use (the file names are in prompts/; their sources: prompts/SOURCES.md).
# The policy's system prompt (sample, and rollout's completer): Qwen2.5-Math-Instruct's own
# chain-of-thought prompt, which the paper's policies were trained with and whose natural "\n\n"
# steps the paper splits, and this project's one-paragraph-per-step prompt, which the arithmetic
# world's models were trained on and small models follow better.

@dataclass(frozen=True)
class BuiltinPrompt:
    name: str
    summary: str
    file: str  # in prompts/


SYSTEM_PROMPTS: Registry[BuiltinPrompt] = Registry(
    "--system-prompt", "System prompt: a FILE, none, or a built-in one", "prompts/SOURCES.md", (
        BuiltinPrompt("qwen25-math-cot", "Qwen2.5-Math-Instruct's chain of thought, the paper's policies' prompt",
                      "system_qwen25_math_cot.txt"),
        BuiltinPrompt("step", "one paragraph per step, the arithmetic world's", "system_step.txt"),
    ))
DEFAULT_SYSTEM_PROMPT = "qwen25-math-cot"


@dataclass(frozen=True)
class PromptFile:
    name: str  # the built-in name ("paper") or the path given
    path: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


# `--system-prompt none`: no system message at all (models trained without one, e.g. many distilled
# reasoning models, are told to take none).
NO_PROMPT = "none"


def load_prompt(choice: str, builtin: Mapping[str, BuiltinPrompt] | None = None, *,
                allow_none: bool = False) -> PromptFile:
    """`choice` is a built-in name (a key of `builtin`, whose prompt names a file in prompts/) or a
    path; with `allow_none`, "none" is the empty prompt (the conversation then has no system message)."""
    if allow_none and choice == NO_PROMPT:
        return PromptFile(name=NO_PROMPT, path="", text="")
    builtin = builtin or {}
    if choice in builtin:
        path = PROMPTS_DIR / builtin[choice].file
    else:
        path = Path(choice).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        names = f" (built-in: {', '.join(builtin)})" if builtin else ""
        raise UsageError(f"{choice}: no such prompt file{names}") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise UsageError(f"{choice}: cannot read the prompt file: {exc}") from None
    if not text.strip():
        hint = " (--system-prompt none sends no system prompt)" if allow_none else ""
        raise UsageError(f"{choice}: the prompt file is empty{hint}")
    return PromptFile(name=choice, path=str(path), text=text)
