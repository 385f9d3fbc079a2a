"""Judge prompts: the built-in ones with the answer style each declares, a user's file with the
style its header declares, and the one way a template is filled.

A prompt file of one's own declares its answer style in a header, which is not sent to the judge:

    ---
    style: paper
    ---
    ...the template, with {problem} and {paragraphs}...

`--style` says it instead for a file without a header. The style is never read from a name: a
paper-style prompt under any name is parsed as the paper's, and a file that declares nothing is
refused before any engine starts (a wrong parser would write a null verdict for every response).

`render_judge_prompt` is the one place that turns a template plus data into prompt text: the judge
stage and the arithmetic world's judge training both call it, so the tiny judge model sees at
training time exactly the prompt the pipeline gives it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from prm_annotate.errors import UsageError
from prm_annotate.judging.styles import JudgeStyle
from prm_annotate.io.prompt_files import BuiltinPrompt, PromptFile, load_prompt
from prm_annotate.registry import Registry


@dataclass(frozen=True)
class BuiltinJudgePrompt(BuiltinPrompt):
    style: str = ""  # the answer style it is written for


JUDGE_PROMPTS: Registry[BuiltinJudgePrompt] = Registry(
    "--prompt", "The judge's prompt: a template FILE with {problem} and {paragraphs}, or a built-in one",
    "docs/pipeline.md", (
        BuiltinJudgePrompt("paper", "the paper's protocol", "judge_paper.txt", "paper"),
        BuiltinJudgePrompt("processbench", "ProcessBench's critic template", "judge_processbench.txt", "processbench"),
        BuiltinJudgePrompt("slips", "every slip and its correction: --protocol recovery's", "judge_slips.txt", "slips"),
        BuiltinJudgePrompt("deltabench", "DeltaBench's critic task", "critic_deltabench.txt", "deltabench"),
    ))

_HEADER = re.compile(r"\A---\n((?:[^\n]*\n)*?)---\n")


@dataclass(frozen=True)
class JudgePrompt:
    file: PromptFile  # its `text` is the template alone, without the header
    style: JudgeStyle

    @property
    def name(self) -> str:
        return self.file.name


def read_header(file: PromptFile) -> tuple[dict[str, str], PromptFile]:
    """The `key: value` lines of a leading `---` block, and the file without it."""
    m = _HEADER.match(file.text)
    if m is None:
        return {}, file
    header: dict[str, str] = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if not sep or key.strip() != "style":
            raise UsageError(f"{file.path}: the header line {line!r} is not `style: NAME`")
        header["style"] = value.strip()
    return header, replace(file, text=file.text[m.end():])


def load_judge_prompt(choice: str, style: str | None, styles: dict[str, JudgeStyle]) -> JudgePrompt:
    """A built-in prompt (`choice` names one) or a template file, and its answer style: `style` if
    given, else the one the prompt declares. UsageError (exit 2) for no style or an unknown one."""
    header, file = read_header(load_prompt(choice, JUDGE_PROMPTS))
    check_judge_template(file.text, file.path)
    declared = JUDGE_PROMPTS[choice].style if choice in JUDGE_PROMPTS else header.get("style")
    name = style or declared
    if name is None:
        raise UsageError(f"{file.path}: the prompt declares no answer style: start it with a `---` / `style: NAME` / "
                         f"`---` header or give --style ({' or '.join(styles)})")
    if name not in styles:
        raise UsageError(f"{'--style' if style else file.path + ': style'} {name}: choose {' or '.join(styles)}")
    return JudgePrompt(file, styles[name])


# Placeholders are substituted in ONE pass, so a problem that happens to contain "{paragraphs}" is
# left alone, and everything else in the template (such as a literal "\boxed{}") is kept verbatim.
_PLACEHOLDER = re.compile(r"\{(problem|paragraphs|sections)\}")


def check_judge_template(text: str, where: str) -> None:
    """A judge template must show the response: UsageError (exit 2) naming `where` if it cannot
    (`{sections}`, DeltaBench's layout, shows it too)."""
    if "{paragraphs}" not in text and "{sections}" not in text:
        raise UsageError(f"{where}: a judge prompt needs a {{paragraphs}} placeholder")


def tag_paragraphs(steps: list[str], start: int = 0) -> str:
    """ProcessBench's tagging: `<paragraph_i>\\nSTEP\\n</paragraph_i>` joined by blank lines, from
    `start` (0 for ProcessBench; the paper's prompt numbers from 1)."""
    return "\n\n".join(f"<paragraph_{i}>\n{step}\n</paragraph_{i}>" for i, step in enumerate(steps, start))


def name_sections(steps: list[str], start: int = 1) -> str:
    """DeltaBench's layout of a trace: `section1:` then the section's text, blank lines between."""
    return "\n\n".join(f"section{i}:\n{step}" for i, step in enumerate(steps, start))


def render_judge_prompt(template_text: str, problem: str, steps: list[str], *, start: int = 0,
                        problem_as_given: bool = False) -> str:
    """Fill `{problem}` and `{paragraphs}` (or `{sections}`, DeltaBench's `section1:` layout) in a
    judge template (e.g. prompts/judge_processbench.txt).
    The problem is stripped unless `problem_as_given` (the official ProcessBench script inserts it raw)."""
    check_judge_template(template_text, "judge template")
    values = {"problem": problem if problem_as_given else problem.strip(), "paragraphs": tag_paragraphs(steps, start),
              "sections": name_sections(steps, start)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template_text)
