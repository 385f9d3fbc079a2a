"""What `train` reads: the `trl`, `tokens` and `hf` exports (docs/export.md), as labelled, tokenized
responses, and the collator that batches them.

- trl: JSONL rows `{"id", "prompt", "completions": [steps], "labels": [bool], "scores"?}`; the text
  is built here with `prm_token_ids`, so it is the text `score` builds.
- hf: a `datasets` DatasetDict directory of the same rows (`train`, and `test` when exported with
  `--test-split`).
- tokens: rows `{"id", "input_ids", "attention_mask", "labels"}` (JSONL or Parquet), labels IGNORE
  except on each step's end marker: 0/1, or MC scores with `--soft`. The marker becomes the
  checkpoint's step tag; the rows are taken as tokenized (no system turn: `export --format tokens`
  writes none).

Each response carries its targets (the probability its steps are right: the hard label, or with
`--soft` the MC score) and its hard labels, which the eval metrics read. With `--soft` on a tokens
export the hard label is "score > 0", the paper's hard estimate. A malformed row is an InputError
naming its file and line.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from prm_annotate.errors import InputError, UsageError
from prm_annotate.export.examples import not_mc_labels
from prm_annotate.io.inputs import AUTO
from prm_annotate.prm.checkpoint import PRMFormat, prm_token_ids, response_start, step_tag_id, tag_in_text
from prm_annotate.registry import Named, Registry
from prm_annotate.evaluation.labels import read_raw

IGNORE = -100


@dataclass
class Data:
    """A training run's encoded sets, what was skipped and why, and the PRM format (None for a critic)."""
    train: list[dict[str, Any]]
    eval: list[dict[str, Any]]
    fmt: PRMFormat | None
    skipped: dict[str, int]


@dataclass
class Example:
    id: str
    group: str  # the problem the response answers: an eval split never parts a problem's responses
    targets: list[float]  # probability that each step is right: 1/0 (hard) or the MC score (soft)
    hard: list[int]  # 1 right, 0 wrong: what the eval metrics score against
    prompt: str = ""
    steps: list[str] = field(default_factory=list)
    input_ids: list[int] | None = None  # tokens rows come tokenized
    positions: list[int] = field(default_factory=list)  # tokens rows: the labelled tokens


def _soft_scores(obj: dict[str, Any], n: int) -> list[float] | None:
    scores = obj.get("scores")
    ok = isinstance(scores, list) and len(scores) == n and all(
        isinstance(s, (int, float)) and not isinstance(s, bool) and 0 <= s <= 1 for s in scores)
    return [float(s) for s in scores] if ok else None


def trl_example(obj: dict[str, Any], soft: bool, bad: Callable[[str], InputError], where: str) -> Example:
    refused = not_mc_labels(obj)
    if refused:
        raise bad(refused)
    rid, prompt, steps, labels = obj.get("id"), obj.get("prompt"), obj.get("completions"), obj.get("labels")
    if not isinstance(prompt, str) or not isinstance(steps, list) or not isinstance(labels, list):
        raise bad("not a trl export row (needs `prompt`, `completions`, `labels`)")
    if not steps or not all(isinstance(s, str) and s.strip() for s in steps):
        raise bad("`completions` must be a non-empty list of non-empty steps")
    if len(labels) != len(steps) or not all(isinstance(x, bool) for x in labels):
        raise bad(f"`labels` must be {len(steps)} true/false values, one per step")
    hard = [int(x) for x in labels]
    targets = [float(x) for x in hard]
    if soft:
        scores = _soft_scores(obj, len(steps))
        if scores is None:
            raise bad("--soft needs `scores` in [0, 1], one per step (export with --keep-scores)")
        targets = scores
    return Example(str(rid) if rid is not None else where, prompt, targets, hard, prompt=prompt, steps=steps)


def read_trl(path: str, soft: bool) -> dict[str, list[Example]]:
    examples = []
    for where, obj in read_raw(path):
        examples.append(trl_example(obj, soft, lambda m, w=where: InputError(path, w, m), where))
    return {"train": examples}


def dataset_splits(path: str, export_format: str) -> Any:
    """The splits of a `datasets` directory written by `export --format EXPORT_FORMAT` (one split
    alone is `train`)."""
    from datasets import load_from_disk

    try:
        splits = load_from_disk(path)
    except (OSError, ValueError, FileNotFoundError) as exc:
        raise UsageError(f"{path}: not a dataset directory from `export --format {export_format}` ({exc})") from None
    return splits if hasattr(splits, "keys") else {"train": splits}


