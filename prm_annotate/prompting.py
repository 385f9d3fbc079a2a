"""Rendering of prompt files: the one place that turns a template plus data into prompt text.

The judge stage and the arithmetic world's judge training both call `render_judge_prompt`, so the
tiny judge model sees at training time exactly the prompt the pipeline gives it.
"""
from __future__ import annotations

import re

# Placeholders are substituted in ONE pass, so a problem that happens to contain "{paragraphs}" is
# left alone, and everything else in the template (such as a literal "\boxed{}") is kept verbatim.
_PLACEHOLDER = re.compile(r"\{(problem|paragraphs)\}")


def tag_paragraphs(steps: list[str], start: int = 0) -> str:
    """ProcessBench's tagging: `<paragraph_i>\\nSTEP\\n</paragraph_i>` joined by blank lines, from
    `start` (0 for ProcessBench; the paper's prompt numbers from 1)."""
    return "\n\n".join(f"<paragraph_{i}>\n{step}\n</paragraph_{i}>" for i, step in enumerate(steps, start))


def render_judge_prompt(template_text: str, problem: str, steps: list[str], *, start: int = 0) -> str:
    """Fill `{problem}` and `{paragraphs}` in a judge template (e.g. prompts/judge_processbench.txt)."""
    if "{paragraphs}" not in template_text:
        raise ValueError("judge template has no {paragraphs} placeholder")
    values = {"problem": problem.strip(), "paragraphs": tag_paragraphs(steps, start)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template_text)
