"""One frozen settings object per model stage: the command's options (an option group, see
cli/option_groups.py), the stage's `config`, and what its manifest records (`settings()`).

The options the three share (temperature, top-p, max tokens, seed, step separator, system prompt)
are declared once here; each config words their help for what it generates.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Optional

import typer

from prm_annotate.errors import UsageError
from prm_annotate.judging import JUDGE_STYLES
from prm_annotate.steps import decode_sep
from prm_annotate.strategies import strategies_help


def _temperature(default_help: str = "") -> Any:
    return Annotated[float, typer.Option("--temperature", min=0.0, help=default_help or None)]


TopP = Annotated[float, typer.Option("--top-p", min=0.0, max=1.0)]
StepSep = Annotated[str, typer.Option("--step-sep", help="Step separator (backslash escapes allowed).",
                                     callback=decode_sep, show_default=r"\n\n")]


def _max_tokens(what: str) -> Any:
    return Annotated[int, typer.Option("--max-tokens", min=1, help=f"Tokens per {what}.")]


def _seed(what: str) -> Any:
    return Annotated[int, typer.Option("--seed", help=f"Run seed; each {what}'s seed derives from it.")]


def _system_prompt(default: str) -> Any:
    return Annotated[Optional[str], typer.Option("--system-prompt", help=default)]


def _styles_help() -> str:
    listed = " or ".join(f"{name} ({s.description})" for name, s in JUDGE_STYLES.items())
    return f"Answer style of a --prompt FILE that declares none in its header: {listed}."


def entry(config: Any) -> dict[str, Any]:
    """The config as a manifest records it."""
    return dataclasses.asdict(config)


@dataclass(frozen=True)
class SampleConfig:
    n: Annotated[int, typer.Option("-n", "--num-samples", min=1, help="Responses per problem.")] = 8
    temperature: _temperature() = 0.7
    top_p: TopP = 1.0
    max_tokens: _max_tokens("response") = 1024
    seed: _seed("response") = 0
    step_sep: StepSep = "\n\n"
    system_prompt: _system_prompt(
        "System prompt file, or none for no system prompt (default: prompts/sample_system.txt).") = None



@dataclass(frozen=True)
class RolloutConfig:
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Completions per step.")] = 8
    label: Annotated[str, typer.Option("--label", help=(
        "hard|soft, recorded as mc.label: soft needs every step's score (--strategy exhaustive). "
        "export takes MC scores as labels with its own --soft; first_error is always hard."))] = "hard"
    strategy: Annotated[str, typer.Option("--strategy", help=strategies_help())] = "exhaustive"
    threshold: Annotated[float, typer.Option(
        "--threshold", min=0.0, max=1.0, help="Hard label = score > threshold (0: any right completion).")] = 0.0
    temperature: _temperature() = 0.7
    top_p: TopP = 1.0
    max_tokens: _max_tokens("completion") = 1024
    seed: _seed("completion") = 0
    step_sep: StepSep = "\n\n"
    system_prompt: _system_prompt(
        "System prompt file, or none, as given to sample (default: prompts/sample_system.txt).") = None
    share_prefixes: Annotated[bool, typer.Option("--share-prefixes/--no-share-prefixes", metavar="", help=(
        "Roll out identical step prefixes of one problem's responses once (seeds from the prefix, not the "
        "response id); with binary/scan also take prefixes of right solutions as 1 without sampling."))] = False
    speculate: Annotated[Optional[int], typer.Option("--speculate", min=0, show_default=False, help=(
        "With early-stop, binary or scan: once no new record can start (the end of the input, or a full "
        "window) and while fewer than this many requests are in flight, start probes ahead of the round that "
        "may ask for them (the rest of a step's completions; binary/scan also the next step's first one); "
        "the limit grows as such probes prove needed (this / the share wasted, up to 4096); each is "
        "cancelled as soon as it is no longer needed. Spends a few tokens to save rounds where the "
        "engine has room; the labels are the same. 0: off. Default: 256 in process, 0 over HTTP (a "
        "cancelled HTTP request still runs on the server)."))] = None

    def __post_init__(self) -> None:
        if self.label not in ("hard", "soft"):
            raise UsageError(f"--label {self.label}: choose hard or soft")
        if not 0.0 <= self.threshold < 1.0:
            raise UsageError("--threshold must be below 1 (a hard label is score > threshold)")


@dataclass(frozen=True)
class JudgeConfig:
    prompt: Annotated[str, typer.Option(
        "--prompt", help="paper | processbench | a template FILE with {problem} and {paragraphs}.")] = "processbench"
    style: Annotated[Optional[str], typer.Option("--style", help=_styles_help())] = None
    votes: Annotated[int, typer.Option(
        "--votes", min=1, help="Verdicts per response; the majority wins, ties go to the earliest error.")] = 1
    temperature: Annotated[Optional[float], typer.Option(
        "--temperature", min=0.0, help="Default: 0 with one vote, 0.7 with several.")] = None
    top_p: TopP = 1.0
    max_tokens: _max_tokens("verdict") = 2048
    seed: _seed("vote") = 0
    constrained: Annotated[bool, typer.Option("--constrained/--no-constrained", metavar="", help=(
        "Force the verdict's format (vLLM structured outputs) so it always parses."))] = False

    @property
    def sampling_temperature(self) -> float:
        """`temperature`, or by default greedy for one vote and 0.7 for several: identical greedy
        votes would make voting pointless."""
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.votes == 1 else 0.7
