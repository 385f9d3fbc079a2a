from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import JsonOpt, app
from prm_annotate.engines.defaults import START_TIMEOUT
from prm_annotate.engines.quiet import quiet_libraries

VerboseOpt = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Show the libraries' warnings, logs and progress bars (off: the pipeline's own lines only).")]

world_app = typer.Typer(help="The arithmetic world: a miniature of the method where the truth is known.",
                        no_args_is_help=True)
app.add_typer(world_app, name="world")


@world_app.command()
def report(
    problems: Annotated[int, typer.Option("--problems", min=1, help="Problems to generate.")] = 40,
    n: Annotated[int, typer.Option("-n", "--num-samples", min=1, help="Responses per problem.")] = 4,
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Rollouts per step.")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the problems and of every stage.")] = 0,
    workdir: Annotated[Path, typer.Option("--workdir", help="Folder for the stage files (emptied of an earlier report's).")] = Path("runs/world"),
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per response and per completion.")] = 128,
    judge_max_tokens: Annotated[int, typer.Option("--judge-max-tokens", min=1, help="Tokens per verdict.")] = 256,
    start_timeout: Annotated[float, typer.Option("--start-timeout", min=1, help="Seconds to wait for each engine.")] = START_TIMEOUT,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="vLLM dtype of both models (default: float32 on CPU).")] = None,
    as_json: JsonOpt = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an unfinished report with the same settings in --workdir (otherwise its files are replaced).")] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run sample -> rollout -> judge -> consensus with the world's tiny models and score every label
    source against the true first errors (ProcessBench metric, kept-label precision, tokens)."""
    import orjson

    from prm_annotate.cli.app import EXIT_INTERRUPTED, EXIT_USAGE
    from prm_annotate.engines import exit_process
    from prm_annotate.world.report import ReportConfig, label_quality, print_report, run_pipeline

    from prm_annotate.cli.app import handled
    from prm_annotate.errors import ENGINE_INSTALL, require

    with handled():
        require("vllm", "world report", ENGINE_INSTALL)
    if not verbose:
        quiet_libraries()
    cfg = ReportConfig(problems=problems, n=n, k=k, seed=seed, workdir=workdir, max_tokens=max_tokens,
                       judge_max_tokens=judge_max_tokens, start_timeout=start_timeout, dtype=dtype, verbose=verbose,
                       resume=resume)
    # Engines run in this process: leave by exit_process once they are closed (vLLM can abort a
    # normal interpreter exit), whatever happened.
    code = 0
    try:
        timings, failures = run_pipeline(cfg)
        result = label_quality(cfg, timings, failures)
        if as_json:
            typer.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        else:
            print_report(result)
        code = 1 if failures else 0
    except KeyboardInterrupt:
        typer.echo("prm-annotate: interrupted", err=True)
        code = EXIT_INTERRUPTED
    except Exception as exc:  # an engine that did not start, a stage that raised
        import traceback

        traceback.print_exc()
        typer.echo(f"prm-annotate: error: world report failed: {type(exc).__name__}: {exc}", err=True)
        code = EXIT_USAGE if isinstance(exc, (OSError, ValueError)) else 1
    exit_process(code)

