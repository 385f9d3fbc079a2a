"""The arithmetic world's label-quality report: the paper's method run where the truth is known.

    prm-annotate world report [--problems 40 -n 4 -k 8 --seed 0 --workdir runs/world]

Generates problems, runs the real stages through the real runner (sample -> rollout with the
tiny policy, then judge with the tiny judge and the `processbench` prompt -> consensus), one
vLLM engine at a time: the policy's engine serves sample and rollout and is shut down before the
judge's starts. Then it writes the truth (`truth.true_first_error` of every response) as a gold
file and scores each label source against it with `compare.compare_sources`:

- MC (`mc.first_error` of the rollouts), judge (`judge.first_error`), consensus (`first_error`
  of the kept records, with their own step labels);
- the ProcessBench metric on the records each source labels (error acc, correct acc, F1) and on
  all responses (a record a source does not label counts wrong);
- the precision of the step labels each source keeps (share equal to the truth's step labels);
- the share of responses consensus keeps, and the tokens each stage generated (read back from
  the records, so the numbers are those of the files, not of a counter);
- the bill per stage (each model stage's manifest `bill`, as `stats` reads it) at the world's
  model sizes and at the paper's, naming the stage that dominates, and `plan`'s estimate made from
  the responses file with the run's own settings beside what the run billed (docs/cost.md).

The conclusion printed under the table is computed from these numbers, whichever way they fall.
Every file lands in `workdir` (problems, responses, rollouts, judged, consensus, gold, each with
its run manifest); a new report starts from empty files there. With `resume`, a killed report run
again with the same settings continues where it stopped (each stage skips the ids it wrote):
`report.settings.json`, written first, says which settings the files belong to.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from prm_annotate.engines import EngineConfig, Sampling
from prm_annotate.engines.defaults import START_TIMEOUT
from prm_annotate.settings import declare, setting, setting_of
from prm_annotate.stages.config import JudgeConfig, RolloutConfig, SampleConfig, configured
from prm_annotate.world import JUDGE_DIR, POLICY_DIR, WORLD_JUDGE_PROMPT, WORLD_SYSTEM_PROMPT, model_setting
from prm_annotate.world.problems import make_problems
from prm_annotate.world.truth import check_steps

# The stage files of one report, by role.
FILES = {
    "problems": "problems.jsonl",
    "responses": "responses.jsonl",
    "rollouts": "rollouts.jsonl",
    "judged": "judged.jsonl",
    "consensus": "consensus.jsonl",
    "gold": "gold.jsonl",
}

# Label sources: (name shown, file role, field holding the first error).
SOURCES = (("MC", "rollouts", "mc.first_error"), ("judge", "judged", "judge.first_error"),
           ("consensus", "consensus", "first_error"))


@dataclass(frozen=True)
class ReportConfig:
    """The settings of one `world report`; those that are options say so (the stages' own
    declarations, with the world's defaults, where they mean the same).

    Attributes:
        policy: the policy model (sample, rollout); the shipped one by default.
        judge: the judge model; the shipped one by default.
        quiet: the stages' progress lines off (their summaries stay).
        resume: keep the files of an unfinished report with the same settings.
    """
    workdir: Path = setting(Path("runs/world"), flags="--workdir",
                            help="Folder for the stage files (emptied of an earlier report's).")
    policy: Path = POLICY_DIR
    judge: Path = JUDGE_DIR
    problems: int = setting(40, flags="--problems", min=1, help="Problems to generate.")
    n: int = declare(setting_of(SampleConfig, "n"), 4)
    k: int = declare(setting_of(RolloutConfig, "k"), 8)
    seed: int = setting(0, flags="--seed", help="Seed of the problems and of every stage.")
    dtype: str | None = declare(setting_of(EngineConfig, "dtype"), None, panel=None,
                                help="vLLM dtype of both models (default: float32 on CPU).")
    # World answers are ~30-60 tokens; the cap only stops a derailed sample.
    max_tokens: int = declare(setting_of(Sampling, "max_tokens"), 128, help="Tokens per response and per completion.")
    judge_max_tokens: int = setting(256, flags="--judge-max-tokens", min=1, help="Tokens per verdict.")
    start_timeout: float = declare(setting_of(EngineConfig, "start_timeout"), START_TIMEOUT, panel=None,
                                   help="Seconds to wait for each engine.")
    quiet: bool = True
    verbose: bool = setting(False, flags=("--verbose", "-v"), help=(
        "Show the libraries' warnings, logs and progress bars (off: the pipeline's own lines only)."))
    resume: bool = setting(False, flags="--resume", help=(
        "Continue an unfinished report with the same settings in --workdir (otherwise its files are replaced)."))

    def paths(self) -> dict[str, Path]:
        return {role: self.workdir / name for role, name in FILES.items()}

    def settings(self) -> dict[str, Any]:
        """What the stage files depend on: a report resumes only files made with these."""
        return {"problems": self.problems, "n": self.n, "k": self.k, "seed": self.seed, "max_tokens": self.max_tokens,
                "judge_max_tokens": self.judge_max_tokens, "dtype": self.dtype, "policy": model_setting(self.policy),
                "judge": model_setting(self.judge)}


@dataclass
class Timings:
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, started: float) -> None:
        self.seconds[name] = round(time.monotonic() - started, 1)


SETTINGS_FILE = "report.settings.json"
HTML_FILE = "report.html"
# Completion texts the rollouts keep per step: the HTML report shows what made a step 0.
KEEP_COMPLETIONS = 2
# The model stages' files, billed from their manifests, and the paper's sizes (7B policy and
# completer, 72B judge) the cost table bills them at too, as `stats --params` does.
BILLED = (("sample", "responses"), ("rollout", "rollouts"), ("judge", "judged"))
PAPER_SIZES = {"sample": 7_000_000_000, "rollout": 7_000_000_000, "judge": 72_000_000_000}


def clear_workdir(cfg: ReportConfig) -> None:
    """Remove the files of an earlier report (stage outputs and their sidecars), nothing else:
    the stages resume from what is on disk, and a report with other settings must not. With
    `cfg.resume`, files made with the same settings stay, for the stages to continue."""
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    marker = cfg.workdir / SETTINGS_FILE
    if cfg.resume and marker.is_file() and orjson.loads(marker.read_bytes()) == cfg.settings():
        return
    marker.unlink(missing_ok=True)
    for name in FILES.values():
        stem = name.removesuffix(".jsonl")
        for path in cfg.workdir.glob(f"{stem}.*"):
            if path.is_file():
                path.unlink()
    (cfg.workdir / HTML_FILE).unlink(missing_ok=True)
    marker.write_bytes(orjson.dumps(cfg.settings()))


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _engine_config(model: Path, cfg: ReportConfig):
    from prm_annotate.engines import EngineConfig

    return EngineConfig(model=str(model.resolve()), seed=cfg.seed, start_timeout=cfg.start_timeout, dtype=cfg.dtype,
                        load_progress=cfg.verbose)


def _run(stage: Any, input_path: Path, output_path: Path, cfg: ReportConfig, failures: list[str],
         timings: Timings) -> None:
    """Run one stage over a file as its command does, timed under the stage's name."""
    from prm_annotate.pipeline.runner import RunOptions, run_and_close

    t = time.monotonic()
    summary = run_and_close(stage, RunOptions(input=str(input_path), output=str(output_path), quiet=cfg.quiet))
    failures.extend(f"{stage.name} {rid}: {err}" for rid, err in summary.failures.items())
    timings.add(stage.name, t)


def run_pipeline(cfg: ReportConfig) -> tuple[Timings, list[str]]:
    """Problems -> responses -> rollouts -> judged -> consensus in `cfg.workdir`.

    Returns the wall time of each part and the records any stage failed (left out of the files).
    Raises what the engines or stages raise; every engine started here is closed on the way out."""
    from prm_annotate.engines import make_engine
    from prm_annotate.stages.rollout import RolloutStage
    from prm_annotate.stages.sample import SampleStage

    paths = cfg.paths()
    clear_workdir(cfg)
    write_jsonl(paths["problems"], make_problems(cfg.problems, seed=cfg.seed, split="test"))
    timings, failures = Timings(), []

    config = _engine_config(cfg.policy, cfg)
    t = time.monotonic()
    engine = make_engine(config)
    timings.add("policy engine start", t)
    try:
        _run(SampleStage(engine, n=cfg.n, temperature=0.7, max_tokens=cfg.max_tokens, seed=cfg.seed,
                         system_prompt=WORLD_SYSTEM_PROMPT, engine_info=config.describe()),
             paths["problems"], paths["responses"], cfg, failures, timings)
        _run(RolloutStage(engine, rollout_config(cfg), engine_info=config.describe()),
             paths["responses"], paths["rollouts"], cfg, failures, timings)
    finally:
        engine.close()  # before the judge's engine starts: two engines on 2 cores starve each other

    config = _engine_config(cfg.judge, cfg)
    t = time.monotonic()
    engine = make_engine(config)
    timings.add("judge engine start", t)
    try:
        judge_files(engine, config.describe(), cfg, failures, timings)
    finally:
        engine.close()
    consensus_files(cfg, timings)
    return timings, failures


def rollout_config(cfg: ReportConfig) -> RolloutConfig:
    """The world report's rollout, as it runs and as `plan` estimates it."""
    return configured(RolloutConfig(), dict(k=cfg.k, temperature=0.7, max_tokens=cfg.max_tokens, seed=cfg.seed,
                                            system_prompt=WORLD_SYSTEM_PROMPT, keep_completions=KEEP_COMPLETIONS))


def judge_config(cfg: Any) -> JudgeConfig:
    """The world judge (its `processbench` prompt), as both worlds run it and `plan` estimates it."""
    return configured(JudgeConfig(), dict(prompt=WORLD_JUDGE_PROMPT, max_tokens=cfg.judge_max_tokens, seed=cfg.seed))


def judge_files(engine: Any, engine_info: dict[str, Any], cfg: Any, failures: list[str], timings: Timings) -> None:
    """The world judge over the responses file, as the stage's command runs it."""
    from prm_annotate.stages.judge import JudgeStage

    paths = cfg.paths()
    _run(JudgeStage(engine, judge_config(cfg), engine_info=engine_info),
         paths["responses"], paths["judged"], cfg, failures, timings)


def consensus_files(cfg: Any, timings: Timings) -> None:
    from prm_annotate.stages.consensus import print_summary, run_consensus

    paths = cfg.paths()
    t = time.monotonic()
    print_summary(run_consensus(str(paths["rollouts"]), str(paths["judged"]), str(paths["consensus"]),
                                quiet=cfg.quiet))
    timings.add("consensus", t)


def write_html(cfg: ReportConfig) -> Any:
    """The browsable report of the files (`prm-annotate report`), beside them, the truth as gold."""
    from prm_annotate.reports.html import write_report

    paths = cfg.paths()
    return write_report([str(paths[r]) for r in ("responses", "rollouts", "judged", "consensus")],
                        str(cfg.workdir / HTML_FILE), gold=str(paths["gold"]))


def write_gold(problems_path: Path, responses_path: Path, gold_path: Path) -> list[dict[str, Any]]:
    """The truth for every response: `label` = its true first error, with the checker's reason."""
    problems = {p["id"]: p for p in read_jsonl(problems_path)}
    gold = []
    for r in read_jsonl(responses_path):
        verdicts = check_steps(problems[r["problem_id"]], r["steps"])
        wrong = next((v for v in verdicts if not v.ok), None)
        gold.append({"id": r["id"], "problem_id": r["problem_id"], "steps": r["steps"],
                     "label": -1 if wrong is None else wrong.index,
                     "reason": "ok" if wrong is None else wrong.reason,
                     "final_answer_correct": r["correct"]})
    write_jsonl(gold_path, gold)
    return gold


def generated_tokens(paths: dict[str, Path]) -> dict[str, int]:
    """Tokens each stage generated, summed from the records it wrote."""
    return {
        "sample": sum(r["generator"]["generated_tokens"] for r in read_jsonl(paths["responses"])),
        "rollout": sum(r["mc"]["generated_tokens"] for r in read_jsonl(paths["rollouts"])),
        "judge": sum(r["judge"].get("generated_tokens", 0) for r in read_jsonl(paths["judged"])),
        "consensus": 0,
    }


def stage_bill(paths: dict[str, Path]) -> dict[str, Any]:
    """Each model stage's bill from its run manifest (`reports/stats.stage_bills`, as `stats` reads
    it), at the world's model sizes and at the paper's (PAPER_SIZES)."""
    from prm_annotate.reports.stats import stage_bills

    files = [str(paths[role]) for _, role in BILLED]
    return {"world": stage_bills(files), "paper": stage_bills(files, PAPER_SIZES)}


def plan_against_bill(paths: dict[str, Path], configs: dict[str, Any], models: dict[str, Path],
                      cfg: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """`plan rollout|judge` on the responses file with the run's own configs, beside what the run's
    manifest billed: per stage and figure, low, measured, high and modelled (stages/plan.py)."""
    from prm_annotate.engines.bill import Bill
    from prm_annotate.io.output import sidecar
    from prm_annotate.stages.plan import by_stage

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage, role, field_ in (("rollout", "rollouts", "mc"), ("judge", "judged", "judge")):
        estimate = by_stage()[stage](str(paths["responses"]), configs[stage],
                                     _engine_config(models[stage], cfg).describe())
        run = orjson.loads(Path(sidecar(str(paths[role]), "manifest.json")).read_bytes())["runs"][-1]
        bill = Bill.read(run["bill"])
        records = read_jsonl(paths[role])
        completions = sum(r[field_]["completions"] if stage == "rollout" else len(r[field_]["votes"]) for r in records)
        measured = {"requests": bill.requests, "completions": completions, "prompt_tokens": bill.prompt_tokens,
                    "prefill_tokens": bill.prefill_tokens, "decode_tokens": bill.decode_tokens, "compute": bill.compute}
        out[stage] = {name: {"low": b.low, "measured": measured[name], "high": b.high, "modelled": b.modelled}
                      for name, b in estimate.figures.items()}
    return out


def run_settings(cfg: Any) -> dict[str, Any]:
    """What a world run's report says of its settings first (the world report's and the thinking
    world's)."""
    from prm_annotate.engines import resolve_dtype

    return {"problems": cfg.problems, "n": cfg.n, "k": cfg.k, "seed": cfg.seed, "dtype": resolve_dtype(cfg.dtype),
            "workdir": str(cfg.workdir)}


def truth_counts(gold: list[dict[str, Any]]) -> dict[str, int]:
    """The truth's counts every world report starts with."""
    return {"with_error": sum(g["label"] != -1 for g in gold),
            "answer_correct": sum(g["final_answer_correct"] is True for g in gold)}


def label_quality(cfg: ReportConfig, timings: Timings | None = None, failures: list[str] | None = None) -> dict[str, Any]:
    """Score the files in `cfg.workdir` against the truth; everything the table prints."""
    paths = cfg.paths()
    gold_records = write_gold(paths["problems"], paths["responses"], paths["gold"])
    scores, sources = scored(paths, len(gold_records))
    return {
        "settings": {**run_settings(cfg), "policy": str(cfg.policy), "judge": str(cfg.judge)},
        **scores,
        "truth": {
            **truth_counts(gold_records),
            "right_answer_flawed_process": sum(g["final_answer_correct"] is True and g["label"] != -1
                                               for g in gold_records),
        },
        "flawed_right_answers": flawed_right_answers(gold_records, sources),
        "tokens": generated_tokens(paths),
        "bill": stage_bill(paths),
        "plan": plan_against_bill(paths, {"rollout": rollout_config(cfg), "judge": judge_config(cfg)},
                                  {"rollout": cfg.policy, "judge": cfg.judge}, cfg),
        "html": str(write_html(cfg).path),
        "seconds": timings.seconds if timings else {},
        "failures": failures or [],
    }


def score_sources(paths: dict[str, Path]) -> tuple[dict[str, Any], list[Any]]:
    """Every label source (MC, judge, consensus) against `paths["gold"]` (`compare.compare_sources`)."""
    from prm_annotate.evaluation.label_sets import read_gold
    from prm_annotate.reports.compare import Source, compare_sources

    gold = read_gold([(str(paths["gold"]), None)])
    sources = [Source.read(name, str(paths[role]), fld, gold) for name, role, fld in SOURCES]
    return compare_sources(sources, gold), sources


def scored(paths: dict[str, Path], n: int) -> tuple[dict[str, Any], list[Any]]:
    """The sources' scores against the gold file of `n` responses, and what consensus kept."""
    result, sources = score_sources(paths)
    kept = result["sources"]["consensus"]["labelled"]
    return {"responses": n, "compare": result, "consensus_kept": kept,
            "consensus_kept_percent": 100.0 * kept / n if n else 0.0,
            "judge_unparsed": sources[1].preds.nulls}, sources


def flawed_right_answers(gold_records: list[dict[str, Any]], sources: list[Any]) -> dict[str, int]:
    """Right final answer, wrong step somewhere: how often each source names the true first error."""
    flawed = [g for g in gold_records if g["final_answer_correct"] is True and g["label"] != -1]
    out = {"n": len(flawed)}
    for s in sources[:2]:  # MC and judge; consensus is one of them where it exists
        out[s.name] = sum(1 for g in flawed if s.preds.first_error_of(g["id"]) == g["label"])
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def source_row(report: dict[str, Any], name: str) -> dict[str, Any]:
    s = report["compare"]["sources"][name]
    kept, everything = s["kept"]["overall"], s["all"]["overall"]
    return {"labelled": s["labelled"], "coverage": s["coverage"], "error_acc": kept["error_acc"],
            "correct_acc": kept["correct_acc"], "f1": kept["f1"], "f1_all": everything["f1"],
            "step_precision": s["step_label_precision"], "steps_compared": s["step_labels_compared"]}


def conclusions(report: dict[str, Any]) -> list[str]:
    """What the numbers say about consensus against MC and the judge alone, whichever way they fall."""
    rows = {name: source_row(report, name) for name, _, _ in SOURCES}
    c = rows["consensus"]
    lines = []
    if c["labelled"] == 0:
        return ["Consensus kept no response: MC and the judge never agreed, so it has no labels to score."]

    def versus(metric: str, what: str) -> str:
        mine = c[metric]
        others = {k: rows[k][metric] for k in ("MC", "judge")}
        if mine is None or any(v is None for v in others.values()):
            return f"{what}: not defined for every source on this sample."
        beaten = [k for k, v in others.items() if mine > v]
        figures = f"consensus {_pct(mine)} vs MC {_pct(others['MC'])}, judge {_pct(others['judge'])}"
        if len(beaten) == 2:
            return f"{what}: consensus is better than both sources alone ({figures})."
        if beaten:
            return f"{what}: consensus beats {beaten[0]} but not {'judge' if beaten[0] == 'MC' else 'MC'} ({figures})."
        return f"{what}: consensus is NOT better than either source alone ({figures})."

    lines.append(versus("step_precision", "Precision of the kept step labels"))
    lines.append(versus("f1", "ProcessBench F1 on the responses each source labels"))
    lines.append(f"The price: consensus keeps {_pct(report['consensus_kept_percent'])}% of the responses "
                 f"({c['labelled']} of {report['responses']}); on all responses (unkept ones counted wrong) its F1 "
                 f"is {_pct(c['f1_all'])} vs MC {_pct(rows['MC']['f1_all'])}, judge {_pct(rows['judge']['f1_all'])}.")
    wrong = report["compare"]["sources"]["consensus"]["kept"]["overall"]
    flagged = wrong["step_tp"] + wrong["step_fp"]
    if flagged == 0:
        lines.append("Every step label consensus keeps says 'right': it kept only responses both sources call "
                     "error-free, so its precision comes from dropping the hard cases, and it holds no example of a "
                     "wrong step to train on.")
    else:
        lines.append(f"Consensus keeps {flagged} 'wrong' step label(s); {_pct(wrong['step_precision'])}% of them are "
                     f"truly wrong (MC: {_pct(report['compare']['sources']['MC']['kept']['overall']['step_precision'])}%, "
                     f"judge: {_pct(report['compare']['sources']['judge']['kept']['overall']['step_precision'])}%).")
    flawed = report["flawed_right_answers"]
    if flawed["n"]:
        lines.append(f"{flawed['n']} response(s) reach the right answer through a wrong step (the paper's case against "
                     f"MC): MC finds the true first error in {flawed['MC']} of them, the judge in {flawed['judge']}.")
    return lines


def quality_table(report: dict[str, Any]):
    """The label-quality table: each source against the true first error (rich Table)."""
    from rich.table import Table

    n = report["responses"]
    quality = Table(title="Label quality against the true first error (ProcessBench metric, %)")
    for col in ("source", "labelled", "error acc", "correct acc", "F1", "F1 (all responses)",
                "kept step labels = truth"):
        quality.add_column(col, justify="left" if col == "source" else "right")
    for name, _, _ in SOURCES:
        r = source_row(report, name)
        quality.add_row(name, f"{r['labelled']}/{n} ({_pct(r['coverage'])}%)", _pct(r["error_acc"]),
                        _pct(r["correct_acc"]), _pct(r["f1"]), _pct(r["f1_all"]),
                        f"{_pct(r['step_precision'])} ({r['steps_compared']})")
    return quality


def _compute(x: float | None) -> str:
    from prm_annotate.engines.bill import amount

    return "—" if x is None else amount(x) if x >= 100 else f"{x:.3g}"


def cost_table(report: dict[str, Any]):
    """The bill per stage (`report["bill"]`, the manifests' as `stats` reads them): prefill, decode
    and the thought's share of it where told, compute at the world's sizes and at the paper's."""
    from rich.table import Table

    from prm_annotate.engines.bill import UNIT

    world = {r["stage"]: r for r in report["bill"]["world"]["stages"]}
    paper = {r["stage"]: r for r in report["bill"]["paper"]["stages"]}
    table = Table(title=f"The bill per stage (tokens; compute in {UNIT} = tokens x parameters / 1e9)")
    for col in ("stage", "requests", "prefill", "decode", "of it thought", "compute", "share %", "at paper sizes",
                "share %", "wall s"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    secs = report["seconds"]
    for stage in ("sample", "rollout", "judge", "consensus"):
        r, q = world.get(stage), paper.get(stage)
        if r is None:  # no model, no bill
            table.add_row(stage, *[""] * 8, _pct(secs.get(stage)))
            continue
        table.add_row(stage, f"{r['requests']:,}", f"{r['prefill_tokens']:,}", f"{r['decode_tokens']:,}",
                      f"{r['thought_tokens']:,}" if r["thought_tokens"] else "", _compute(r["compute"]),
                      _pct(None if r["share"] is None else 100 * r["share"]),
                      _compute(q["compute"]) + f" ({_size(q['params'])})",
                      _pct(None if q["share"] is None else 100 * q["share"]), _pct(secs.get(stage)))
    starts = sum(v for k, v in secs.items() if k.endswith("engine start"))
    if starts:
        table.add_row("engine starts", *[""] * 8, _pct(starts))
    return table


def _size(params: int | None) -> str:
    from prm_annotate.engines.bill import amount

    return "?" if params is None else amount(params).replace(".0B", "B")


def dominance(report: dict[str, Any]) -> str:
    """Which stage dominates the compute, at the world's sizes and at the paper's."""
    def said(bill: dict[str, Any]) -> str:
        top = max((r for r in bill["stages"] if r["share"] is not None), key=lambda r: r["share"], default=None)
        return "—" if top is None else f"{top['stage']} dominates ({_pct(100 * top['share'])}% of the compute)"

    judge = next((r for r in report["bill"]["paper"]["stages"] if r["stage"] == "judge"), None)
    share = ("" if judge is None or judge["share"] is None or report["bill"]["paper"]["dominant"] == "judge"
             else f"; the judge's share {_pct(100 * judge['share'])}%")
    return (f"At the world's sizes (every model {_size(report['bill']['world']['stages'][0]['params'])}) "
            f"{said(report['bill']['world'])}; at the paper's (7B policy and completer, 72B judge: "
            f"`prm-annotate stats --params`) {said(report['bill']['paper'])}{share}.")


def plan_table(report: dict[str, Any]):
    """`plan`'s estimate made from the responses file before the run, against the bill (low <=
    measured <= high are guaranteed; modelled is an upper figure, not a bound: docs/cost.md)."""
    from rich.table import Table

    table = Table(title="The estimate before the run (`prm-annotate plan`) against the bill")
    for col in ("stage", "figure", "low", "measured", "high", "modelled", "high / measured", "modelled / measured"):
        table.add_column(col, justify="left" if col in ("stage", "figure") else "right")

    def fmt(name: str, x: float | None) -> str:
        return "" if x is None else _compute(x) if name == "compute" else f"{x:,.0f}"

    def ratio(x: float | None, measured: float | None) -> str:
        return "" if x is None or not measured else f"{x / measured:.2f}"

    for stage, figures in report["plan"].items():
        for name, f in figures.items():
            table.add_row(stage, name.replace("_", " "), fmt(name, f["low"]), fmt(name, f["measured"]),
                          fmt(name, f["high"]), fmt(name, f["modelled"]), ratio(f["high"], f["measured"]),
                          ratio(f["modelled"], f["measured"]))
    return table


def render(report: dict[str, Any]):
    """The report as rich renderables: label quality per source, cost per stage, conclusions."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    s, t = report["settings"], report["truth"]
    n = report["responses"]
    head = Text(
        f"Arithmetic world: {s['problems']} problems x {s['n']} samples = {n} responses (K={s['k']} rollouts per step, "
        f"seed {s['seed']}, {s['dtype']}). Truth: {t['with_error']} responses ({_pct(100.0 * t['with_error'] / n if n else None)}%) "
        f"have a wrong step; {t['answer_correct']} reach the right answer, {t['right_answer_flawed_process']} of them "
        f"through a wrong step.")

    quality = quality_table(report)

    agree = report["compare"]["agreement"]
    cost = cost_table(report)
    total = sum(report["tokens"].values())
    kept = report["consensus_kept"]
    lines = [head, quality, cost, Text(dominance(report)), plan_table(report),
             Text(f"MC and judge agree on {_pct(agree['MC']['judge']['agree'])}% of the {agree['MC']['judge']['shared']} "
                  f"responses both label; the judge left {report['judge_unparsed']} unparsed. "
                  f"{total:,} tokens in all, {total // kept if kept else 0:,} per kept consensus response.")]
    lines += [Text("- " + line) for line in conclusions(report)]
    if report["failures"]:
        lines.append(Text(f"{len(report['failures'])} record(s) failed in a stage and are left out: "
                          + "; ".join(report["failures"][:3])))
    lines.append(Text(f"Files: {s['workdir']}/ (gold.jsonl holds the truth; {report['html']} shows each response; "
                      f"`prm-annotate compare {s['workdir']}/rollouts.jsonl {s['workdir']}/judged.jsonl "
                      f"{s['workdir']}/consensus.jsonl --gold {s['workdir']}/gold.jsonl` shows more)."))
    return Group(*lines)


def print_report(report: dict[str, Any]) -> None:
    print_renderable(render(report))


def print_renderable(renderable: Any) -> None:
    from rich.console import Console

    # Off a terminal rich assumes 80 columns and folds the table; 120 keeps it whole in a file.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    console.print(renderable)
