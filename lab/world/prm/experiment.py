"""The paper's central claim in the arithmetic world, where the truth is known: does a PRM trained
on consensus labels beat one trained on MC labels, and with how much certainty?

    python -m lab.world.prm [--workdir runs/world-prm] [--seeds 3]

1. Labels: one `world report` (labels.py): `train_problems` problems for training and
   `heldout_problems` more held out, `n` responses each, K rollouts per step, the judge on all.
2. PRMs: for each seed and each label source (labels.SOURCES: MC hard, MC soft, judge,
   consensus, MC cut to consensus's size, the truth as the ceiling, the truth shuffled among the
   responses, and those two with no final step trained on: the control pair) one PRM on `base`
   with `train --head likelihood` (prm/likelihood.py: a step head on the frozen base's token
   log-probabilities) — the same
   steps cap, batch, learning rate, evaluation cadence and patience for all: every `eval_every`
   steps it is evaluated on its validation problems (drawn from the training problems, labelled
   by its own source), the checkpoint with the best F1 is kept with its F1-maximising threshold,
   and it stops after `patience` evaluations without a better one, or at the cap (said).
   The seed draws the validation problems, the size-matched subsample, the head's initialisation
   and the order of the batches.
3. Scoring: each PRM scores the held-out responses (scores.py: `score`'s own in-process
   scorer) and is measured against the truth at its own tuned threshold; the rollouts and the
   judge are measured on the same responses as reference rows (an annotator against the PRM
   trained on it), and so are the truth itself and the likelihood untrained (no labels at all).
4. Results (results.py): per source the seeds' mean and spread, the paired comparisons with
   bootstrap intervals (bootstrap.py), `results.json`, the table and `world-prm.png`.

Every (source, seed) PRM's result is a file `prms/<source>-seed<N>.json`, written last: a rerun
neither trains nor scores the finished ones again but measures them again from their scored files
(and resumes a killed training from its last checkpoint); `--seeds` more adds seeds to the same run. The workdir's `settings.json` refuses a rerun with other settings.
"""
from __future__ import annotations

import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from prm_annotate.errors import UsageError
from lab.world import PRM_BASE_DIR, model_setting
from prm_annotate.world import POLICY_DIR, WORLD_SYSTEM_PROMPT
from lab.world.prm.labels import (SOURCES, Source, ensure_report, export_rows, problem_of, response_steps,
                                           split_problems, training_sets, write_atomic)
from lab.world.prm.scores import (Heldout, checkpoint_step_scores, likelihood_baseline_scores,
                                           scorer_metrics)
from prm_annotate.world.report import FILES, read_jsonl, write_jsonl


@dataclass(frozen=True)
class ExperimentConfig:
    workdir: Path = Path("runs/world-prm")
    seeds: int = 3
    # Enough: on prm-base every PRM of the true labels is at its best at its first validation (step
    # 50, 800 responses), and the labels are most of the run's time.
    train_problems: int = 500
    heldout_problems: int = 400
    n: int = 8  # responses per problem (Best-of-8 on the held-out ones)
    k: int = 8  # rollouts per step
    report_seed: int = 0  # the labels are one report, shared by every seed
    val_share: float = 0.1  # of the training problems, drawn per seed
    head: str = "likelihood"  # train --head: a step head on the frozen policy's token log-probabilities
    batch_size: int = 16
    lr: float = 3e-3
    max_steps: int = 1000  # the cap
    eval_every: int = 50
    patience: int = 3  # evaluations without a better validation F1
    max_length: int = 256  # tokens; world responses are under 200
    # The PRMs' base: a better reckoner than the policy, so the policy's slips surprise it (a PRM's
    # base need not be the policy; docs/world-prm.md measures both).
    base: Path = PRM_BASE_DIR
    # The PRM reads each response under the policy's system prompt, as it was written (a built-in
    # prompt's name; None: no system turn). Measured on one split: the likelihood readers order
    # right above wrong 3-5 points more often with it (docs/world-prm.md).
    system_prompt: str | None = WORLD_SYSTEM_PROMPT

    def system_prompt_text(self) -> str | None:
        from prm_annotate.io.prompt_files import SYSTEM_PROMPTS, load_prompt

        return load_prompt(self.system_prompt, SYSTEM_PROMPTS).text.strip() if self.system_prompt else None

    def settings(self) -> dict[str, Any]:
        """What the results depend on (not the workdir, and not the number of seeds: more seeds
        extend a run)."""
        out = {k: v for k, v in asdict(self).items() if k not in ("workdir", "seeds")}
        out["base"] = model_setting(self.base)
        return out


