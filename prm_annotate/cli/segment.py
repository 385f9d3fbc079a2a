from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from prm_annotate.cli.app import InputArg, OutputOpt, PANEL_LABEL, app, handled
from prm_annotate.cli.declared import typer_option
from prm_annotate.settings import setting_of
from prm_annotate.stages.config import SampleConfig

# sample's own declarations: one meaning, written once.
SegmentOpt = typer_option(setting_of(SampleConfig, "segment"), str)
SegmentOptionOpt = typer_option(setting_of(SampleConfig, "segment_options"), Optional[list[str]])


@app.command(rich_help_panel=PANEL_LABEL)
def segment(
    input: InputArg,
    output: OutputOpt = "-",
    segment: SegmentOpt = "paragraphs",
    segment_option: SegmentOptionOpt = None,
) -> None:
    """Cut the steps of a responses file again by a named segmenter (nothing but the cuts changes)."""
    from prm_annotate.io.jsonl import STDIO, dumps, iter_jsonl
    from prm_annotate.io.manifest import append_manifest
    from prm_annotate.segmenting import get_segmenter, parse_options
    from prm_annotate.stages.segment import Resegmented, resegment

    with handled():
        segmenter = get_segmenter(segment, parse_options(segment_option or ()))
        stats = Resegmented()
        lines = (dumps(r) for r in resegment(iter_jsonl(input), segmenter, str(input), stats))
        if output == STDIO:
            for line in lines:
                sys.stdout.buffer.write(line)
        else:
            # Written whole to a temporary file first: a refused record leaves no half output behind.
            tmp = Path(output + ".tmp")
            with open(tmp, "wb") as fh:
                try:
                    for line in lines:
                        fh.write(line)
                except BaseException:
                    fh.close()
                    tmp.unlink(missing_ok=True)
                    raise
            os.replace(tmp, output)
            append_manifest(output, {"stage": "segment", "input": str(input), "segmenter": segmenter.record(),
                                     "records": stats.records})
    most = max(stats.after, default=0)
    print(f"segment: {stats.records} records cut by {segmenter.name}: {sum(stats.before)} steps became "
          f"{sum(stats.after)} (at most {most} in one record); {stats.changed} records changed", file=sys.stderr)
