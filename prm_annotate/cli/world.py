from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import app
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
    as_json: Annotated[bool, typer.Option("--json/--no-json", metavar="", help="Print the report as one JSON object.")] = False,
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


@world_app.command("prm")
def prm_experiment(
    workdir: Annotated[Path, typer.Option("--workdir", help="Folder of the run: the report, the PRMs, results.json, world-prm.png (a rerun continues it).")] = Path("runs/world-prm"),
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Seeds (0..N-1) per label source; more extend a finished run.")] = 3,
    train_problems: Annotated[int, typer.Option("--train-problems", min=2, help="Problems whose responses train (and validate) the PRMs.")] = 500,
    heldout_problems: Annotated[int, typer.Option("--heldout-problems", min=1, help="Problems held out for the measurement.")] = 400,
    n: Annotated[int, typer.Option("-n", "--num-samples", min=1, help="Responses per problem (Best-of-N up to N).")] = 8,
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Rollouts per step.")] = 8,
    report_seed: Annotated[int, typer.Option("--report-seed", help="Seed of the world report (the labels, shared by every seed).")] = 0,
    val_share: Annotated[float, typer.Option("--val-share", min=0.01, max=0.5, help="Share of the training problems drawn (per seed) for validation.")] = 0.1,
    head: Annotated[str, typer.Option("--head", help="train --head of every PRM: likelihood or qwen.")] = "likelihood",
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="The step cap of every PRM.")] = 1000,
    eval_every: Annotated[int, typer.Option("--eval-every", min=1, help="Steps between validations (and checkpoints).")] = 50,
    patience: Annotated[int, typer.Option("--patience", min=1, help="Validations without a better F1 before a PRM stops.")] = 3,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Responses per step.")] = 16,
    lr: Annotated[float, typer.Option("--lr", min=0, help="Peak learning rate.")] = 3e-3,
    base: Annotated[Optional[Path], typer.Option("--base", help="The PRMs' base model (default: the shipped prm-base; the policy: prm_annotate/world/models/policy).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results.json instead of the table.")] = False,
) -> None:
    """The paper's claim with confidence intervals: PRMs trained on MC (hard, soft), judge, consensus and
    size-matched MC labels of one world report (and on the true labels, and on them shuffled: the control), several seeds each, measured against the truth on held-out
    problems (ProcessBench F1, step AUC, Best-of-N), with paired bootstrap intervals; results.json and a PNG."""
    import orjson

    from prm_annotate.cli.app import handled
    from prm_annotate.errors import require
    from prm_annotate.world.prm_experiment import ExperimentConfig, run_experiment
    from prm_annotate.world.prm_results import plot_results, print_results

    with handled():
        # Checked first: the picture is drawn after the whole run.
        require("matplotlib", "world prm (its plot)", "pip install -e '.[plot]' in the repository")
        cfg = ExperimentConfig(workdir=workdir, seeds=seeds, train_problems=train_problems,
                               heldout_problems=heldout_problems, n=n, k=k, report_seed=report_seed,
                               val_share=val_share, max_steps=max_steps, eval_every=eval_every, patience=patience,
                               batch_size=batch_size, lr=lr, head=head,
                               **({"base": base} if base is not None else {}))
        summary = run_experiment(cfg)
        plot_results(summary, workdir / "world-prm.png")
    if as_json:
        typer.echo(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        print_results(summary)
        typer.echo(f"results: {workdir / 'results.json'}, picture: {workdir / 'world-prm.png'}")
