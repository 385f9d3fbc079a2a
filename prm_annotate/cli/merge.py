from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from prm_annotate.cli.app import FormatOpt, IdFieldOpt, OutputOpt, PANEL_TOOLS, app, handled
from prm_annotate.io.inputs import AUTO, FieldMap


@app.command(rich_help_panel=PANEL_TOOLS)
def merge(
    shards: Annotated[list[str], typer.Argument(help="Shard outputs (of --shard I/N runs) to join.")],
    output: OutputOpt = "-",
    input: Annotated[Optional[str], typer.Option(
        "--input", help="The original stage input: report input ids with no output (exit 1).")] = None,
    expect_per_input: Annotated[Optional[int], typer.Option(
        "--expect-per-input", min=1,
        help="Outputs per input id, named <id>/0..N-1 (sample's -n): a problem with fewer counts as missing.")] = None,
    format: FormatOpt = AUTO,
    id_field: IdFieldOpt = FieldMap.id,
) -> None:
    """Join shard outputs; every id exactly once (a duplicate is an error), missing input ids listed."""
    from prm_annotate.io.merge import merge as merge_files

    with handled():
        report = merge_files(shards, output, input=input, input_format=format, fields=FieldMap(id=id_field),
                             expect_per_input=expect_per_input)
    err = sys.stderr
    print(report.line(), file=err)
    if report.uneven:
        spread = ", ".join(f"{n} inputs with {k}" for k, n in report.uneven.items())
        print(f"  outputs per input id differ ({spread}); pass --expect-per-input N to check each", file=err)
    for rid in report.missing[:20]:
        have = report.incomplete.get(rid)
        print(f"  missing {rid}" + (f" ({have} of {expect_per_input} outputs)" if have else ""), file=err)
    if len(report.missing) > 20:
        print(f"  ... and {len(report.missing) - 20} more", file=err)
    if report.missing:
        print("  rerun the shard commands (they resume), then merge again", file=err)
    raise typer.Exit(report.exit_code)
