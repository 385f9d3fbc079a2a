"""Labelled responses -> trainer-ready PRM datasets (JSONL, or Parquet for a `.parquet` output).

Inputs: consensus records (their own `labels`), rollout records (labels from `mc.first_error`),
judged records (from `judge.first_error`; unjudged records are skipped) or ProcessBench-style
records (from `label`). Labels follow `labels.step_labels`: right before the first error, wrong at
it; steps after the first error are dropped, exactly as `consensus` truncates. `soft=True` puts
the MC scores of the kept steps in place of the hard labels (qwen and tokens formats only:
OpenRLHF's reader cannot take floats).

Formats (`id` is kept in every row; trainers ignore extra columns):
- trl: TRL's stepwise-supervision rows `{"prompt", "completions": [steps], "labels": [bool]}`,
  what `PRMTrainer` (trl.experimental.prm, TRL <= 1.13) tokenizes; its step separator is a trainer
  setting (`PRMConfig.step_separator`), not part of the data.
- openrlhf: `{"input", "label"}` for OpenRLHF's ProcessRewardDataset (`--input_key input
  --label_key label --placeholder_token ки --reward_tokens + -`): the problem, then each step
  followed by " <placeholder>", and one "+"/"-" label per placeholder.
- qwen: the Qwen2.5-Math-PRM convention, `<extra_0>` after each step (steps joined by nothing else
  unless a separator is given), as `prompt`/`response` and as chat `messages`, labels 1/0 or floats.
- math-shepherd: `{"input", "label"}` as in Math-Shepherd: `input` tags each step with " ки",
  `label` is the same text with "+" or "-" in place of each tag.
- tokens: `input_ids`, `attention_mask`, `labels` for a token classification head (placement.py).
- hf: the trl rows as a `datasets` DatasetDict directory with a dataset card (hf_export.py).

In the tagged formats steps are stripped of surrounding whitespace, and with a tokenizer every
label is placed as its reader places it (placement.py): a row where one would not land on the
token ending its step stops the export.
"""
from __future__ import annotations

import os
import tempfile
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from pydantic import ValidationError

from prm_annotate.errors import InputError, UsageError, require
from prm_annotate.io.jsonl import STDIO, dumps
from prm_annotate.reports.labels import read_raw, step_labels
from prm_annotate.records import Consensus, Judged, Rollout
from prm_annotate.records import describe_validation_error

FORMATS = ("trl", "openrlhf", "qwen", "math-shepherd", "tokens", "hf")
SOFT_FORMATS = ("qwen", "tokens")
TAGGED_FORMATS = ("openrlhf", "qwen", "math-shepherd", "tokens")  # steps joined into one text
# Who reads each format's labels, for error messages.
CONSUMERS = {"trl": "TRL's PRMTrainer.tokenize_row", "openrlhf": "OpenRLHF's ProcessRewardDataset and PRMLoss",
             "qwen": "the Qwen2.5-Math-PRM <extra_0> convention", "math-shepherd": "Math-Shepherd's tag reader",
             "tokens": "a token classification head"}
SHEPHERD_TAG = "ки"
QWEN_TAG = "<extra_0>"
QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
# Between the problem and the first step, and between steps, as each format's reference data has it.
DEFAULT_SEPS = {"openrlhf": (" ", "\n"), "math-shepherd": (" ", "\n"), "qwen": ("", ""), "trl": ("", "\n"),
                "tokens": ("", "\n"), "hf": ("", "\n")}


@dataclass
class Example:
    id: str
    problem: str
    steps: list[str]  # the labelled steps only
    labels: list[bool]
    scores: list[float | None] | None  # MC scores of those steps, when the record has them


