"""`prm-annotate report`: one self-contained HTML file to look at a labelled set before training on it.

`report_data` reads and joins the pipeline's files (data.py); `render_page` makes the page
(page.py, with report.js and report.css inlined); `write_report` writes it whole or not at all.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from prm_annotate.errors import UsageError
from prm_annotate.io.jsonl import STDIO
from prm_annotate.io.output import check_output
from prm_annotate.reports.html.data import report_data
from prm_annotate.reports.html.page import embed_json, render_page
from prm_annotate.settings import setting


@dataclass(frozen=True)
class ReportWritten:
    path: str
    responses: int
    shown: int
    bytes: int

    def line(self) -> str:
        size = f"{self.bytes / 1e6:.1f} MB" if self.bytes >= 1e5 else f"{self.bytes / 1e3:.1f} kB"
        shown = "" if self.shown == self.responses else f" ({self.shown} of them browsable)"
        return f"report: wrote {self.path}, {self.responses} responses{shown}, {size}."


@dataclass(frozen=True)
class PageConfig:
    """What `report` writes.

    Attributes:
        output: the HTML file (one self-contained page).
        max_responses: a sample, so a large set stays a page a browser opens.
    """

    output: str = setting("report.html", flags=("-o", "--output"), help="The HTML file to write.")
    max_responses: int = setting(1000, flags="--max-responses", min=1, help=(
        "Responses the page lets you browse, a seeded sample (the overview counts every record)."))
    seed: int = setting(0, flags="--seed", help="Seed of that sample.")


def write_report(paths: list[str], output: str, *, gold: str | None = None, max_responses: int = 1000,
                 seed: int = 0) -> ReportWritten:
    """Read the files, render the page and write it beside its final name, then move it there: a
    reader never opens half a report."""
    if output == STDIO:
        raise UsageError("report writes one HTML file: give it with -o FILE")
    check_output(output, [*paths, gold])
    data = report_data(paths, gold, max_responses, seed)
    page = render_page(data).encode("utf-8")
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(page)
    os.replace(tmp, target)
    return ReportWritten(str(target), data["sample"]["of"], data["sample"]["shown"], len(page))


__all__ = ["PageConfig", "ReportWritten", "embed_json", "render_page", "report_data", "write_report"]
