"""One frozen settings object per model stage: the command's options (an option group, see
cli/option_groups.py), the stage's `config`, and what its manifest records (`settings()`).

The options the three share (temperature, top-p, top-k, max tokens, seed, step separator, system
prompt) are declared once here; each config words their help for what it generates.

Token budgets: 2,048 per response and per completion, the budget Qwen2.5-Math's own evaluation
gives its Instruct models (the paper's policies; their context is 4,096 tokens), so a completion
has at least the room the response it continues had. A judge verdict gets 8,192, what ProcessBench
gives critics: the paper protocol's analyses of a long solution need it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Optional

import typer

from prm_annotate.errors import UsageError
from prm_annotate.judging import JUDGE_PROTOCOLS, JUDGE_STYLES
from prm_annotate.engines.reasoning import reasoning_parsers
from prm_annotate.judging.protocols import DEFAULT_MAX_TOKENS as JUDGE_MAX_TOKENS
from prm_annotate.judging.protocols import REASONING_MAX_TOKENS
from prm_annotate.prompt_files import DEFAULT_SYSTEM_PROMPT, SYSTEM_PROMPTS
from prm_annotate.steps import decode_sep
from prm_annotate.strategies import strategies_help


def _temperature(default_help: str = "") -> Any:
    return Annotated[float, typer.Option("--temperature", min=0.0, help=default_help or None)]


TopP = Annotated[float, typer.Option("--top-p", min=0.0, max=1.0)]
TopK = Annotated[int, typer.Option("--top-k", min=0, help="Sample from the k likeliest tokens only; 0: off.")]
POLICY_MAX_TOKENS = 2048
StepSep = Annotated[str, typer.Option("--step-sep", help="Step separator (backslash escapes allowed).",
                                     callback=decode_sep, show_default=r"\n\n")]


def _max_tokens(what: str) -> Any:
    return Annotated[int, typer.Option("--max-tokens", min=1, help=f"Tokens per {what}.")]


def _seed(what: str) -> Any:
    return Annotated[int, typer.Option("--seed", help=f"Run seed; each {what}'s seed derives from it.")]


def _system_prompt(default: str) -> Any:
    return Annotated[Optional[str], typer.Option("--system-prompt", help=default)]


def _system_prompts_help() -> str:
    names = ", ".join(SYSTEM_PROMPTS)
    return (f"System prompt: built-in {names} (prompts/), a FILE, or none for no system prompt. Default: "
            f"{DEFAULT_SYSTEM_PROMPT}, Qwen2.5-Math-Instruct's chain-of-thought prompt (the paper's policies); "
            "step asks for one paragraph per step (small models, the demos).")


def _protocols_help() -> str:
    return "How the judge is sampled and read: " + "; ".join(
        f"{name}: {p.description}" for name, p in JUDGE_PROTOCOLS.items()) + "."


CUT_COMPLETIONS = ("graded", "wrong", "right")
REASONING_MODES = ("auto", "think", "off")


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
    top_k: TopK = 0
    max_tokens: _max_tokens("response") = POLICY_MAX_TOKENS
    seed: _seed("response") = 0
    step_sep: StepSep = "\n\n"
    system_prompt: _system_prompt(_system_prompts_help()) = None


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
    top_k: TopK = 0
    max_tokens: _max_tokens("completion") = POLICY_MAX_TOKENS
    seed: _seed("completion") = 0
    step_sep: StepSep = "\n\n"
    system_prompt: _system_prompt(
        "System prompt to continue under (a built-in name, a FILE, or none). Default: the one each response "
        "was sampled under (its generator.system_prompt); a different one is refused unless "
        "--force-system-prompt.") = None
    force_system_prompt: Annotated[bool, typer.Option("--force-system-prompt/--no-force-system-prompt", metavar="", help=(
        "Continue under --system-prompt even where the responses were sampled under another."))] = False
    cut_completions: Annotated[str, typer.Option("--cut-completions", help=(
        "What a completion cut at --max-tokens counts as: graded (as the grader reads its text, like any "
        "completion: most have no final answer and are wrong), wrong, or right (a step is never blamed on "
        "the budget). mc.cut counts them per step."))] = "graded"
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
        if self.cut_completions not in CUT_COMPLETIONS:
            raise UsageError(f"--cut-completions {self.cut_completions}: choose {', '.join(CUT_COMPLETIONS)}")
        if self.force_system_prompt and self.system_prompt is None:
            raise UsageError("--force-system-prompt needs --system-prompt")


@dataclass(frozen=True)
class JudgeConfig:
    """Sampling options left at None take the protocol's value (`JudgeProtocol.sampling`); a protocol that sets
    some itself (processbench-official) refuses them when given."""

    prompt: Annotated[Optional[str], typer.Option(
        "--prompt", show_default="paper", help=(
            "paper (the paper's Appendix C protocol: labels) | processbench (ProcessBench's critic template) | "
            "a template FILE with {problem} and {paragraphs}; processbench under --protocol processbench-official."
        ))] = None
    style: Annotated[Optional[str], typer.Option("--style", help=_styles_help())] = None
    protocol: Annotated[str, typer.Option("--protocol", help=_protocols_help())] = "strict"
    votes: Annotated[int, typer.Option(
        "--votes", min=1, help="Verdicts per response, made one first error as --protocol says.")] = 1
    temperature: Annotated[Optional[float], typer.Option(
        "--temperature", min=0.0, help="Default: 0 with one vote, 0.7 with several.")] = None
    top_p: Annotated[Optional[float], typer.Option("--top-p", min=0.0, max=1.0, show_default="1.0")] = None
    top_k: Annotated[Optional[int], typer.Option(
        "--top-k", min=0, show_default="0", help="Sample from the k likeliest tokens only; 0: off.")] = None
    max_tokens: Annotated[Optional[int], typer.Option(
        "--max-tokens", min=1, show_default=str(JUDGE_MAX_TOKENS), help="Tokens per verdict.")] = None
    seed: Annotated[Optional[int], typer.Option(
        "--seed", show_default="0", help="Run seed; each vote's seed derives from it.")] = None
    constrained: Annotated[bool, typer.Option("--constrained/--no-constrained", metavar="", help=(
        "Force the verdict's answer (vLLM structured outputs): a processbench index then always parses; "
        "a paper conclusion's word is forced, its analyses stay the judge's."))] = False
    reasoning: Annotated[Optional[str], typer.Option("--reasoning", show_default="auto", help=(
        "A reasoning judge's thought is split from its answer, and only the answer is parsed: auto (in process "
        "when the model's chat template writes <think> blocks; over HTTP when the server returns the reasoning "
        "apart), think (a plain <think>...</think> split), off, or a vLLM reasoning parser (deepseek_r1, qwen3, "
        "...: in process vLLM's own; over HTTP the server's --reasoning-parser). With it on, --max-tokens "
        f"defaults to {REASONING_MAX_TOKENS:,}."))] = None
    keep_reasoning: Annotated[bool, typer.Option("--keep-reasoning/--no-keep-reasoning", metavar="", help=(
        "Keep each vote's reasoning text in judge.reasoning (long); its token count is always kept."))] = False

    def __post_init__(self) -> None:
        if self.protocol not in JUDGE_PROTOCOLS:
            raise UsageError(f"--protocol {self.protocol}: choose {' or '.join(JUDGE_PROTOCOLS)}")
        JUDGE_PROTOCOLS[self.protocol].check(self)
        if self.reasoning not in (None, *REASONING_MODES):
            parsers = reasoning_parsers()
            if self.reasoning not in parsers:
                raise UsageError(f"--reasoning {self.reasoning}: choose {', '.join(REASONING_MODES)} or a vLLM reasoning "
                                 f"parser ({', '.join(parsers) or 'vLLM is not installed'})")
        if self.constrained and self.reasoning not in (None, "auto", "off"):
            raise UsageError("--constrained stops the free text at the answer lead, which a thought may write: "
                             "leave --reasoning out")

    @property
    def prompt_choice(self) -> str:
        """--prompt, or the protocol's own prompt."""
        return self.prompt or JUDGE_PROTOCOLS[self.protocol].prompt

    @property
    def run_seed(self) -> int:
        """The engine's seed (each request carries its own)."""
        return 0 if self.seed is None else self.seed
