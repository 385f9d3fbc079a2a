"""The judge's side of the method: its prompts, its answer styles and how its verdicts are read.

    prompt = load_judge_prompt("paper", None)        # a JudgePrompt: template file + answer style
    text = render_judge_prompt(prompt.file.text, problem, steps, start=prompt.style.first_paragraph)
    first_error = prompt.style.parse(verdict, len(steps))   # or ParseFailure: recorded, never guessed

Add an answer style: a module with its `STYLE` (a `JudgeStyle`), one entry in `JUDGE_STYLES`
below, and its test; `judge --style` lists it, and a prompt file declares it in its header.
A protocol (how the judge is sampled and its votes read: protocols.py) is added the same way, as
a `JudgeProtocol` in `JUDGE_PROTOCOLS`; `judge --protocol` lists it.
"""
from __future__ import annotations

from prm_annotate.judging import paper, processbench
from prm_annotate.judging import processbench_official, protocols
from prm_annotate.judging import deltabench, slips
from prm_annotate.judging.prompts import (JUDGE_PROMPTS, JudgePrompt, check_judge_template, render_judge_prompt,
                                          tag_paragraphs)
from prm_annotate.judging.prompts import load_judge_prompt as _load
from prm_annotate.judging.protocols import JudgeProtocol, Reading
from prm_annotate.judging.styles import JudgeStyle, ParseFailure, reason_kind
from prm_annotate.judging.votes import aggregate_votes
from prm_annotate.registry import Registry

JUDGE_STYLES: Registry[JudgeStyle] = Registry("--style", "Answer style of a --prompt FILE that declares none in its "
                                               "header", "docs/pipeline.md", (
    processbench.STYLE,
    paper.STYLE,
    slips.STYLE,
    deltabench.STYLE,
))

JUDGE_PROTOCOLS: Registry[JudgeProtocol] = Registry("--protocol", "How the judge is sampled and read", "docs/pipeline.md", (
    protocols.STRICT,
    processbench_official.PROTOCOL,
    slips.PROTOCOL,
))


def load_judge_prompt(choice: str, style: str | None = None) -> JudgePrompt:
    """A built-in prompt by name or a template file, with its declared answer style (or `style`)."""
    return _load(choice, style, JUDGE_STYLES)


def read_verdict(text: str, n_steps: int, style: str = "processbench") -> int | None:
    """The first error a verdict gives, by the style's strict parser; None where the judge stage
    counts a parse failure. For readers that only score verdicts (the world's measurements)."""
    try:
        return JUDGE_STYLES.named(style).parse(text, n_steps)
    except ParseFailure:
        return None


__all__ = ["JUDGE_PROMPTS", "JUDGE_PROTOCOLS", "JUDGE_STYLES", "JudgePrompt", "JudgeProtocol", "JudgeStyle",
           "ParseFailure", "Reading", "aggregate_votes", "check_judge_template", "load_judge_prompt",
           "read_verdict", "reason_kind", "render_judge_prompt", "tag_paragraphs"]