def check_workdir(cfg: ExperimentConfig) -> None:
    """Refuse, before the report's hour of labels, a base that is not a model and a workdir of
    another run; record this run's settings."""
    if not (Path(cfg.base) / "config.json").is_file():
        raise UsageError(f"--base {cfg.base}: no such model directory (a causal LM's, with its config.json)")
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    marker = cfg.workdir / "settings.json"
    if marker.is_file():
        before = orjson.loads(marker.read_bytes())
        changed = sorted(k for k, v in cfg.settings().items() if before.get(k) != v)
        if changed:
            raise UsageError(f"{cfg.workdir} holds a run with other settings ({', '.join(changed)}): give another "
                             "--workdir, or remove it to start over")
    else:
        write_atomic(marker, orjson.dumps(cfg.settings(), option=orjson.OPT_INDENT_2))


def progress(line: str) -> None:
    print(f"world prm: {line}", file=sys.stderr, flush=True)


def load_heldout(folder: Path, heldout: list[str], out: Path) -> tuple[Heldout, list[dict[str, Any]]]:
    """The held-out responses (with the MC scores of their rollouts as `prm.scores`, which makes
    the file the MC reference row's scored file too), their truth, and Best-of-N's graded problems."""
    from prm_annotate.reports.bon import read_scored
    from prm_annotate.evaluation.labels import load_gold

    wanted = set(heldout)
    records = [{**r, "prm": {"scores": r["mc"]["scores"]}} for r in read_jsonl(folder / FILES["rollouts"])
               if r["problem_id"] in wanted]
    path = out / "heldout.jsonl"
    write_jsonl(path, records)
    ids = {r["id"] for r in records}
    gold = {rid: g for rid, g in load_gold(str(folder / FILES["gold"])).items() if rid in ids}
    problems, _ = read_scored(str(path))
    present = [p for p in heldout if any(problem_of(rid) == p for rid in ids)]
    return Heldout(present, gold, problems, {r["id"]: tuple(r["steps"]) for r in records}), records


def train_config(cfg: ExperimentConfig, source: Source, seed: int, data: tuple[Path, Path], output: Path) -> Any:
    from prm_annotate.prm.train import TrainConfig

    return TrainConfig(data=str(data[0]), eval=str(data[1]), base=str(cfg.base), output=str(output),
                       steps=cfg.max_steps, batch_size=cfg.batch_size, lr=cfg.lr, soft=source.soft, seed=seed, head=cfg.head,
                       max_length=cfg.max_length, system_prompt=cfg.system_prompt_text(), eval_every=cfg.eval_every,
                       save_every=cfg.eval_every, save_total_limit=1, patience=cfg.patience,
                       log_every=cfg.eval_every, resume=True, overwrite=True, quiet=True)


def validation_curve(checkpoints: Path) -> list[list[float]]:
    """(step, validation F1) of every evaluation, from the last checkpoint's trainer state."""
    from prm_annotate.prm.train import complete_checkpoints

    done = complete_checkpoints(checkpoints)
    if not done:
        return []
    history = orjson.loads((done[-1] / "trainer_state.json").read_bytes())["log_history"]
    return [[e["step"], round(e["eval_f1"], 2)] for e in history if "eval_f1" in e]