@dataclass
class ExportOptions:
    format: str
    soft: bool = False
    keep_scores: bool = False
    step_sep: str | None = None  # None: the format's default
    placeholder: str | None = None  # None: the format's default tag
    step_end: str | None = None  # tokens: None picks a marker that is one token for the tokenizer
    test_split: float = 0.0  # hf: share of problems held out

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise UsageError(f"unknown export format {self.format!r}; choose from {', '.join(FORMATS)}")
        if self.soft and self.format == "openrlhf":
            # ProcessRewardDataset writes float labels into a tensor of token ids (index_put fails):
            # no OpenRLHF release with a PRM trainer (0.5.6 to 0.9.5) reads them.
            raise UsageError("--soft: OpenRLHF's ProcessRewardDataset (0.5.6 to 0.9.5) cannot read float labels "
                             "(it puts them into a tensor of token ids and fails); export hard labels, "
                             "or soft ones with --format qwen or --format tokens")
        if self.soft and self.format not in SOFT_FORMATS:
            raise UsageError(f"--soft: the {self.format} format takes hard labels only "
                             f"(soft labels go to {' or '.join(SOFT_FORMATS)}; --keep-scores adds a `scores` column)")
        if self.placeholder is not None and not self.placeholder.strip():
            raise UsageError("--placeholder must not be blank")
        if self.placeholder is not None and self.format in ("trl", "tokens", "hf"):
            raise UsageError(f"--placeholder: the {self.format} format has no step tag"
                             + (" (its step-end marker is --step-end)" if self.format == "tokens" else ""))
        if self.step_end is not None and self.format != "tokens":
            raise UsageError("--step-end goes with --format tokens")
        if self.step_end is not None and not self.step_end:
            raise UsageError("--step-end must not be empty")
        if not 0.0 <= self.test_split < 1.0:
            raise UsageError(f"--test-split must be in [0, 1), got {self.test_split}")
        if self.test_split and self.format != "hf":
            raise UsageError("--test-split goes with --format hf")

    @property
    def sep(self) -> str:
        return DEFAULT_SEPS[self.format][1] if self.step_sep is None else self.step_sep

    @property
    def tag(self) -> str:
        if self.placeholder is not None:
            return self.placeholder
        return QWEN_TAG if self.format == "qwen" else SHEPHERD_TAG


@dataclass
class ExportSummary:
    read: int = 0
    written: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> records
    step_end: str | None = None  # tokens: the marker used