def read_hf(path: str, soft: bool) -> dict[str, list[Example]]:
    splits = dataset_splits(path, "hf")
    out = {}
    for name in splits.keys():
        where = f"{name}"
        out[name] = [trl_example(obj, soft, lambda m, i=i: InputError(path, f"{where} row {i + 1}", m), f"{where}/{i}")
                     for i, obj in enumerate(splits[name])]
    return out


def _token_rows(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        for i, obj in enumerate(pq.read_table(path).to_pylist()):
            yield f"row {i + 1}", obj
    else:
        yield from read_raw(path)


def read_tokens(path: str, soft: bool) -> dict[str, list[Example]]:
    examples = []
    for where, obj in _token_rows(path):
        refused = not_mc_labels(obj)
        if refused:
            raise InputError(path, where, refused)
        ids, labels = obj.get("input_ids"), obj.get("labels")
        if not isinstance(ids, list) or not isinstance(labels, list) or len(ids) != len(labels) or not ids:
            raise InputError(path, where, "not a tokens export row (needs `input_ids` and `labels` of one length)")
        if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
            raise InputError(path, where, "`input_ids` must be token ids")
        positions = [i for i, v in enumerate(labels) if v != IGNORE]
        values = [labels[i] for i in positions]
        if not positions:
            raise InputError(path, where, "no labelled token (every label is -100)")
        if soft and not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in values):
            raise InputError(path, where, "--soft needs labels in [0, 1] on the step-end tokens")
        if not soft and not all(v in (0, 1) and not isinstance(v, bool) for v in values):
            raise InputError(path, where, "labels must be 0 or 1 on the step-end tokens (MC scores: --soft)")
        rid = str(obj.get("id", where))
        hard = [int(v > 0) if soft else int(v) for v in values]
        examples.append(Example(rid, rid.rsplit("/", 1)[0], [float(v) for v in values], hard,
                                input_ids=ids, positions=positions))
    return {"train": examples}


READERS: Registry[Named] = Registry("--format", "Training data's format (auto: detected from the file)",
                                   "docs/training.md", (
    Named("trl", "export --format trl rows: prompt, completions, labels", read_trl),
    Named("tokens", "export --format tokens rows: token ids with a label on each step end", read_tokens),
    Named("hf", "an export --format hf dataset directory, its test split kept", read_hf),
), extra=(AUTO,))


def detect_format(path: str) -> str:
    """hf for a dataset directory, tokens for rows with `input_ids`, else trl."""
    p = Path(path)
    if p.is_dir():
        return "hf"
    if path.endswith(".parquet"):
        return "tokens"
    for _, obj in read_raw(path):
        return "tokens" if "input_ids" in obj else "trl"
    return "trl"


def read_examples(path: str, fmt: str, soft: bool) -> dict[str, list[Example]]:
    """The file's splits (`train`, and `test` for an hf export that has one), never empty."""
    if not Path(path).exists():
        raise UsageError(f"{path}: no such file or directory")
    fmt = detect_format(path) if fmt == AUTO else fmt
    if fmt not in READERS:
        raise UsageError(f"--format {fmt}: choose from {', '.join(READERS.choices())}")
    splits = READERS[fmt](path, soft)
    if not splits.get("train"):
        raise InputError(path, "line 0", "no training rows")
    return splits


def split_by_problem(examples: list[Example], share: float) -> tuple[list[Example], list[Example]]:
    """(train, eval): the eval problems are the ceil(share * problems) first by sha256 of the
    problem (the hf export's rule), so a rerun on the same data holds out the same problems."""
    groups = sorted({e.group for e in examples}, key=lambda g: hashlib.sha256(g.encode()).hexdigest())
    n_eval = math.ceil(share * len(groups))
    if n_eval >= len(groups):
        raise UsageError(f"--eval-split {share}: {len(groups)} problems are too few to hold out a share and "
                         "keep some to train on")
    held = set(groups[:n_eval])
    return [e for e in examples if e.group not in held], [e for e in examples if e.group in held]


def _count(skipped: dict[str, int], reason: str, n: int = 1) -> None:
    skipped[reason] = skipped.get(reason, 0) + n


