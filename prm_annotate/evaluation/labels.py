"""Reading first-error predictions and gold labels, and turning first errors into step labels.

Shared by `evaluate`, `compare`, `export` and `stats`.

Gold files come as users have them: one file, or ProcessBench's splits as the Hugging Face
dataset serves them (a folder, or the split files one by one; JSON arrays, JSONL or Parquet).

Step-label convention (ProcessBench annotates only the earliest wrong step): for a first error
`f` over `n` steps, steps `0..f-1` are right (True), step `f` is wrong (False), and steps after
`f` carry no label at all — they are neither right nor wrong. `f == -1` labels all `n` steps right.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from prm_annotate.errors import InputError, UsageError, require
from prm_annotate.io.inputs import read_records
from prm_annotate.records import check_first_error, step_labels  # noqa: F401  (step_labels: read from here too)
from prm_annotate.settings import Setting

MISSING = object()

# ProcessBench's splits as run_eval.py names them, with their (erroneous, correct) response counts in
# the Hugging Face release (the counts PR #12's script checks; docs: fidelity of `evaluate`).
PROCESSBENCH_SPLITS: dict[str, tuple[int, int]] = {
    "gsm8k": (207, 193), "math": (594, 406), "olympiadbench": (661, 339), "omnimath": (759, 241)}
SPLIT_SUFFIXES = (".json", ".jsonl", ".parquet")
_SHARD = re.compile(r"^(?P<split>.+)-\d{5}-of-\d{5}$")  # push_to_hub's data/<split>-00000-of-00001.parquet


# Said the same on every command that reads gold first errors (evaluate, compare, bon).
LABEL_FIELD = Setting(help="Dotted path of the gold first error.", flags=("--label-field",))
SPLIT_FIELD = Setting(flags=("--split-field",), help=(
    "Dotted path of the split (default: the id prefix before the first '-'; evaluate first tries the gold file's split)."))


# What a record read for its first error keeps for a later `--split-field`: all but the response's
# texts and its verdict blocks, which a split is never read from and which are most of a record's
# size (a labelled set of a million records is otherwise held whole).
_BULK = frozenset(("steps", "problem", "response", "step_joins", "labels", "mc", "judge", "prm", "generator",
                   "outputs", "segmenter"))


def _slim(obj: dict[str, Any], top: bool = True) -> dict[str, Any]:
    """A split is a name: what a dotted path can reach of it (objects and their scalars, no lists)."""
    return {k: _slim(v, False) if isinstance(v, dict) else v for k, v in obj.items()
            if not (top and k in _BULK) and not isinstance(v, list)}


def split_value(obj: dict[str, Any], dotted: str) -> Any:
    """A record's `--split-field` value as `_slim` leaves it: none under the bulk fields or at a list."""
    if dotted.split(".", 1)[0] in _BULK:
        return MISSING
    value = get_path(obj, dotted)
    if isinstance(value, list):
        return MISSING
    return _slim(value, False) if isinstance(value, dict) else value


def get_path(obj: Any, dotted: str) -> Any:
    """`obj["a"]["b"]` for `"a.b"`; MISSING when any part is absent."""
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return MISSING
        obj = obj[part]
    return obj


