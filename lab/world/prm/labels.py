"""The data of `world prm`: one `world report`, the split into training and held-out problems,
and each seed's training and validation sets per label source.

- The report runs as a child process (`prm-annotate world report --resume --json`): its vLLM
  engines live and die with that process, as they do under the command, and a killed report
  continues where it stopped when the experiment is run again. Its JSON, written last, marks it
  complete; a complete report is not run again.
- The report's problems in order: the first `train_problems` give the training pool, the rest
  are held out. Nothing of a held-out problem is trained or validated on.
- Per seed, a share of the training problems is drawn for validation (seeded), and each source's
  `trl` export of the rest is its training set, of the drawn ones its validation set: its own
  labels on both, as a user without the truth would have them. The size-matched MC sets are MC's
  cut at random (seeded) to the consensus sets' sizes.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from prm_annotate.errors import UsageError
from prm_annotate.stages.seeds import derive_seed
from prm_annotate.world.report import FILES, read_jsonl, write_jsonl


@dataclass(frozen=True)
class Source:
    """A label source a PRM is trained on."""
    name: str  # as shown
    key: str  # in file names
    role: str  # the report file its labels come from
    soft: bool = False  # MC scores as targets (the paper's soft labels)
    sized_like: str | None = None  # cut at random to this source's sizes
    # False: no response's final step is trained on (without_final_steps), and none is judged: the
    # PRM's score of a final step is 1 (right), since its threshold never saw one.
    final_step: bool = True


SOURCES = (
    # First the controls, which say whether the run can answer at all (and come first in a run cut
    # short). The true labels, which no annotator has: what this PRM learns from perfect labels, the
    # ceiling the others are read against.
    Source("truth (ceiling)", "truth", "truth"),
    # The true labels shuffled among the training responses with as many steps: where errors sit
    # (and how often) is kept, which response has them is not. A PRM that learns only from labels
    # learns nothing from them (right > wrong 50); one that learns priors looks like the ceiling.
    Source("truth (shuffled)", "shuffled", "shuffled"),
    # The same pair with no response's final step trained on: the experiment's control. The final
    # step states the answer and is almost never a first error (0.2% of them against 26% of the
    # others, in labels true or shuffled alike): that prior alone tells a head reading the base's
    # surprise which way surprise points, and a base that reckons well then verifies by itself
    # (docs/world-prm.md). Without it, shuffled labels teach nothing, and the pair tells learning
    # from labels from learning from priors.
    Source("truth, no final step", "truth-nofinal", "truth", final_step=False),
    Source("truth (shuffled), no final step", "shuffled-nofinal", "shuffled", final_step=False),
    Source("MC", "mc", "rollouts"),
    Source("MC soft", "mc-soft", "rollouts", soft=True),
    Source("judge", "judge", "judged"),
    Source("consensus", "consensus", "consensus"),
    Source("MC (consensus-sized)", "mc-sized", "rollouts", sized_like="consensus"),
)


def problem_of(response_id: str) -> str:
    return response_id.rsplit("/", 1)[0]


def write_atomic(path: Path, data: bytes) -> None:
    """Write beside and rename: a file that exists is complete (a kill leaves only the .partial)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def ensure_report(folder: Path, problems: int, n: int, k: int, seed: int) -> dict[str, Any]:
    """The report's JSON, running (or resuming) the report first unless it is complete with these
    settings."""
    done = folder / "report.json"
    if done.is_file():
        report = orjson.loads(done.read_bytes())
        wanted = {"problems": problems, "n": n, "k": k, "seed": seed}
        if {key: report["settings"][key] for key in wanted} == wanted:
            return report
        done.unlink()
    cmd = [sys.executable, "-m", "prm_annotate", "world", "report", "--problems", str(problems), "-n", str(n),
           "-k", str(k), "--seed", str(seed), "--workdir", str(folder), "--resume", "--json"]
    print(f"world prm: labels: {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
    # stderr passes through: the stages' progress lines are the labels' progress.
    run = subprocess.run(cmd, stdout=subprocess.PIPE)
    if run.returncode != 0:
        raise UsageError(f"world report failed (exit {run.returncode}); run the same command again to resume it")
    write_atomic(done, run.stdout)
    return orjson.loads(run.stdout)


@dataclass
class Split:
    train: list[str]  # training pool problems, in report order
    heldout: list[str]


def split_problems(folder: Path, train_problems: int) -> Split:
    ids = [p["id"] for p in read_jsonl(folder / FILES["problems"])]
    if train_problems >= len(ids):
        raise UsageError(f"{train_problems} training problems leave none of the report's {len(ids)} held out")
    return Split(ids[:train_problems], ids[train_problems:])


def truth_records(folder: Path) -> list[dict[str, Any]]:
    """The responses with their true first errors as ProcessBench records (`label`), which
    `export` reads like any labelled file."""
    problems = {r["id"]: r["problem"] for r in read_jsonl(folder / FILES["responses"])}
    return [{"id": g["id"], "problem": problems[g["id"]], "steps": g["steps"], "label": g["label"]}
            for g in read_jsonl(folder / FILES["gold"])]


def shuffled_labels(records: list[dict[str, Any]], pool: set[str]) -> list[dict[str, Any]]:
    """The training pool's records with their labels permuted among the records of as many steps
    (seeded, the same for every seed of the experiment, as the other labels are)."""
    rng = random.Random(derive_seed("world-prm", "shuffled labels"))
    mine = [r for r in records if problem_of(r["id"]) in pool]
    out = {r["id"]: dict(r) for r in mine}
    for n in sorted({len(r["steps"]) for r in mine}):
        group = [r for r in mine if len(r["steps"]) == n]
        labels = [r["label"] for r in group]
        rng.shuffle(labels)
        for r, label in zip(group, labels):
            out[r["id"]]["label"] = label
    return [out[r["id"]] for r in mine]


def export_rows(folder: Path, scratch: Path, pool: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The `trl` rows of each report file that labels (and of the truth, and of the shuffled truth
    of the training `pool`), MC scores kept (for the soft labels)."""
    from prm_annotate.export import ExportOptions, ExportSummary, iter_rows

    options = ExportOptions(format="trl", keep_scores=True)
    scratch.mkdir(parents=True, exist_ok=True)
    files = {role: folder / FILES[role] for role in {s.role for s in SOURCES} if role not in ("truth", "shuffled")}
    truth = truth_records(folder)
    for role, records in (("truth", truth), ("shuffled", shuffled_labels(truth, set(pool)))):
        files[role] = scratch / f"{role}.jsonl"
        write_jsonl(files[role], records)
    return {role: list(iter_rows(str(path), options, ExportSummary())) for role, path in files.items()}


def without_final_steps(rows: list[dict[str, Any]], steps: dict[str, int]) -> list[dict[str, Any]]:
    """The `trl` rows less each response's final step where the row reaches it (its label goes
    with it); a row that was that step alone is dropped."""
    out = []
    for r in rows:
        if len(r["completions"]) < steps[r["id"]]:
            out.append(r)
        elif len(r["completions"]) > 1:
            out.append({**r, **{k: r[k][:-1] for k in ("completions", "labels", "scores") if isinstance(r.get(k), list)}})
    return out


def validation_problems(train: list[str], share: float, seed: int) -> set[str]:
    rng = random.Random(derive_seed("world-prm", "validation", seed))
    return set(rng.sample(train, max(1, round(share * len(train)))))


def _cut(rows: list[dict[str, Any]], size: int, rng: random.Random) -> list[dict[str, Any]]:
    keep = sorted(rng.sample(range(len(rows)), min(size, len(rows))))  # in file order
    return [rows[i] for i in keep]


def response_steps(folder: Path) -> dict[str, int]:
    """Each response's number of steps (a labelled row holds them only up to its first error)."""
    return {g["id"]: len(g["steps"]) for g in read_jsonl(folder / FILES["gold"])}


def training_sets(rows: dict[str, list[dict[str, Any]]], split: Split, share: float, seed: int,
                  folder: Path, step_counts: dict[str, int]) -> dict[str, tuple[Path, Path]]:
    """(train, validation) files per source key for one seed, written into `folder`;
    `step_counts`: each response's number of steps (response_steps)."""
    folder.mkdir(parents=True, exist_ok=True)
    val = validation_problems(split.train, share, seed)
    pool = set(split.train)
    sets: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for source in SOURCES:
        if source.sized_like:
            continue
        labelled = [r for r in rows[source.role] if problem_of(r["id"]) in pool]
        if not source.final_step:
            labelled = without_final_steps(labelled, step_counts)
        sets[source.key] = ([r for r in labelled if problem_of(r["id"]) not in val],
                            [r for r in labelled if problem_of(r["id"]) in val])
    rng = random.Random(derive_seed("world-prm", "subsample", seed))
    for source in SOURCES:
        if source.sized_like:
            like = next(s for s in SOURCES if s.name == source.sized_like)
            base = next(s for s in SOURCES if s.role == source.role and not s.sized_like)
            train, valid = sets[base.key]
            sets[source.key] = (_cut(train, len(sets[like.key][0]), rng), _cut(valid, len(sets[like.key][1]), rng))
    for key, (train, valid) in sets.items():
        if not train or not valid:
            raise UsageError(f"seed {seed}: the {key} labels leave {len(train)} training and {len(valid)} validation "
                             "responses; give more training problems or another validation share")
    paths = {}
    for key, (train, valid) in sets.items():
        # Rewritten every time (the same bytes for the same seed), so a torn file is never read.
        paths[key] = (folder / f"{key}.train.jsonl", folder / f"{key}.val.jsonl")
        write_jsonl(paths[key][0], train)
        write_jsonl(paths[key][1], valid)
    return paths
