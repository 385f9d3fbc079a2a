from __future__ import annotations

from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import CommonRunOptions, InputArg, OutputOpt, StepSepOpt, app, handled
from prm_annotate.cli.engine_options import EngineOptions
from prm_annotate.cli.executor_options import ExecutorOptions
from prm_annotate.cli.option_groups import option_groups


@app.command()
@option_groups
def rollout(
    input: InputArg,
    output: OutputOpt = "-",
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Completions per step.")] = 8,
    label: Annotated[str, typer.Option("--label", help=(
        "hard|soft, recorded as mc.label: soft needs every step's score (--strategy exhaustive). "
        "export takes MC scores as labels with its own --soft; first_error is always hard."))] = "hard",
    strategy: Annotated[str, typer.Option("--strategy", help=(
        "Which probes to run: exhaustive (the paper's; the only one for --label soft), early-stop (same hard "
        "labels, fewer completions), binary (first error only, by bisection: assumes a step after a 0 "
        "stays 0) or scan (first error only, steps in order: no such assumption). "
        "See docs/rollout-strategies.md."))] = "exhaustive",
    share_prefixes: Annotated[bool, typer.Option("--share-prefixes/--no-share-prefixes", metavar="", help=(
        "Roll out identical step prefixes of one problem's responses once (seeds from the prefix, not the "
        "response id); with binary/scan also take prefixes of right solutions as 1 without sampling."))] = False,
    speculate: Annotated[Optional[int], typer.Option("--speculate", min=0, show_default=False, help=(
        "With early-stop, binary or scan: once no new record can start (the end of the input, or a full "
        "window) and while fewer than this many requests are in flight, start probes ahead of the round that "
        "may ask for them (the rest of a step's completions; binary/scan also the next step's first one); "
        "the limit grows as such probes prove needed (this / the share wasted, up to 4096); each is "
        "cancelled as soon as it is no longer needed. Spends a few tokens to save rounds where the "
        "engine has room; the labels are the same. 0: off. Default: 256 in process, 0 over HTTP (a "
        "cancelled HTTP request still runs on the server)."))] = None,
    threshold: Annotated[float, typer.Option("--threshold", min=0.0, max=1.0,
                                             help="Hard label = score > threshold (0: any right completion).")] = 0.0,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 0.7,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0)] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per completion.")] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Run seed; each completion's seed derives from it.")] = 0,
    system_prompt: Annotated[Optional[str], typer.Option(
        "--system-prompt", help="System prompt file, or none, as given to sample (default: prompts/sample_system.txt).")] = None,
    step_sep: StepSepOpt = r"\n\n",
    *,
    run_opts: CommonRunOptions = CommonRunOptions(batch_size=1024),
    engine_opts: EngineOptions,
    executor_opts: ExecutorOptions,
) -> None:
    """Monte Carlo estimation: K completions from every step prefix, graded against the gold answer."""
    from prm_annotate.cli.app import fail
    from prm_annotate.cli.model_stage import run_model_stage
    from prm_annotate.engines.defaults import SPECULATE_IN_PROCESS
    from prm_annotate.prompt_files import SYSTEM_PROMPTS, load_prompt
    from prm_annotate.stages.rollout import RolloutStage
    from prm_annotate.steps import decode_sep
    from prm_annotate.strategies import get_strategy

    with handled():
        if label not in ("hard", "soft"):
            raise fail(f"--label {label}: choose hard or soft")
        if threshold >= 1.0:
            raise fail("--threshold must be below 1 (a hard label is score > threshold)")
        opts = run_opts.run_options(input, output)
        ray = executor_opts.ray()
        config = engine_opts.config(seed=seed)
        chosen = get_strategy(strategy, label)
        prompt = load_prompt(system_prompt or "default", SYSTEM_PROMPTS, allow_none=True)
        sep = decode_sep(step_sep)
        ahead = speculate if speculate is not None else (SPECULATE_IN_PROCESS if config.kind == "vllm" else 0)

    def report_labels(stage, summary) -> None:
        if summary.written:
            typer.echo(f"rollout: {stage.stats['completions']:,} completions; {stage.stats['first_error_found']} of "
                       f"{summary.written} responses have a first error; {stage.stats['grade_errors']} completions "
                       f"could not be graded", err=True)

    run_model_stage(config, lambda engine: RolloutStage(
        engine, k=k, label=label, strategy=chosen, threshold=threshold, temperature=temperature, top_p=top_p,
        max_tokens=max_tokens, seed=seed, step_sep=sep, system_prompt=prompt,
        engine_info=config.describe(), share_prefixes=share_prefixes, speculate=ahead), opts, report_labels, ray=ray,
        input_model=RolloutStage.input_model)
