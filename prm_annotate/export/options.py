"""`ExportOptions`: one export's settings, checked against what its format takes."""
from __future__ import annotations

from dataclasses import dataclass

from prm_annotate.errors import UsageError
from prm_annotate.export.formats import EXPORT_FORMATS, ExportFormat, format_names


@dataclass(frozen=True)
class ExportOptions:
    format: str  # a name in EXPORT_FORMATS
    soft: bool = False
    keep_scores: bool = False
    step_sep: str | None = None  # None: the format's default
    placeholder: str | None = None  # None: the format's default tag
    step_end: str | None = None  # tokens: None picks a marker that is one token for the tokenizer
    test_split: float = 0.0  # hf: share of problems held out

    def __post_init__(self) -> None:
        fmt = EXPORT_FORMATS.get(self.format)
        if fmt is None:
            raise UsageError(f"unknown export format {self.format!r}; choose from {', '.join(EXPORT_FORMATS)}")
        if self.soft and not fmt.soft:
            raise UsageError(fmt.hard_only or
                             f"--soft: the {self.format} format takes hard labels only (soft labels go to "
                             f"{format_names(lambda f: f.soft)}; --keep-scores adds a `scores` column)")
        if self.placeholder is not None and not self.placeholder.strip():
            raise UsageError("--placeholder must not be blank")
        if self.placeholder is not None and fmt.default_tag is None:
            raise UsageError(f"--placeholder: the {self.format} format has no step tag"
                             + (" (its step-end marker is --step-end)" if fmt.step_end else ""))
        if self.step_end is not None and not fmt.step_end:
            raise UsageError(f"--step-end goes with --format {format_names(lambda f: f.step_end)}")
        if self.step_end is not None and not self.step_end:
            raise UsageError("--step-end must not be empty")
        if not 0.0 <= self.test_split < 1.0:
            raise UsageError(f"--test-split must be in [0, 1), got {self.test_split}")
        if self.test_split and not fmt.test_split:
            raise UsageError(f"--test-split goes with --format {format_names(lambda f: f.test_split)}")

    @property
    def export_format(self) -> ExportFormat:
        return EXPORT_FORMATS[self.format]

    @property
    def sep(self) -> str:
        return self.export_format.step_sep if self.step_sep is None else self.step_sep

    @property
    def tag(self) -> str | None:
        """The step tag: --placeholder, or the format's own (None for a format without one)."""
        return self.export_format.default_tag if self.placeholder is None else self.placeholder
