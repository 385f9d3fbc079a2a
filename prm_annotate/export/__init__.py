"""Labelled responses -> trainer-ready PRM datasets (`prm-annotate export`; docs/export.md).

One module per format, each defining one `ExportFormat` object (`FORMAT`), registered below in
the order `--format` lists them. Adding a format: a module here with its `FORMAT`, one
`register(...)` line below, and its test (tests/export/test_export_registry.py shows all three).
"""
from prm_annotate.export.examples import Example, ExportSummary
from prm_annotate.export.formats import (
    EXPORT_FORMATS,
    ExportFormat,
    ExportOptions,
    ExportRun,
    Provenance,
    format_names,
    register,
)
from prm_annotate.export.placement import TokenCheck, load_tokenizer
from prm_annotate.export.qwen import QWEN_SYSTEM, QWEN_TAG
from prm_annotate.export.rows import iter_rows
from prm_annotate.export.tagged import TaggedFormat
from prm_annotate.export.truncation import Truncation, drop_or_count
from prm_annotate.export.writing import write_rows
from prm_annotate.export import critic, hf, math_shepherd, openrlhf, qwen, tokens, trl

__all__ = [
    "EXPORT_FORMATS", "Example", "ExportFormat", "ExportOptions", "ExportRun", "ExportSummary", "Provenance", "QWEN_SYSTEM",
    "QWEN_TAG", "TaggedFormat", "TokenCheck", "Truncation", "drop_or_count", "format_names",
    "iter_rows", "load_tokenizer", "register", "write_rows",
]

register(trl.FORMAT)
register(openrlhf.FORMAT)
register(qwen.FORMAT)
register(math_shepherd.FORMAT)
register(tokens.FORMAT)
register(hf.FORMAT)
register(critic.FORMAT)
register(critic.HF_FORMAT)
