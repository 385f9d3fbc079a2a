"""The benchmarks `evaluate` scores against, in one registry: ProcessBench (the default), PRMBench,
Hard2Verify and DeltaBench. Each names its published data (the file or Hugging Face dataset its gold comes
from), the threshold rule it uses for a PRM's step scores, and how it reads gold and reports.

Gold is read from where a user has it: a file, a folder holding the release's files, or the
dataset's hub id found in the local Hugging Face cache (`HF_HUB_CACHE`, else `HF_HOME/hub`);
nothing is downloaded.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry
from prm_annotate.evaluation import deltabench, hard2verify, prmbench
from prm_annotate.evaluation.labels import LABEL_FIELD, SPLIT_FIELD, load_prediction_files
from prm_annotate.settings import declare, setting

DATA_SUFFIXES = (".jsonl", ".json")


@dataclass(frozen=True)
class Options:
    """What `evaluate` is asked (its options, each field's setting) and passes a benchmark.

    Attributes:
        predictions: the prediction files (a PRM's `score` output for a score benchmark).
        gold: the gold as given (files, folders, or a hub id in the local cache).
        pred_field: the dotted path of the step scores (None: prm.scores).
        threshold: a given threshold (None: the benchmark's own rule).
        tune_threshold_on: ProcessBench: the split a threshold is tuned on (None: none).
        split_field: ProcessBench: the dotted path of the split (None: the gold's, else the id prefix).
        min_f1: ProcessBench: the F1 a first judge must reach against the gold (evaluation/critic_check.py).
        benchmark: the benchmark whose metric to compute (BENCHMARKS).
    """
    predictions: list[str] = setting(argument=True, flags=(), help=(
        "First-error predictions, or step scores (`score` output) with a threshold: JSONL, JSON or Parquet files, "
        "or -."))
    gold: list[str] = setting(flags="--gold", help=(
        "Gold labels: one file, or ProcessBench's split files or their folder as downloaded (docs/scoring.md)."))
    pred_field: Optional[str] = setting(None, flags="--pred-field", help=(
        "Dotted path of the prediction, or of the step scores with a threshold (default: detected, or prm.scores)."))
    threshold: Optional[float] = setting(None, flags="--threshold", min=0.0, max=1.0, help=(
        "Predict from step scores: the first step scored below this (-1 if none)."))
    tune_sample: int = setting(hard2verify.TUNE_SAMPLE, flags="--tune-sample", min=1, help=(
        "hard2verify without --threshold: responses the threshold is tuned on (the paper's 100)."))
    seed: int = setting(0, flags="--seed", help="hard2verify: the seed of the tuning subset's draw.")
    tune_threshold_on: Optional[str] = setting(None, flags="--tune-threshold-on", metavar="SPLIT", help=(
        "Tune the threshold for the best F1 on SPLIT and apply it to the others (SPLIT reported apart)."))
    split_field: Optional[str] = declare(SPLIT_FIELD, None)
    label_field: str = declare(LABEL_FIELD, "label")
    min_f1: Optional[float] = setting(None, flags="--min-f1", min=0.0, max=100.0, help=(
        "ProcessBench: check a first judge (a critic) against GOLD (the big judge's verdicts): first-error agreement "
        "and F1 with intervals; F1 below this says not to use it, exit 1 (docs/pipeline.md)."))
    benchmark: str = setting("processbench", flags="--benchmark", help=lambda: BENCHMARKS.help())


@dataclass(frozen=True)
class Benchmark:
    """One benchmark `evaluate --benchmark` knows.

    Attributes:
        name: its `--benchmark` name.
        dataset: the Hugging Face dataset its release is (the hub id `--gold` may name).
        threshold_rule: how the benchmark turns a PRM's step scores into verdicts.
        run: scores predictions against gold -> a report with `to_dict()`.
        table: the report as a rich renderable.
    """
    name: str
    summary: str
    dataset: str
    threshold_rule: str
    run: Callable[[Options], Any] | None
    table: Callable[[Any], Any] | None


def dataset_files(given: list[str], dataset: str) -> list[str]:
    """The gold files: each given file; a folder's JSON/JSONL files (hidden folders left out); a hub
    id's snapshot in the local Hugging Face cache, read the same way."""
    out: list[str] = []
    for item in given:
        path = Path(item)
        if not path.exists() and item.count("/") == 1 and not item.endswith(DATA_SUFFIXES):
            path = cached_dataset(item)
        if path.is_dir():
            found = [p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in DATA_SUFFIXES
                     and not any(part.startswith(".") for part in p.relative_to(path).parts)]
            if not found:
                raise UsageError(f"{item}: no .jsonl or .json file in it ({dataset}'s release is JSON Lines)")
            out += [str(p) for p in found]
        else:
            out.append(str(path))
    return out


def cached_dataset(repo_id: str) -> Path:
    """The snapshot folder of a dataset repo in the local Hugging Face cache (never downloaded)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, repo_type="dataset", local_files_only=True))
    except (HFValidationError, LocalEntryNotFoundError) as exc:
        raise UsageError(f"{repo_id}: not a file, and not a dataset in the local Hugging Face cache "
                         f"({type(exc).__name__}); fetch it where there is a network "
                         f"(hf download {repo_id} --repo-type dataset) and copy the cache") from None


def _scores(opts: Options) -> tuple[str, dict]:
    return load_prediction_files(opts.predictions, opts.pred_field, scores=True)


def _prmbench(opts: Options) -> prmbench.Report:
    gold = prmbench.load_gold(dataset_files(opts.gold, BENCHMARKS["prmbench"].dataset))
    field, preds = _scores(opts)
    _check_overlap(opts, preds, gold)
    threshold = prmbench.VALIDITY_THRESHOLD if opts.threshold is None else opts.threshold
    return prmbench.evaluate(gold, preds, threshold=threshold, pred_field=field)


def _hard2verify(opts: Options) -> hard2verify.Report:
    gold = hard2verify.load_gold(dataset_files(opts.gold, BENCHMARKS["hard2verify"].dataset))
    field, preds = _scores(opts)
    _check_overlap(opts, preds, gold)
    return hard2verify.evaluate(gold, preds, threshold=opts.threshold, tune_sample=opts.tune_sample, seed=opts.seed,
                                pred_field=field)


def _deltabench(opts: Options) -> deltabench.Report:
    gold = deltabench.load_gold(dataset_files(opts.gold, BENCHMARKS["deltabench"].dataset))
    field, preds = deltabench.load_predictions(opts.predictions, opts.pred_field, opts.threshold, gold)
    _check_overlap(opts, preds, gold)
    return deltabench.evaluate(gold, preds, pred_field=field, threshold=opts.threshold)


def _check_overlap(opts: Options, preds: dict, gold: dict) -> None:
    if not preds.keys() & gold.keys():
        # Every response would count as unscored: a result that looks like one.
        raise UsageError(f"no id of {', '.join(opts.predictions)} is in {', '.join(opts.gold)} ({len(preds)} "
                         f"predictions, first id {next(iter(preds), None)!r}; first gold id {next(iter(gold))!r}); "
                         "score the benchmark's file as published (score FILE --format NAME) so the ids match")


BENCHMARKS: Registry[Benchmark] = Registry("--benchmark", "The benchmark whose metric to compute", "docs/scoring.md", (
    # ProcessBench's path is `evaluate`'s own (first errors or step scores, splits, tuning on a split).
    Benchmark("processbench", "ProcessBench: first-error F1 per split (the default)", "Qwen/ProcessBench",
              "given (--threshold) or tuned on one split (--tune-threshold-on gsm8k, as ProcessBench's authors did)",
              None, None),
    Benchmark("prmbench", "PRMBench: PRMScore per error category from step scores", "hitsmy/PRMBench_Preview",
              prmbench.THRESHOLD_RULE, _prmbench, prmbench.table),
    Benchmark("hard2verify", "Hard2Verify: ErrorID, step- and response-level balanced accuracy and F1",
              "Salesforce/Hard2Verify", hard2verify.THRESHOLD_RULE, _hard2verify, hard2verify.table),
    Benchmark("deltabench", "DeltaBench: error-section recall, precision and F1 of a critic's critiques or a PRM's "
              "section scores on long traces", "OpenStellarTeam/DeltaBench", deltabench.THRESHOLD_RULE, _deltabench,
              deltabench.table),
))