def run_prm(cfg: ExperimentConfig, held: Heldout, records: list[dict[str, Any]], source: Source, seed: int,
            data: tuple[Path, Path], readings: Any = None) -> dict[str, Any]:
    """Train one PRM, score the held-out responses, measure; the result file is written last.
    `readings`: a likelihood PRM's frozen LM's readings, kept across the run's PRMs (all on one base)."""
    from prm_annotate.prm.train import train

    name = f"{source.key}-seed{seed}"
    folder = cfg.workdir / "prms"
    started = time.monotonic()
    trained = train(train_config(cfg, source, seed, data, folder / name), readings)
    t = time.monotonic()
    scores, threshold = checkpoint_step_scores(folder / name, records, readings)
    if not source.final_step:
        scores = [s[:-1] + [1.0] for s in scores]
    write_jsonl(folder / f"{name}.scored.jsonl",
                [{**{k: v for k, v in r.items() if k not in ("mc", "prm")},
                  "prm": {"scores": s, "threshold": threshold, "model": name}} for r, s in zip(records, scores)])
    metrics = scorer_metrics(held, {r["id"]: s for r, s in zip(records, scores)}, threshold)
    result = {
        "source": source.name, "seed": seed,
        "train": {"responses": trained.examples, "step_labels": trained.labels, "val_responses": trained.eval_examples,
                  "skipped": trained.skipped, "steps": trained.steps, "best_step": trained.best_step,
                  "cap": cfg.max_steps, "capped": trained.steps >= cfg.max_steps, "val_f1": trained.eval.get("f1"),
                  "threshold": trained.threshold, "curve": validation_curve(folder / f"{name}.checkpoints"),
                  "train_seconds": trained.train_seconds, "seconds_to_best": trained.seconds_to_best,
                  "read_seconds": trained.cache_seconds},
        "seconds": {"train": round(t - started, 1), "score": round(time.monotonic() - t, 1)},
        "metrics": metrics,
    }
    write_atomic(folder / f"{name}.json", orjson.dumps(result))
    shutil.rmtree(folder / f"{name}.checkpoints", ignore_errors=True)  # optimizer states: 3x the model
    return result


def likelihood_readings(cfg: ExperimentConfig) -> Any:
    """One store of the frozen LM's readings for every PRM of the run (a likelihood head's LM is
    the base, unchanged): each training and held-out text is read once, not once per PRM."""
    from prm_annotate.prm.train import PRM_HEADS

    if not PRM_HEADS[cfg.head].response_start:
        return None
    from prm_annotate.prm.likelihood import LMReadings

    return LMReadings()


def remeasured(held: Heldout, path: Path) -> dict[str, Any]:
    """A PRM trained and scored before: its result with the metrics taken again from its scored
    file (scoring is what costs; the metrics follow the code that reads them)."""
    result = orjson.loads(path.read_bytes())
    scored = read_jsonl(path.with_suffix(".scored.jsonl"))
    metrics = scorer_metrics(held, {r["id"]: r["prm"]["scores"] for r in scored}, scored[0]["prm"]["threshold"])
    if metrics != result["metrics"]:
        result["metrics"] = metrics
        write_atomic(path, orjson.dumps(result))
    return result


def first_error_scores(first: int, n: int) -> list[float]:
    """A first error as the scores of `n` steps: 1 before it, 0 from it on (-1: all 1)."""
    return [1.0] * n if first == -1 else [1.0] * first + [0.0] * (n - first)


def judge_scores(record: dict[str, Any]) -> list[float] | None:
    """The verdict as step scores (first_error_scores); None when unparsed."""
    first = record["judge"].get("first_error")
    return None if first is None else first_error_scores(first, len(record["steps"]))


def likelihood_reference(cfg: ExperimentConfig, held: Heldout, records: list[dict[str, Any]], lm: Path,
                         key: str) -> dict[str, Any]:
    """A no-training reference: each step scored by the causal LM's lowest probability of one of
    its tokens (scores.likelihood_baseline_scores, read as the PRMs read), an error below 0.5;
    kept in a file like a PRM's with the seconds it took (a rerun measures it again from there)."""
    path = cfg.workdir / "prms" / f"{key}.scored.jsonl"
    if not path.is_file():
        started = time.monotonic()
        values = likelihood_baseline_scores(lm, records, cfg.system_prompt_text())
        seconds = round(time.monotonic() - started, 1)
        write_jsonl(path, [{"id": r["id"], "prm": {"scores": s, "threshold": 0.5}, "seconds": seconds}
                           for r, s in zip(records, values)])
    scored = read_jsonl(path)
    return {**scorer_metrics(held, {r["id"]: r["prm"]["scores"] for r in scored}, 0.5),
            "seconds": scored[0]["seconds"]}


