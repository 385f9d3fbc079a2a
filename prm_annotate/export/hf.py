"""`--format hf`: a `datasets` DatasetDict directory with a dataset card made from the runs' manifests.

The rows are TRL's stepwise-supervision schema (`prompt`, `completions`, `labels`, plus `id`), the
one schema on the Hub that names steps and step labels. The card is generated, never written by
hand: it walks from the input's `<input>.manifest.json` to the manifests of that run's inputs
(consensus -> rollouts and judged -> ...), so every run that made the data is named with its
command line and settings.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import orjson

from prm_annotate.errors import UsageError, require
from prm_annotate.export.formats import ExportOptions, Provenance
from prm_annotate.export.writing import CHUNK, Spool
from prm_annotate.io.jsonl import dumps
from prm_annotate.export.trl import TRL_CONSUMER, Stepwise
from prm_annotate.io.manifest import source_runs
from prm_annotate.evaluation.labels import ROWS
from prm_annotate.recovery.consensus import RECOVERY_ROWS

# Fields of a run's stats the cost table shows, in its order.
COST_FIELDS = (("seconds", "seconds"), ("generated_tokens", "generated tokens"), ("prompt_tokens", "prompt tokens"),
               ("completions", "completions"))
CONSENSUS_RULE = ("A response is kept when MC's first error (`mc.first_error`: the first step whose Monte Carlo "
                  "score is not above the threshold, -1 for none) equals the judge's (`judge.first_error`); both -1 "
                  "agree, a judge verdict that could not be parsed never agrees. A kept response's steps end at its "
                  "first error: right before it, wrong at it (the paper's consensus filtering, arXiv 2501.07301).")
RECOVERY_RULE = ("A response is kept when MC's slips and their corrections (`mc.recovery`, rollout --recovery-rule) "
                 "equal the judge's (`judge.recovery`, judge --protocol recovery): the same slips corrected at the same "
                 "steps; none on both agrees, a judge reading that could not be parsed never agrees. A kept response "
                 "keeps every step: a slip wrong, wrong while a slip is uncorrected, right again from its correction "
                 "(`consensus --rule recovery`, docs/recovery.md).")


def _problem_key(problem: str) -> bytes:
    return hashlib.sha256(problem.encode()).digest()


class SplitStats:
    """A split's counts for the card, taken as its rows are written."""

    def __init__(self, problems: int):
        self.rows = self.steps = self.right = self.wrong = self.with_error = 0
        self.problems = problems

    def add(self, row: dict[str, Any]) -> None:
        labels = row["labels"]
        hard = [v for v in labels if isinstance(v, bool)]
        self.rows += 1
        self.steps += len(labels)
        self.right += sum(hard)
        self.wrong += len(hard) - sum(hard)
        self.with_error += any(v is False for v in labels)

    def stats(self) -> dict[str, Any]:
        return {"rows": self.rows, "problems": self.problems, "steps": self.steps,
                "mean_steps": round(self.steps / self.rows, 2) if self.rows else 0.0,
                "right": self.right, "wrong": self.wrong, "with_error": self.with_error}


def split_by_problem(problems: set[bytes], test_share: float) -> dict[str, Split]:
    """Train and test, split by problem text so no problem's responses are on both sides (`problems`:
    the sha256 of every problem's text). The problems held out are the ceil(share * problems)
    first by that sha256: the same input always gives the same split, and adding problems moves no
    old problem across."""
    if not test_share:
        return {"train": Split(None, SplitStats(len(problems)))}
    ordered = sorted(problems)
    n_test = math.ceil(test_share * len(ordered))
    if n_test >= len(ordered):
        raise UsageError(f"--test-split {test_share}: {len(ordered)} problems are too few to hold out a share "
                         "and keep a training split")
    held = set(ordered[:n_test])
    del ordered
    return {"train": Split(lambda r: _problem_key(r["prompt"]) not in held, SplitStats(len(problems) - n_test)),
            "test": Split(lambda r: _problem_key(r["prompt"]) in held, SplitStats(n_test))}