def _validated(model: Any, obj: dict[str, Any], path: str, where: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise InputError(path, where, describe_validation_error(exc)) from None


def example_from(obj: dict[str, Any], path: str, where: str) -> Example | str:
    """The labelled example of a record, or the reason it has none."""
    if "labels" in obj:
        rec = _validated(Consensus, obj, path, where)
        scores = rec.mc.scores[: len(rec.steps)]
        return Example(rec.id, rec.problem, rec.steps, rec.labels, scores)
    if isinstance(obj.get("mc"), dict):
        rec = _validated(Rollout, obj, path, where)
        labels = step_labels(rec.mc.first_error, len(rec.steps))
        return Example(rec.id, rec.problem, rec.steps[: len(labels)], labels, rec.mc.scores[: len(labels)])
    if isinstance(obj.get("judge"), dict):
        rec = _validated(Judged, obj, path, where)
        if rec.judge.first_error is None:
            return "no parsed judgement"
        labels = step_labels(rec.judge.first_error, len(rec.steps))
        return Example(rec.id, rec.problem, rec.steps[: len(labels)], labels, None)
    if "label" in obj and isinstance(obj.get("steps"), list):
        label, steps = obj["label"], obj["steps"]
        if isinstance(label, bool) or not isinstance(label, int) or not -1 <= label < len(steps):
            raise InputError(path, where, f"label must be a step index in -1..{len(steps) - 1}, got {label!r}")
        if not isinstance(obj.get("id"), str) or not isinstance(obj.get("problem"), str):
            raise InputError(path, where, "record needs a string `id` and `problem`")
        labels = step_labels(label, len(steps))
        return Example(obj["id"], obj["problem"], steps[: len(labels)], labels, None)
    raise InputError(path, where, "not a consensus, rollout, judged or ProcessBench record "
                                  "(needs `labels`, `mc`, `judge`, or `label` with `steps`)")


def read_examples(path: str, summary: ExportSummary) -> Iterator[tuple[str, Example]]:
    seen: dict[str, str] = {}
    for where, obj in read_raw(path):
        summary.read += 1
        example = example_from(obj, path, where)
        if isinstance(example, str):
            summary.skipped[example] += 1
            continue
        if example.id in seen:
            raise InputError(path, where, f"duplicate id {example.id!r} (first seen at {seen[example.id]})")
        seen[example.id] = where
        yield where, example


def _tagged(problem: str, steps: list[str], marks: list[str], opts: ExportOptions, lead: str) -> str:
    return lead.join([problem, opts.sep.join(f"{s} {m}" for s, m in zip(steps, marks))])


@dataclass
class TokenCheck:
    """With --tokenizer: the consumer's one-token checks, done once, and the tokenizer for each row."""
    tokenizer: Any
    ids: dict[str, int]
    step_end: str | None = None  # tokens format


def token_check(opts: ExportOptions, tokenizer: Any) -> TokenCheck:
    from prm_annotate.export.placement import consumer_ids, default_step_end, single_token_id

    if opts.format == "tokens":
        step_end = opts.step_end if opts.step_end is not None else default_step_end(tokenizer, opts.sep)
        return TokenCheck(tokenizer, {"tag": single_token_id(tokenizer, step_end, "--step-end")}, step_end)
    if opts.format == "hf":
        return TokenCheck(tokenizer, {})
    return TokenCheck(tokenizer, consumer_ids(opts.format, tokenizer, opts.tag, opts.soft))


def to_row(example: Example, opts: ExportOptions, check: TokenCheck | None = None) -> dict[str, Any] | str:
    """One output row, or the reason the example cannot be written in this format."""
    if opts.soft:
        if example.scores is None or any(s is None for s in example.scores):
            return "no MC score for every kept step (--soft)"
        values: list[Any] = list(example.scores)
    else:
        values = list(example.labels)
    steps = example.steps
    if opts.format in TAGGED_FORMATS:
        # Whitespace around a step would sit next to its tag, where a tokenizer can fold the tag
        # into a whitespace piece and shift every later label: the tagged texts never keep it.
        steps = [s.strip() for s in steps]
        # (tokens: the labels are explicit, a marker inside the text is harmless)
        if opts.format != "tokens" and any(opts.tag in t for t in [example.problem, *steps]):
            return f"text already contains the step tag {opts.tag!r}"
    row: dict[str, Any] = {"id": example.id}
    if opts.format in ("trl", "hf"):
        row.update(prompt=example.problem, completions=steps, labels=values)
    elif opts.format == "tokens":
        from prm_annotate.export.placement import tokens_row

        if check is None or check.step_end is None:
            raise UsageError("--format tokens needs --tokenizer")
        row = tokens_row(example.id, example.problem, steps, values, check.tokenizer, check.step_end,
                         check.ids["tag"], opts.sep)
    elif opts.format in ("openrlhf", "math-shepherd"):
        lead = DEFAULT_SEPS[opts.format][0]
        row["input"] = _tagged(example.problem, steps, [opts.tag] * len(steps), opts, lead)
        if opts.format == "openrlhf":
            row["label"] = ["+" if v else "-" for v in values]
        else:
            row["label"] = _tagged(example.problem, steps, ["+" if v else "-" for v in values], opts, lead)
    else:  # qwen
        response = opts.sep.join(f"{s}{opts.tag}" for s in steps)
        row.update(prompt=example.problem, response=response,
                   messages=[{"role": "system", "content": QWEN_SYSTEM},
                             {"role": "user", "content": example.problem},
                             {"role": "assistant", "content": response}],
                   labels=values if opts.soft else [int(v) for v in values])
    if opts.keep_scores:
        row["scores"] = example.scores
    return row


def build_rows(path: str, opts: ExportOptions, tokenizer: Any = None) -> tuple[list[dict[str, Any]], ExportSummary]:
    """The rows of `path` in the format; with a tokenizer, every label is placed as the format's
    consumer will place it, and the first row where it would not land on the token ending its
    step stops the export (exit 2, nothing written)."""
    from prm_annotate.export.placement import Misplaced, check_row

    summary = ExportSummary()
    check = token_check(opts, tokenizer) if tokenizer is not None else None
    if opts.format == "tokens":
        if check is None:
            raise UsageError("--format tokens needs --tokenizer")
        summary.step_end = check.step_end
    trl_sep = opts.step_sep if opts.step_sep is not None else "\n"
    rows = []
    for where, example in read_examples(path, summary):
        try:
            row = to_row(example, opts, check)
            if isinstance(row, str):
                summary.skipped[row] += 1
                continue
            if check is not None and opts.format != "tokens":
                fmt = "trl" if opts.format == "hf" else opts.format  # hf rows are TRL's
                check_row(row, fmt, check.tokenizer, opts.tag, check.ids, trl_sep)
        except Misplaced as exc:
            raise InputError(path, where, f"{example.id}: {exc} ({CONSUMERS[opts.format]})") from None
        rows.append(row)
    return rows, summary


def write_rows(rows: list[dict[str, Any]], output: str) -> None:
    """JSONL, or Parquet for a `.parquet` path; written to a temporary file, then renamed into place,
    so a reader never sees half a dataset."""
    parquet = output.endswith(".parquet")
    if output == STDIO:
        import sys

        sys.stdout.buffer.write(b"".join(dumps(r) for r in rows))
        sys.stdout.buffer.flush()
        return
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if parquet:
            require("pyarrow", "Parquet output", "pip install pyarrow")
            import pyarrow as pa
            import pyarrow.parquet as pq

            os.close(fd)
            pq.write_table(pa.Table.from_pylist(rows), tmp)
        else:
            with os.fdopen(fd, "wb") as fh:
                for r in rows:
                    fh.write(dumps(r))
                fh.flush()
                os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; give it ordinary permissions
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- Truncation: labels a trainer would lose to its maximum sequence length ------------------

@dataclass
class Truncation:
    max_length: int
    rows: int = 0  # rows that lose at least one label
    labels_lost: int = 0
    labels_total: int = 0
    lost_by_row: dict[str, int] = field(default_factory=dict)


def trl_label_positions(row: dict[str, Any], tokenizer: Any, step_separator: str,
                        max_completion_length: int | None = None) -> list[int | None]:
    """Token positions of the labels as TRL's PRMTrainer.tokenize_row places them: BOS (if any),
    the prompt, then each step followed by the separator, its label on the separator's last token.
    None for a label that `max_completion_length` cuts off first."""
    prompt = len(tokenizer(row["prompt"], add_special_tokens=False)["input_ids"])
    if tokenizer.bos_token_id is not None:
        prompt += 1
    sep = len(tokenizer.encode(step_separator, add_special_tokens=False))
    positions: list[int | None] = []
    offset = 0
    for step in row["completions"]:
        offset += len(tokenizer(step, add_special_tokens=False)["input_ids"]) + sep
        cut = max_completion_length is not None and offset - 1 >= max_completion_length
        positions.append(None if cut else prompt + offset - 1)
    return positions


def _text_of(row: dict[str, Any], tokenizer: Any) -> str:
    if "messages" in row:
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(row["messages"], tokenize=False)
        return row["prompt"] + row["response"]
    return row["input"]


def tag_positions(text: str, tag: str, tokenizer: Any) -> list[int]:
    """Index of the token that ends each tag occurrence in `text` (the token a trainer labels)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ends = [end for _, end in enc["offset_mapping"]]
    positions, start = [], 0
    while (found := text.find(tag, start)) >= 0:
        end = found + len(tag)
        positions.append(bisect_left(ends, end))
        start = end
    return positions


def check_truncation(rows: Iterable[dict[str, Any]], opts: ExportOptions, tokenizer: Any, max_length: int,
                     trl_step_separator: str = "\n", max_completion_length: int | None = None) -> Truncation:
    """Labels a trainer would lose: those whose token lies at or past `max_length` (and, for TRL,
    past `max_completion_length` tokens of completion)."""
    report = Truncation(max_length)
    for row in rows:
        positions: list[int | None]
        if opts.format in ("trl", "hf"):
            positions = trl_label_positions(row, tokenizer, trl_step_separator, max_completion_length)
        elif opts.format == "tokens":
            positions = [i for i, v in enumerate(row["labels"]) if v != -100]
        else:
            positions = list(tag_positions(_text_of(row, tokenizer), opts.tag, tokenizer))
        lost = sum(p is None or p >= max_length for p in positions)
        report.labels_total += len(positions)
        if lost:
            report.rows += 1
            report.labels_lost += lost
            report.lost_by_row[row["id"]] = lost
    return report


def load_tokenizer(name_or_path: str) -> Any:
    require("transformers", "--tokenizer", "pip install -e '.[tokenizer]' in the repository, or pip install transformers")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--tokenizer {name_or_path}: cannot load a tokenizer ({exc})") from None