def reference_rows(cfg: ExperimentConfig, folder: Path, held: Heldout,
                   records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The annotators themselves on the held-out responses (the truth too: a perfect annotator's
    0/1 scores, which tie a right answer through a wrong step with the wrong answers), and the
    likelihood untrained: the PRMs' base's (what every likelihood PRM reads, with no label at all)
    and, when the base is not the policy, the policy's. MC's first error is its hard label (no
    completion right: the first score below 1/(2K), the scores being multiples of 1/K); its last
    step's score is the response's own graded answer, so its Best-of-N knows the gold answers."""
    ids = {r["id"] for r in records}
    judged = {r["id"]: judge_scores(r) for r in read_jsonl(folder / FILES["judged"]) if r["id"] in ids}
    mc = {r["id"]: r["mc"]["scores"] for r in records}
    truth = {rid: first_error_scores(g.label, len(held.steps[rid])) for rid, g in held.gold.items()}
    rows = {"truth": scorer_metrics(held, truth, 0.5),
            "MC rollouts": scorer_metrics(held, mc, 0.5 / cfg.k),
            "judge": scorer_metrics(held, {rid: judged.get(rid) for rid in ids}, 0.5),
            BASE_LIKELIHOOD: likelihood_reference(cfg, held, records, cfg.base, "likelihood-base")}
    if Path(cfg.base).resolve() != POLICY_DIR.resolve():
        rows[POLICY_LIKELIHOOD] = likelihood_reference(cfg, held, records, POLICY_DIR, "likelihood-policy")
    return rows


BASE_LIKELIHOOD = "base likelihood (no training)"
POLICY_LIKELIHOOD = "policy likelihood (no training)"


def run_experiment(cfg: ExperimentConfig) -> dict[str, Any]:
    """Everything above; the summary of results.json (results.summarize)."""
    from lab.world.prm.results import summarize

    started = time.monotonic()
    check_workdir(cfg)
    folder = cfg.workdir / "report"
    report = ensure_report(folder, cfg.train_problems + cfg.heldout_problems, cfg.n, cfg.k, cfg.report_seed)
    split = split_problems(folder, cfg.train_problems)
    (cfg.workdir / "prms").mkdir(exist_ok=True)
    held, records = load_heldout(folder, split.heldout, cfg.workdir)
    progress(f"held out: {len(records)} responses of {len(held.problem_ids)} problems")
    rows = export_rows(folder, cfg.workdir / "data", split.train)
    steps = response_steps(folder)
    results: dict[tuple[str, int], dict[str, Any]] = {}
    readings = likelihood_readings(cfg)
    total, done = cfg.seeds * len(SOURCES), 0
    for seed in range(cfg.seeds):
        sets = training_sets(rows, split, cfg.val_share, seed, cfg.workdir / "data" / f"seed{seed}", steps)
        for source in SOURCES:
            done += 1
            path = cfg.workdir / "prms" / f"{source.key}-seed{seed}.json"
            if path.is_file():
                results[source.name, seed] = remeasured(held, path)
                progress(f"[{done}/{total}] {source.name}, seed {seed}: done before")
                continue
            progress(f"[{done}/{total}] {source.name}, seed {seed}: training (cap {cfg.max_steps} steps) "
                     f"[{time.monotonic() - started:.0f} s]")
            r = results[source.name, seed] = run_prm(cfg, held, records, source, seed, sets[source.key], readings)
            t = r["train"]
            progress(f"[{done}/{total}] {source.name}, seed {seed}: stopped at step {t['steps']} (best "
                     f"{t['best_step']}{', AT THE CAP' if t['capped'] else ''}), held-out F1 "
                     f"{r['metrics']['f1']:.1f}, {r['seconds']['train'] + r['seconds']['score']:.0f} s")
    summary = summarize(cfg, report, held, results, reference_rows(cfg, folder, held, records))
    write_atomic(cfg.workdir / "results.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    progress(f"done in {time.monotonic() - started:.0f} s: {cfg.workdir / 'results.json'}")
    return summary
