"""The command-line options of the model stages' configs (stages/config.py), one dict per config:
a field's `typer.Option`, or for `sampling` its options (cli/sampling_options.py). A command takes
its config as `config: Annotated[SampleConfig, SAMPLE_OPTIONS]` (see option_groups); a field left
out of the dict is not an option and keeps its default. Help texts are one sentence: the config's
`Attributes:` and docs/pipeline.md say the rest.
"""
from __future__ import annotations

from typing import Any

import typer

from prm_annotate.cli.sampling_options import sampling_options
from prm_annotate.judging import JUDGE_PROTOCOLS, JUDGE_STYLES
from prm_annotate.judging.protocols import DEFAULT_MAX_TOKENS as JUDGE_MAX_TOKENS
from prm_annotate.prompt_files import DEFAULT_SYSTEM_PROMPT, SYSTEM_PROMPTS
from prm_annotate.steps import decode_sep
from prm_annotate.strategies import strategies_help
from prm_annotate.strategies.zero_rules import DEFAULT_TOLERANCE, zero_rules_help

STEP_SEP = typer.Option("--step-sep", help="Step separator (backslash escapes allowed).", callback=decode_sep,
                        show_default=r"\n\n")


def _system_prompts_help() -> str:
    names = ", ".join(SYSTEM_PROMPTS)
    return (f"System prompt: built-in {names} (prompts/), a FILE, or none (default: {DEFAULT_SYSTEM_PROMPT}, "
            "the paper's policies' prompt).")


def _protocols_help() -> str:
    return "How the judge is sampled and read: " + "; ".join(
        f"{name}: {p.description}" for name, p in JUDGE_PROTOCOLS.items()) + "."


def _styles_help() -> str:
    listed = " or ".join(f"{name} ({s.description})" for name, s in JUDGE_STYLES.items())
    return f"Answer style of a --prompt FILE that declares none in its header: {listed}."


SAMPLE_OPTIONS: dict[str, Any] = {
    "n": typer.Option("-n", "--num-samples", min=1, help="Responses per problem."),
    "sampling": sampling_options("response", "response"),
    "step_sep": STEP_SEP,
    "system_prompt": typer.Option("--system-prompt", help=_system_prompts_help()),
    "reasoning": typer.Option("--reasoning", show_default="auto", help=(
        "Tell a thinking policy's thought from its answer: auto, think, off, or a vLLM reasoning parser "
        "(docs/pipeline.md).")),
}

ROLLOUT_OPTIONS: dict[str, Any] = {
    "k": typer.Option("-k", "--k", min=1, help="Completions per step."),
    "label": typer.Option("--label", help=(
        "hard|soft, recorded as mc.label (soft needs --strategy exhaustive; export takes MC scores as labels "
        "with its own --soft).")),
    "strategy": typer.Option("--strategy", help=strategies_help()),
    "judged": typer.Option("--judged", help=(
        "With --strategy verify: the judge's output on these responses, whose first errors MC checks.")),
    "threshold": typer.Option("--threshold", min=0.0, max=1.0,
                              help="Hard label = score > threshold (0: any right completion)."),
    "zero_rule": typer.Option("--zero-rule", help=zero_rules_help()),
    "zero_tolerance": typer.Option("--zero-tolerance", show_default=str(DEFAULT_TOLERANCE), help=(
        "With --zero-rule beta-binomial: the largest chance, under its prior, that the rest of the K would "
        "have made a step it calls 0 a 1.")),
    "sampling": sampling_options("completion", "completion"),
    "step_sep": STEP_SEP,
    "system_prompt": typer.Option("--system-prompt", help=(
        "System prompt to continue under (a built-in name, a FILE, or none; default: each response's own).")),
    "force_system_prompt": typer.Option("--force-system-prompt/--no-force-system-prompt", metavar="", help=(
        "Continue under --system-prompt even where the responses were sampled under another.")),
    "cut_completions": typer.Option("--cut-completions", help=(
        "What a completion cut at --max-tokens counts as: graded (on its text), wrong or right.")),
    "share_prefixes": typer.Option("--share-prefixes/--no-share-prefixes", metavar="", help=(
        "Roll out identical step prefixes of one problem's responses once.")),
    "speculate": typer.Option("--speculate", min=0, show_default=False, help=(
        "Probes early-stop, binary and scan may start before a round asks for them (0: off; default: 256 "
        "in process, 0 over HTTP).")),
}

# The judge's sampling options are given or not (None: the protocol's value); the defaults shown
# are the strict protocol's.
JUDGE_OPTIONS: dict[str, Any] = {
    "prompt": typer.Option("--prompt", show_default="paper", help=(
        "paper (the paper's protocol) | processbench (ProcessBench's critic template) | a template FILE.")),
    "style": typer.Option("--style", help=_styles_help()),
    "protocol": typer.Option("--protocol", help=_protocols_help()),
    "votes": typer.Option("--votes", min=1, help="Verdicts per response, made one first error as --protocol says."),
    "sampling": sampling_options(
        "verdict", "vote", temperature={"help": "Default: 0 with one vote, 0.7 with several."},
        top_p={"show_default": "1.0"}, top_k={"show_default": "0"}, max_tokens={"show_default": str(JUDGE_MAX_TOKENS)},
        seed={"show_default": "0"}),
    "constrained": typer.Option("--constrained/--no-constrained", metavar="",
                                help="Force the verdict's answer (vLLM structured outputs)."),
    "reasoning": typer.Option("--reasoning", show_default="auto", help=(
        "Split a reasoning judge's thought off before parsing: auto, think, off, or a vLLM reasoning parser "
        "(docs/pipeline.md).")),
    "keep_reasoning": typer.Option("--keep-reasoning/--no-keep-reasoning", metavar="",
                                   help="Keep each vote's thought in judge.reasoning (long)."),
}
