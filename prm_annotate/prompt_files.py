"""The prompt registry: which prompt files are built in, how one is loaded, how a judge template
is filled. The one place for prompts: stages, the CLI and the world's lab tools all come here.

Prompt files are the built-in ones in `prompts/` at the top of the project, or a user's own file.
A run records which prompt it used by name and by sha256, so a manifest tells apart two runs
whose prompt file changed in between.

`render_judge_prompt` is the one place that turns a judge template plus data into prompt text:
the judge stage and the arithmetic world's judge training both call it, so the tiny judge model
sees at training time exactly the prompt the pipeline gives it.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from prm_annotate.errors import UsageError

# prm_annotate/prompts links to the top-level prompts/ folder, so wheels carry the prompt files too.
PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

# Built-in prompts by name, per use (the file names are in prompts/).
SYSTEM_PROMPTS = {"default": "sample_system.txt"}  # the policy's system prompt: sample and rollout
JUDGE_PROMPTS = {"paper": "judge_paper.txt", "processbench": "judge_processbench.txt"}


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


def load_prompt(choice: str, builtin: dict[str, str] | None = None, *, allow_none: bool = False) -> PromptFile:
    """`choice` is a built-in name (a key of `builtin`, mapping to a file in prompts/) or a path;
    with `allow_none`, "none" is the empty prompt (the conversation then has no system message)."""
    if allow_none and choice == NO_PROMPT:
        return PromptFile(name=NO_PROMPT, path="", text="")
    builtin = builtin or {}
    if choice in builtin:
        path = PROMPTS_DIR / builtin[choice]
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


# --- judge templates ------------------------------------------------------------------------

# Placeholders are substituted in ONE pass, so a problem that happens to contain "{paragraphs}" is
# left alone, and everything else in the template (such as a literal "\boxed{}") is kept verbatim.
_PLACEHOLDER = re.compile(r"\{(problem|paragraphs)\}")


def check_judge_template(text: str, where: str) -> None:
    """A judge template must show the response: UsageError (exit 2) naming `where` if it cannot."""
    if "{paragraphs}" not in text:
        raise UsageError(f"{where}: a judge prompt needs a {{paragraphs}} placeholder")


def tag_paragraphs(steps: list[str], start: int = 0) -> str:
    """ProcessBench's tagging: `<paragraph_i>\\nSTEP\\n</paragraph_i>` joined by blank lines, from
    `start` (0 for ProcessBench; the paper's prompt numbers from 1)."""
    return "\n\n".join(f"<paragraph_{i}>\n{step}\n</paragraph_{i}>" for i, step in enumerate(steps, start))


def render_judge_prompt(template_text: str, problem: str, steps: list[str], *, start: int = 0) -> str:
    """Fill `{problem}` and `{paragraphs}` in a judge template (e.g. prompts/judge_processbench.txt)."""
    check_judge_template(template_text, "judge template")
    values = {"problem": problem.strip(), "paragraphs": tag_paragraphs(steps, start)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template_text)
