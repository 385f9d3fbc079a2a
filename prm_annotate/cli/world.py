from __future__ import annotations

import typer

from prm_annotate.cli.app import App, JsonOpt, PANEL_TOOLS, app
from prm_annotate.cli.option_groups import option_groups
from prm_annotate.world.report import ReportConfig
from prm_annotate.world.think_report import ThinkConfig
from prm_annotate.engines.quiet import quiet_libraries

world_app = App(help="The arithmetic world: a miniature of the method where the truth is known.",
                        no_args_is_help=True)
app.add_typer(world_app, name="world", rich_help_panel=PANEL_TOOLS)


@world_app.command()
@option_groups
def report(*, cfg: ReportConfig, as_json: JsonOpt = False) -> None:
    """Run sample -> rollout -> judge -> consensus with the world's tiny models and score every label
    source against the true first errors (ProcessBench metric, kept-label precision, tokens)."""
    from prm_annotate.world.report import label_quality, print_report, run_pipeline

    def make():
        timings, failures = run_pipeline(cfg)
        return label_quality(cfg, timings, failures)

    _world_run("world report", cfg, as_json, make, print_report)


@world_app.command()
@option_groups
def think(*, cfg: ThinkConfig, as_json: JsonOpt = False) -> None:
    """The thinking world: sample <think> traces with the tiny thinker -> rollout (binary, shared
    prefixes) -> judge -> consensus, every label source scored against the trace truth, with the
    shares of corrected and uncaught slips, each segmenter's step counts and the stages' costs."""
    from prm_annotate.world.think_report import print_think, run_think_pipeline, think_quality

    _world_run("world think", cfg, as_json, lambda: think_quality(cfg, *run_think_pipeline(cfg)), print_think)


def _world_run(what: str, cfg, as_json: bool, make, show) -> None:
    """Run a world pipeline in this process and print its report; leave by exit_process."""
    import orjson

    from prm_annotate.cli.app import EXIT_INTERRUPTED, EXIT_USAGE, handled
    from prm_annotate.engines import exit_process
    from prm_annotate.errors import ENGINE_INSTALL, require

    with handled():
        require("vllm", what, ENGINE_INSTALL)
    if not cfg.verbose:
        quiet_libraries()
    # Engines run in this process: leave by exit_process once they are closed (vLLM can abort a
    # normal interpreter exit), whatever happened.
    code = 0
    try:
        result = make()
        if as_json:
            typer.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        else:
            show(result)
        code = 1 if result["failures"] else 0
    except KeyboardInterrupt:
        typer.echo("prm-annotate: interrupted", err=True)
        code = EXIT_INTERRUPTED
    except Exception as exc:  # an engine that did not start, a stage that raised
        import traceback

        traceback.print_exc()
        typer.echo(f"prm-annotate: error: {what} failed: {type(exc).__name__}: {exc}", err=True)
        code = EXIT_USAGE if isinstance(exc, (OSError, ValueError)) else 1
    exit_process(code)