@dataclass
class Split:
    """Which rows a split keeps (None: all), and what counts them for a card as they are written."""
    keep: Callable[[dict[str, Any]], bool] | None
    counts: SplitStats | None = None


def flat_settings(settings: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of a run's settings as (dotted key, value), nested objects included."""
    out: list[tuple[str, Any]] = []
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            out += flat_settings(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def setting_text(value: Any) -> str:
    """A setting as the card writes it: plain words as they are, anything else (a separator of
    blank lines, null, a list) as JSON, so every value is one visible line."""
    if isinstance(value, str) and value and value.isprintable() and value.strip() == value:
        return value
    if isinstance(value, (bool, int, float)) and not isinstance(value, bool):
        return str(value)
    return orjson.dumps(value).decode()


def consensus_lines(runs: list[tuple[str, dict[str, Any] | None]]) -> list[str]:
    """The rule that kept the rows, and how many each reason dropped (from the consensus runs)."""
    found = [(file, run) for file, run in runs if run is not None and run.get("stage") == "consensus"]
    # A run of `--rule recovery` records its rule; the paper's records none (as it always did).
    recovery = any((run.get("settings") or {}).get("rule") == "recovery" for _, run in found)
    rows = RECOVERY_ROWS if recovery else ROWS
    lines = ["## How the labels were chosen", "", RECOVERY_RULE if recovery else CONSENSUS_RULE, ""]
    if not found:
        return lines + ["No consensus run is recorded in the manifests: the rows are labelled by one source.", ""]
    lines += ["| consensus run | joined | kept | " + " | ".join(f"dropped: {r}" for r in rows[1:])
              + " | only in rollouts | not rolled out |", "|---|" + "---:|" * (len(rows) + 3)]
    for file, run in found:
        stats = run.get("stats") or {}
        cells = [stats.get("joined", 0), stats.get("same", 0), *(stats.get(r, 0) for r in rows[1:]),
                 stats.get("only in rollouts", 0), stats.get("not rolled out", 0)]
        lines.append(f"| `{file}` | " + " | ".join(str(c) for c in cells) + " |")
    return lines + [""]


def cost_lines(runs: list[tuple[str, dict[str, Any] | None]]) -> list[str]:
    """What each run cost, as its manifest recorded it, and the total."""
    lines = ["## Cost", "", "| stage | file | " + " | ".join(name for _, name in COST_FIELDS) + " |",
             "|---|---|" + "---:|" * len(COST_FIELDS)]
    total = dict.fromkeys((key for key, _ in COST_FIELDS), 0.0)
    for file, run in runs:
        if run is None:
            continue
        stats = run.get("stats") or {}
        values = {"seconds": run.get("seconds"), **{k: stats.get(k) for k, _ in COST_FIELDS[1:]}}
        for key, value in values.items():
            total[key] += value if isinstance(value, (int, float)) else 0
        lines.append(f"| {run.get('stage', '?')} | `{file}` | "
                     + " | ".join("—" if values[k] is None else str(values[k]) for k, _ in COST_FIELDS) + " |")
    lines.append("| total | | " + " | ".join(f"{total[k]:.1f}" if k == "seconds" else str(int(total[k]))
                                            for k, _ in COST_FIELDS) + " |")
    return lines + [""]


def source_run_lines(input_path: str) -> list[str]:
    """The card's "Source runs" section: every run in the manifests reachable from the input."""
    lines = ["## Source runs", "",
             "Every run recorded in the manifests (`<file>.manifest.json`) of the input and of the files it was "
             "made from:", ""]
    for file, run in source_runs(input_path):
        if run is None:
            lines += [f"- `{file}`: no manifest", ""]
            continue
        lines.append(f"- `{file}`: **{run.get('stage', '?')}** (prm-annotate {run.get('version', '?')}"
                     + (f", finished {run['finished']}" if run.get("finished") else "") + ")")
        shown = [f"{k}={setting_text(v)}" for k, v in flat_settings(run.get("settings") or {})]
        if shown:  # every setting the manifest holds: models, prompts and their sha256, sampling, engine
            lines.append(f"  - settings: {', '.join(shown)}")
        counts, stats = run.get("counts") or {}, run.get("stats") or {}
        if run.get("stage") == "consensus" and "joined" in stats:
            kept, joined = stats.get("same", 0), stats["joined"]
            lines.append(f"  - kept {kept} of {joined} joined responses "
                         f"({round(100 * kept / joined, 2) if joined else 0.0}%) where MC and the judge agree on the first error")
        elif "kept_percent" in counts:  # a consensus manifest that records counts only (no stats)
            lines.append(f"  - kept {counts.get('agreed', '?')} of {counts.get('joined', '?')} joined responses "
                         f"({counts['kept_percent']}%) where MC and the judge agree on the first error")
        elif counts:
            lines.append("  - counts: " + ", ".join(f"{k} {v}" for k, v in counts.items() if isinstance(v, int)))
        if run.get("argv"):
            lines.append(f"  - command: `{shlex.join(str(a) for a in run['argv'])}`")
        lines.append("")
    return lines


# The method's paper and the tool, as every card names them.
PAPER = "https://arxiv.org/abs/2501.07301"
BIBTEX = """@article{zhang2025lessons,
  title   = {The Lessons of Developing Process Reward Models in Mathematical Reasoning},
  author  = {Zhang, Zhenru and Zheng, Chujie and Wu, Yangzhen and Zhang, Beichen and Lin, Runji and Yu, Bowen
             and Liu, Dayiheng and Zhou, Jingren and Lin, Junyang},
  journal = {arXiv preprint arXiv:2501.07301},
  year    = {2025}
}"""
# The project names no repository (pyproject.toml has no project URL): its package page.
TOOL_URL = "https://pypi.org/project/prm-annotate/"
# The Hub's size categories, by row count (the first whose bound is above it).
SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
         (10_000_000, "1M<n<10M"))


def card_header(*, license: str | None, task: str, rows: int, tags: list[str], extra: Sequence[str] = ()) -> list[str]:
    """A card's YAML header as the Hub reads it: licence (when given), task, size, `extra` (configs), tags."""
    size = next((name for bound, name in SIZES if rows < bound), "n>10M")
    return ["---", *([f"license: {license}"] if license else []), "task_categories:", f"- {task}",
            "size_categories:", f"- {size}", *extra, "tags:", *(f"- {tag}" for tag in tags), "---", ""]


def card_footer(license: str | None) -> list[str]:
    """A card's licence (or that it is missing), the method's paper with its BibTeX, and the tool."""
    said = (f"`{license}`, as given to `export --license`; the data also carries its sources' terms (the problems, "
            "the models that wrote and judged the responses)." if license else
            "Missing: the export was not given one (`prm-annotate export --license ID`, e.g. `apache-2.0`). Set it "
            "before sharing, within its sources' terms (the problems, the models that wrote and judged the responses).")
    return ["## Licence", "", said, "",
            "## Method and citation", "",
            f"Made with [prm-annotate]({TOOL_URL}), which implements the data pipeline of *The Lessons of Developing "
            f"Process Reward Models in Mathematical Reasoning* ([arXiv:2501.07301]({PAPER})): Monte Carlo estimation "
            "and an LLM judge, kept where they agree. Cite the method as:", "", "```bibtex", BIBTEX, "```", ""]


def dataset_card(splits: dict[str, dict[str, Any]], input_path: str, read: int, argv: list[str],
                 license: str | None = None, step_separator: str = "\n") -> str:
    """The card of splits given by their counts (`SplitStats.stats`)."""
    from prm_annotate import __version__

    runs = source_runs(input_path)
    # The card's configuration: `datasets.load_dataset(<this folder>)` reads these files as these splits.
    configs = ["configs:", "- config_name: default", "  data_files:"]
    for name in splits:
        configs += [f"  - split: {name}", f"    path: {name}/data-*.arrow"]
    header = card_header(license=license, task="token-classification", rows=sum(s["rows"] for s in splits.values()),
                         tags=["process-reward-model", "prm", "trl", "prm-annotate"], extra=configs)
    lines = [*header,
             "# Step-labelled responses for process reward models", "",
              f"Made by prm-annotate {__version__} from `{input_path}` ({read} records read, "
              f"{sum(s['rows'] for s in splits.values())} rows kept):", "", f"    {shlex.join(argv)}", "",
              "## Splits and labels", "",
              "| split | rows | problems | steps | mean steps per row | right steps | wrong steps | rows with an error |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in splits.items():
        share = f" ({100 * s['right'] / s['steps']:.1f}%)" if s["steps"] else ""
        lines.append(f"| {name} | {s['rows']} | {s['problems']} | {s['steps']} | {s['mean_steps']} | "
                     f"{s['right']}{share} | {s['wrong']} | {s['with_error']} |")
    if len(splits) > 1:
        lines += ["", "The splits are by problem: no problem has responses in both."]
    lines += ["", *consensus_lines(runs), *cost_lines(runs), *source_run_lines(input_path)]
    lines += ["## Row schema", "",
              "TRL's stepwise supervision: `prompt` (the problem), `completions` (the steps up to and including the "
              "first wrong one), `labels` (one bool per step: true = right), `id` (the response), and `scores` (MC "
              "scores of the steps) when exported with `--keep-scores`.", "",
              "## Use", "", "```python", "from datasets import load_dataset",
              "ds = load_dataset(\"<this directory>\")  # the splits this card's configs name; or \"<user>/<name>\"",
              "from datasets import load_from_disk",
              "ds = load_from_disk(\"<this directory>\")",
              "ds.push_to_hub(\"<user>/<name>\", private=True)",
              "# then this card (it replaces the one push_to_hub writes; the split files keep their standard names)",
              "from huggingface_hub import DatasetCard",
              "DatasetCard.load(\"<this directory>/README.md\").push_to_hub(\"<user>/<name>\", repo_type=\"dataset\")",
              "```", "",
              "Train a PRM on it with TRL's stepwise trainer (`trl.experimental.prm`, TRL 1.13), its step separator "
              "the one this export was checked with:", "", "```python",
              "from transformers import AutoModelForTokenClassification, AutoTokenizer",
              "from trl.experimental.prm import PRMConfig, PRMTrainer",
              "base = \"Qwen/Qwen2.5-Math-7B-Instruct\"  # any causal LM",
              "model = AutoModelForTokenClassification.from_pretrained(base, num_labels=2)",
              f"args = PRMConfig(output_dir=\"prm\", step_separator={orjson.dumps(step_separator).decode()})",
              "trainer = PRMTrainer(model=model, args=args, processing_class=AutoTokenizer.from_pretrained(base),",
              "                     train_dataset=ds[\"train\"])",
              "trainer.train()", "```", "", *card_footer(license)]
    return "\n".join(lines)


def write_hf(spool: Spool, splits: dict[str, Split], output: str, card: Callable[[], str]) -> None:
    """Save the splits of the spooled rows as a DatasetDict directory (the files and bytes
    `DatasetDict.save_to_disk` writes, one Arrow batch at a time) and its `card` (made after the
    rows are written), in a temporary directory beside `output`, then move it into place: a reader
    never sees half a dataset, and a failed export leaves the old one."""
    if output == "-":
        raise UsageError("--format hf writes a directory: give it with -o DIR")
    target = Path(output)
    if target.exists() and not (target.is_dir() and ((target / "dataset_dict.json").is_file() or not any(target.iterdir()))):
        raise UsageError(f"{output}: exists and is not a dataset directory from an earlier export; not overwriting it")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, split in splits.items():
            _save_split(spool, split, tmp / name)
        (tmp / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}))
        (tmp / "README.md").write_text(card())
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _save_split(spool: Spool, split: Split, folder: Path) -> None:
    """One split as `Dataset.save_to_disk` lays it out: its shards (as many as datasets makes for
    its size, rows cut contiguously, written in batches of datasets' size), state.json and
    dataset_info.json. The one difference: `_fingerprint` in state.json is a sha256 of the rows
    (datasets hashes the whole in-memory table, which a stream never holds)."""
    require("datasets", "--format hf", "pip install datasets")
    from datasets import DatasetInfo, Features, config
    from datasets.arrow_writer import ArrowWriter, get_writer_batch_size_from_data_size
    from datasets.utils.py_utils import asdict, convert_file_size_to_int

    rows = nbytes = 0
    if split.keep is None:
        rows, nbytes = spool.count, spool.nbytes
    else:  # a split's size, measured as datasets measures a table's (its shard count, its batch size)
        for table in spool.tables(CHUNK, split.keep):
            rows += len(table)
            nbytes += table.nbytes
    num_shards = max(1, min(rows, int(nbytes / convert_file_size_to_int(config.MAX_SHARD_SIZE)) + 1))
    batch = config.DEFAULT_MAX_BATCH_SIZE
    if nbytes > 0:
        batch = min(batch, get_writer_batch_size_from_data_size(rows, nbytes))
    features = Features.from_arrow_schema(spool.schema)
    digest = hashlib.sha256()
    kept = (r for r in spool.rows() if split.keep is None or split.keep(r))
    folder.mkdir()
    names = [f"data-{i:05d}-of-{num_shards:05d}.arrow" for i in range(num_shards)]
    div, mod = divmod(rows, num_shards)
    for i, name in enumerate(names):
        writer = ArrowWriter(features=features, path=str(folder / name), embed_local_files=True)
        try:
            left = div + (1 if i < mod else 0)
            while left:
                chunk = [next(kept) for _ in range(min(batch, left))]
                left -= len(chunk)
                for row in chunk:
                    if split.counts is not None:
                        split.counts.add(row)
                    digest.update(dumps(row))
                writer.write_table(pa_table(chunk, spool.schema))
            writer.finalize()
        finally:
            writer.close()
    state = {"_data_files": [{"filename": name} for name in names], "_fingerprint": digest.hexdigest()[:16],
             "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
             "_split": None}
    with open(folder / config.DATASET_STATE_JSON_FILENAME, "w", encoding="utf-8") as fh:
        json.dump(state, fh, indent=2, sort_keys=True)
    info = asdict(DatasetInfo(features=features))
    with open(folder / config.DATASET_INFO_FILENAME, "w", encoding="utf-8") as fh:
        json.dump({key: info[key] for key in sorted(info)}, fh, indent=2)