def read_raw(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Records as they are in the file (JSONL or a JSON array), with where they are."""
    # The generic format with the default field map hands every object through unchanged.
    return read_records(path, "generic")


def read_rows(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """`read_raw`, or the rows of a Parquet file one batch at a time (`row N` says where)."""
    if not path.endswith(".parquet"):
        yield from read_raw(path)
        return
    require("pyarrow", "reading Parquet", "pip install pyarrow")
    import pyarrow
    import pyarrow.parquet as pq

    try:
        batches = pq.ParquetFile(path).iter_batches()
        row = 0
        for batch in batches:
            for obj in batch.to_pylist():
                row += 1
                yield f"row {row}", obj
    except FileNotFoundError:
        raise InputError(path, "line 0", "no such file") from None
    except (OSError, pyarrow.ArrowException) as exc:
        raise UsageError(f"{path}: not a readable Parquet file ({exc})") from None


def split_of_file(path: Path) -> str:
    """The split a file holds, named as the Hub names it: `gsm8k.json` (the dataset repo),
    `gsm8k/0000.parquet` (the Hub's converted Parquet), `data/gsm8k-00000-of-00001.parquet`
    (`push_to_hub`)."""
    stem = path.name.split(".", 1)[0]
    if stem.isdigit():
        return path.parent.name
    shard = _SHARD.match(stem)
    return shard.group("split") if shard else stem


def split_files(folder: Path) -> dict[str, list[Path]]:
    """ProcessBench's split files in a folder (searched below it, hidden folders left out), by split.
    Only files named after the four splits count: a download also holds a card, caches and locks."""
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or path.suffix not in SPLIT_SUFFIXES or any(p.startswith(".") for p in rel.parts):
            continue
        split = split_of_file(path)
        if split in PROCESSBENCH_SPLITS:
            found.setdefault(split, []).append(path)
    if not found:
        raise UsageError(f"{folder}: no ProcessBench split files in it ({', '.join(PROCESSBENCH_SPLITS)} as "
                         "<split>.json, <split>.jsonl, <split>.parquet, <split>/0000.parquet or "
                         "data/<split>-00000-of-00001.parquet); give other gold files one by one")
    for split, paths in found.items():
        # Shards of one split sit side by side in one layout; two layouts are two copies.
        if len({(p.parent, p.suffix, p.stem.isdigit()) for p in paths}) > 1:
            raise UsageError(f"{folder}: more than one copy of split {split} "
                             f"({', '.join(str(p) for p in paths)}); give the files one by one")
    return dict(sorted(found.items(), key=lambda kv: list(PROCESSBENCH_SPLITS).index(kv[0])))


def first_error_value(value: Any, path: str, where: str, field: str) -> int | None:
    """A first-error prediction: an int >= -1, or None for "no prediction"."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(path, where, f"{field} must be an integer step index or null, got {value!r}")
    if value < -1:
        raise InputError(path, where, f"{field} = {value} is below -1")
    return value


def step_count(obj: dict[str, Any]) -> int | None:
    steps = obj.get("steps")
    return len(steps) if isinstance(steps, list) else None


@dataclass(slots=True)
class Gold:
    id: str
    label: int
    n_steps: int | None
    record: dict[str, Any]
    split: str | None = None  # the split its file holds; None: one gold file (the id prefix names it)


def records_by_id(path: str, seen: dict[str, tuple[str, str]] | None = None) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, id, record) for each record; a missing or duplicate id is bad input. `seen` carries
    the ids of files read before (id -> (file, where)) when several files make one set."""
    seen = {} if seen is None else seen
    for where, obj in read_rows(path):
        rid = obj.get("id")
        if not isinstance(rid, str) or not rid:
            raise InputError(path, where, "record has no string `id`")
        if rid in seen:
            first, at = seen[rid]
            raise InputError(path, where, f"duplicate id {rid!r} (first seen {'' if first == path else f'in {first} '}at {at})")
        seen[rid] = (path, where)
        yield where, rid, obj


def gold_value(path: str, where: str, rid: str, obj: dict[str, Any], label_field: str,
               split: str | None) -> tuple[int, int | None]:
    """(first error, step count) of a gold record, checked: an id naming another ProcessBench split
    than its file's (`split`), a missing label or one outside the steps is bad input."""
    prefix = rid.split("-", 1)[0]
    if split is not None and prefix != split and prefix in PROCESSBENCH_SPLITS:
        raise InputError(path, where, f"id {rid!r} is a {prefix} record in a file of split {split}")
    label = first_error_value(get_path(obj, label_field), path, where, label_field)
    if label is None:
        raise InputError(path, where, f"gold record has no `{label_field}`")
    n_steps = step_count(obj)
    if n_steps is not None:
        try:
            check_first_error(label, n_steps, label_field)
        except ValueError as exc:
            raise InputError(path, where, str(exc)) from None
    return label, n_steps


def load_gold(path: str, label_field: str = "label", split: str | None = None,
              seen: dict[str, tuple[str, str]] | None = None) -> dict[str, Gold]:
    """Gold first errors by id, from a ProcessBench JSON array, JSONL or Parquet file with `label`.
    With `split`, the file holds that split: an id naming another ProcessBench split is bad input
    (a renamed or swapped file would otherwise score one split as another)."""
    gold: dict[str, Gold] = {}
    for where, rid, obj in records_by_id(path, seen):
        label, n_steps = gold_value(path, where, rid, obj, label_field, split)
        gold[rid] = Gold(rid, label, n_steps, _slim(obj), split)
    if not gold:
        raise InputError(path, "line 0", "the gold file has no records")
    return gold


def gold_sources(given: list[str]) -> list[tuple[str, str | None]]:
    """(file, split) for each gold file: one file alone is read as before (split None: the id
    prefix names it); a folder gives its ProcessBench split files and several files each their own
    split, named from the file (`split_of_file`)."""
    if len(given) == 1 and not Path(given[0]).is_dir():
        return [(given[0], None)]
    out: list[tuple[str, str | None]] = []
    for item in given:
        if Path(item).is_dir():
            out += [(str(p), split) for split, paths in split_files(Path(item)).items() for p in paths]
        else:
            out.append((item, split_of_file(Path(item))))
    return out


@dataclass(slots=True)
class Prediction:
    id: str
    first_error: int | None  # None: no prediction (missing field, null, or unparsed judgement)
    n_steps: int | None
    labels: list[bool] | None  # explicit step labels (consensus records), if the record has them
    record: dict[str, Any]
    scores: list[float] | None = None  # a PRM's step scores, when read as scores (first_error None then)


def step_scores_value(value: Any, path: str, where: str, field: str, n_steps: int | None) -> list[float] | None:
    """A PRM's step scores: probabilities, one per step of the record; None for "not scored"."""
    if value is MISSING or value is None:
        return None
    if not isinstance(value, list) or not value or any(isinstance(x, bool) or not isinstance(x, (int, float))
                                                       for x in value):
        raise InputError(path, where, f"{field} must be a list of numbers, one per step, got {value!r}")
    if n_steps is not None and len(value) != n_steps:
        raise InputError(path, where, f"{field} has {len(value)} entries for {n_steps} steps")
    for x in value:
        if not 0.0 <= x <= 1.0:  # NaN fails this too
            raise InputError(path, where, f"{field}: score {x} is outside [0, 1]")
    return [float(x) for x in value]


def load_predictions(path: str, field: str | None, *, scores: bool = False,
                     seen: dict[str, tuple[str, str]] | None = None) -> tuple[str, dict[str, Prediction]]:
    """Predictions by id, and the field they were read from (`None`: detected from the first record;
    with `scores`, the field holds step scores, `prm.scores` unless named).

    A field that no record has is bad input (a misspelt --pred-field would score as "no prediction")."""
    preds: dict[str, Prediction] = {}
    present = False
    if field is None and scores:
        field = "prm.scores"
    for where, rid, obj in records_by_id(path, seen):
        if field is None:
            field = detected_field(obj, path, where)
        labels = labels_value(obj, path, where)
        value = get_path(obj, field)
        present = present or value is not MISSING
        n_steps = step_count(obj)
        if scores:
            preds[rid] = Prediction(rid, None, n_steps, labels, _slim(obj),
                                    step_scores_value(value, path, where, field, n_steps))
        else:
            preds[rid] = Prediction(rid, first_error_value(value, path, where, field), n_steps, labels, _slim(obj))
    if preds and not present:
        raise InputError(path, "line 1", f"no record has the field {field!r}")
    return field or "first_error", preds


def detected_field(obj: dict[str, Any], path: str, where: str) -> str:
    try:
        return detect_field(obj)
    except ValueError as exc:
        raise InputError(path, where, f"{exc}; name it with FILE=dotted.path") from None


def labels_value(obj: dict[str, Any], path: str, where: str) -> list[bool] | None:
    """A record's own step labels (a consensus record's), checked."""
    labels = obj.get("labels")
    if labels is not None and not (isinstance(labels, list) and all(isinstance(x, bool) for x in labels)):
        raise InputError(path, where, "`labels` must be a list of true/false")
    return labels


def load_prediction_files(paths: list[str], field: str | None, *,
                          scores: bool = False) -> tuple[str, dict[str, Prediction]]:
    """`load_predictions` over several files (one per split, say) as one set: the field found in the
    first is read in the others, and an id in two files is bad input."""
    preds: dict[str, Prediction] = {}
    seen: dict[str, tuple[str, str]] = {}
    for path in paths:
        field, more = load_predictions(path, field, scores=scores, seen=seen)
        preds.update(more)
    return field or "first_error", preds


def detect_field(obj: dict[str, Any]) -> str:
    """Where a record of a known type keeps its first error."""
    if "labels" in obj and "first_error" in obj:
        return "first_error"  # consensus
    if isinstance(obj.get("judge"), dict) and not isinstance(obj.get("mc"), dict):
        return "judge.first_error"
    if isinstance(obj.get("mc"), dict) and not isinstance(obj.get("judge"), dict):
        return "mc.first_error"
    if "first_error" in obj:
        return "first_error"
    if "label" in obj:
        return "label"  # ProcessBench-style gold
    if isinstance(obj.get("judge"), dict):
        raise ValueError("the record has both mc.first_error and judge.first_error")
    raise ValueError("cannot tell where this record keeps its first error")


G = TypeVar("G")


def load_benchmark_gold(paths: list[str], fmt: str, benchmark: str,
                        gold_of: Callable[[str, Any, dict[str, Any]], G]) -> dict[str, G]:
    """A benchmark's responses by id from its published file(s), read as input format `fmt`:
    `gold_of(path, where, row)` checks one row (InputError naming the file and line) and makes its
    gold; a repeated id, or no row at all, is refused."""
    gold: dict[str, G] = {}
    for path in paths:
        for where, row in read_records(path, fmt):
            item = gold_of(path, where, row)
            if row["id"] in gold:
                raise InputError(path, where, f"duplicate {benchmark} response {row['id']!r}")
            gold[row["id"]] = item
    if not gold:
        raise UsageError(f"{', '.join(paths)}: no {benchmark} rows")
    return gold


# Rows of the confusion table, in display order.
SAME, JUDGE_EARLIER, JUDGE_LATER, ONE_NO_ERROR, UNPARSED = (
    "same", "judge earlier", "judge later", "one says no error", "judge unparsed")
ROWS = (SAME, JUDGE_EARLIER, JUDGE_LATER, ONE_NO_ERROR, UNPARSED)


def confusion_row(mc_first: int, judge_first: int | None) -> str:
    """The row of the confusion table where this pair of first errors belongs."""
    if judge_first is None:
        return UNPARSED
    if mc_first == judge_first:
        return SAME
    if mc_first == -1 or judge_first == -1:
        return ONE_NO_ERROR
    return JUDGE_EARLIER if judge_first < mc_first else JUDGE_LATER

def id_notes(missing: list[str], missing_says: str, extra: list[str], extra_says: str) -> list[Any]:
    """A line for the gold ids without a prediction and one for the predictions outside the gold,
    where there are any: how many, what became of them, the first three."""
    from rich.text import Text

    return [Text(f"{len(ids)} {says}, e.g. {', '.join(ids[:3])}") for ids, says in ((missing, missing_says),
                                                                                  (extra, extra_says)) if ids]