def _cut(ids: list[int], positions: list[int], ex: Example, max_length: int,
         skipped: dict[str, int]) -> dict[str, Any] | None:
    """The feature, cut at `max_length` tokens: labels past the cut are lost (counted), a
    response with none left is skipped."""
    kept = [i for i, p in enumerate(positions) if p < max_length]
    if len(kept) < len(positions):
        _count(skipped, "labels cut by --max-length", len(positions) - len(kept))
    if not kept:
        _count(skipped, "no label within --max-length")
        return None
    return {"input_ids": ids[:max_length], "positions": [positions[i] for i in kept],
            "targets": [ex.targets[i] for i in kept], "hard": [ex.hard[i] for i in kept]}


def encode(examples: list[Example], tokenizer: Any, fmt: PRMFormat, max_length: int,
           skipped: dict[str, int], with_start: bool = False) -> list[dict[str, Any]]:
    """Features (`input_ids`, `positions` of the labelled tokens, `targets`, `hard`) per response;
    `with_start`: also `response_start`, where the response begins (a text export's)."""
    tag = step_tag_id(tokenizer, fmt.step_tag)
    out = []
    for ex in examples:
        if ex.input_ids is not None:
            ids, positions = ex.input_ids, ex.positions
        elif tag_in_text(fmt, ex.prompt, ex.steps):
            _count(skipped, "text contains the step tag")
            continue
        else:
            ids = prm_token_ids(tokenizer, fmt, ex.prompt, ex.steps)
            positions = [i for i, t in enumerate(ids) if t == tag]
            assert len(positions) == len(ex.targets), "one tag per step"
        feature = _cut(ids, positions, ex, max_length, skipped)
        if feature is not None:
            if with_start:
                feature["response_start"] = response_start(tokenizer, fmt, ex.prompt, ids)
            out.append(feature)
    return out


def marker_tag(examples: list[Example], tokenizer: Any, path: str) -> str:
    """The step tag of a tokens export: the one token every label sits on, as text that encodes
    back to that token (so `score` can find it)."""
    ids = {ex.input_ids[p] for ex in examples if ex.input_ids is not None for p in ex.positions}
    if len(ids) != 1:
        raise UsageError(f"{path}: the labels sit on {len(ids)} different tokens ({sorted(ids)[:5]}); a PRM reads "
                         "its scores at one step-end token")
    (marker,) = ids
    if marker >= len(tokenizer):
        raise UsageError(f"{path}: the step-end token {marker} is not in the --base tokenizer: export with "
                         "the base's tokenizer")
    text = tokenizer.decode([marker])
    if tokenizer.encode(text, add_special_tokens=False) != [marker]:
        raise UsageError(f"{path}: the step-end token {marker} ({text!r}) does not encode back to itself, so "
                         "`score` could not place it: export with --step-end set to an added special token")
    return text


class PaddedBatches:
    """Right padding for a batch of encoded features (a tag's logits never see the padding), with
    the count of real and pad tokens for the pad share `train` reports."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id
        self.tokens = 0
        self.padded = 0

    def pad(self, features: list[dict[str, Any]]) -> tuple[Any, Any, int]:
        """`input_ids` and `attention_mask` of the batch, and its width."""
        import torch

        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for b, f in enumerate(features):
            n = len(f["input_ids"])
            ids[b, :n] = torch.tensor(f["input_ids"])
            mask[b, :n] = 1
            self.tokens += n
        self.padded += len(features) * width
        return ids, mask, width

    @property
    def pad_share(self) -> float:
        return 1 - self.tokens / self.padded if self.padded else 0.0


class StepCollator(PaddedBatches):
    """Right-padded batches: `input_ids`, `attention_mask`, `labels` (targets at the labelled
    tokens, IGNORE elsewhere) and `step_labels` (hard labels, same places)."""

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        ids, mask, width = self.pad(features)
        labels = torch.full((len(features), width), float(IGNORE))
        hard = torch.full((len(features), width), IGNORE, dtype=torch.long)
        for b, f in enumerate(features):
            labels[b, f["positions"]] = torch.tensor(f["targets"])
            hard[b, f["positions"]] = torch.tensor(f["hard"])
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels, "step_labels": hard}
        if "response_start" in features[0]:
            batch["response_start"] = torch.tensor([f["response_start"] for f in features])
        if "token_logprobs" in features[0]:  # a likelihood PRM's LM reading, read once
            from prm_annotate.prm.likelihood import padded_readings

            batch["token_logprobs"] = padded_readings([f["token_logprobs"] for f in features], width)
        return batch