def pa_table(rows: list[dict[str, Any]], schema: Any) -> Any:
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=schema)


@dataclass(frozen=True)
class HF(Stepwise):
    def write(self, rows: Iterable[dict[str, Any]], output: str, opts: ExportOptions,
              finish: Callable[[int], Provenance]) -> None:
        if output == "-":
            raise UsageError("--format hf writes a directory: give it with -o DIR")
        with Spool(spool_dir(output)) as spool:
            problems: set[bytes] = set()  # every problem's sha256: the split and the card's count
            for row in rows:
                spool.add(row)
                problems.add(_problem_key(row["prompt"]))
            spool.close()
            source = finish(spool.count)
            splits = split_by_problem(problems, opts.test_split)
            del problems
            write_hf(spool, splits, output, lambda: dataset_card(
                {name: split.counts.stats() for name, split in splits.items()},  # type: ignore[union-attr]
                source.input, source.read, list(source.argv), opts.license, opts.sep))


def spool_dir(output: str) -> Path | None:
    """Where rows wait for the output's writer: beside it (the same disk), or the system's place."""
    parent = Path(output).parent
    return parent if parent.is_dir() else None


FORMAT = HF("hf", summary="a Hugging Face dataset directory of TRL rows with its dataset card", consumer=TRL_CONSUMER,
            test_split=True, directory=True, card=True)
