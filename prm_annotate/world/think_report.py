"""The thinking world's label-quality report: the method on `<think>` traces, where the truth is known.

    prm-annotate world think [--problems 64 -n 4 -k 8 --seed 0 --workdir runs/world-think]

`make demo-think`. The world report's pipeline (report.py) with the thinking world's policy, the
shipped `thinker` (traces of attempts, slips, "Wait, ..." corrections and re-checks, then the
answer): sample (the thought and the answer kept apart, `--reasoning think`, steps cut by
paragraphs) -> rollout (`binary --share-prefixes`: a first error per response in about log2(steps)
probes, so MC has a row of its own; exhaustive's K per step is the benchmark's, not a 10-minute
demo's) -> judge (the world judge, `processbench` prompt, reading the thought's and the answer's
paragraphs as the record's steps) -> consensus. The truth is the trace truth
(`trace_truth.check_trace` of each record's thought and answer steps): the paper's label is the
first wrong paragraph, and a slip the trace corrects later is still the first error.

Printed: the world report's label-quality table of MC, judge and consensus against that truth;
the share of responses with a slip the trace corrects and with one it never catches; the steps per
response under each segmenter of the registry (the `segment` command's cuts of the same records);
the bill per stage (the manifests' `bill`, at the world's sizes and the paper's, naming the stage
that dominates) and `plan`'s estimate from the traces file beside it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from prm_annotate.engines import EngineConfig, Sampling
from prm_annotate.engines.defaults import START_TIMEOUT
from prm_annotate.settings import declare, setting, setting_of
from prm_annotate.stages.config import RolloutConfig, SampleConfig, configured
from prm_annotate.world import JUDGE_DIR, THINKER_DIR, WORLD_SYSTEM_PROMPT, model_setting
from prm_annotate.world.problems import make_problems
from prm_annotate.world.report import (FILES, ReportConfig, Timings, _engine_config, _run, clear_workdir, consensus_files,
                                       judge_config, judge_files, plan_against_bill, read_jsonl, run_settings, scored,
                                       source_row, stage_bill, truth_counts, write_jsonl)

# The rollout road of the demo: bisection for MC's first error, prefixes shared within a problem.
STRATEGY = "binary"
# Sampling temperature of the thinker's traces (and its rollouts): the thinker was measured at it.
TEMPERATURE = 0.7


@dataclass(frozen=True)
class ThinkConfig:
    """The settings of one `world think`; those that are options say so (the world report's or
    the stages' declarations, with the thinking world's defaults).

    Attributes:
        workdir: kept when `resume`.
        thinker: the thinking policy (sample, rollout); the shipped one by default.
        judge: the judge model; the shipped world judge by default.
        k: rollouts per probed step.
        judge_max_tokens: the judge copies the paragraphs it reads.
        quiet: the stages' progress lines off (their summaries stay).
        resume: keep the files of an unfinished run with the same settings.
    """
    workdir: Path = declare(setting_of(ReportConfig, "workdir"), Path("runs/world-think"))
    thinker: Path = THINKER_DIR
    judge: Path = JUDGE_DIR
    problems: int = declare(setting_of(ReportConfig, "problems"), 64)
    n: int = declare(setting_of(SampleConfig, "n"), 4)
    k: int = declare(setting_of(RolloutConfig, "k"), 8)
    seed: int = declare(setting_of(ReportConfig, "seed"), 0)
    dtype: str | None = declare(setting_of(ReportConfig, "dtype"), None)
    # Traces run to ~5 paragraphs (at most ~12) of ~20 tokens; the cap stops a derailed one.
    max_tokens: int = declare(setting_of(Sampling, "max_tokens"), 384, help="Tokens per trace and per completion.")
    judge_max_tokens: int = declare(setting_of(ReportConfig, "judge_max_tokens"), 512)
    start_timeout: float = declare(setting_of(ReportConfig, "start_timeout"), START_TIMEOUT)
    quiet: bool = True
    verbose: bool = declare(setting_of(ReportConfig, "verbose"), False)
    resume: bool = declare(setting_of(ReportConfig, "resume"), False)

    def paths(self) -> dict[str, Path]:
        return {role: self.workdir / name for role, name in FILES.items()}

    def settings(self) -> dict[str, Any]:
        """What the stage files depend on: a run resumes only files made with these."""
        return {"world": "thinking", "problems": self.problems, "n": self.n, "k": self.k, "seed": self.seed,
                "max_tokens": self.max_tokens, "judge_max_tokens": self.judge_max_tokens, "dtype": self.dtype,
                "thinker": model_setting(self.thinker), "judge": model_setting(self.judge),
                "strategy": STRATEGY, "temperature": TEMPERATURE}


# An engine for a model folder; the engine's owner closes it. Tests hand in their shared engines.
OpenEngine = Callable[[Path], Any]


def run_think_pipeline(cfg: ThinkConfig, open_engine: OpenEngine | None = None) -> tuple[Timings, list[str]]:
    """Problems -> traces -> rollouts -> judged -> consensus in `cfg.workdir`, one engine at a time.

    `open_engine(model_dir)` gives the engine for a model and leaves it open (the caller closes
    it); without it each engine is started here and closed before the next starts."""
    from prm_annotate.engines import make_engine
    from prm_annotate.stages.rollout import RolloutStage
    from prm_annotate.stages.sample import SampleStage

    paths = cfg.paths()
    clear_workdir(cfg)
    write_jsonl(paths["problems"], make_problems(cfg.problems, seed=cfg.seed, split="test"))
    timings, failures = Timings(), []

    def engine_for(model: Path, name: str):
        config = _engine_config(model, cfg)
        t = time.monotonic()
        engine = open_engine(model) if open_engine else make_engine(config)
        timings.add(f"{name} engine start", t)
        return engine, config.describe()

    engine, info = engine_for(cfg.thinker, "thinker")
    try:
        # The tokens' log-probabilities are kept so that every segmenter (confidence too) can cut them.
        _run(SampleStage(engine, n=cfg.n, temperature=TEMPERATURE, max_tokens=cfg.max_tokens, seed=cfg.seed,
                         system_prompt=WORLD_SYSTEM_PROMPT, reasoning="think", keep_logprobs=True, engine_info=info),
             paths["problems"], paths["responses"], cfg, failures, timings)
        _run(RolloutStage(engine, rollout_config(cfg), engine_info=info),
             paths["responses"], paths["rollouts"], cfg, failures, timings)
    finally:
        if open_engine is None:
            engine.close()  # before the judge's engine starts: two engines on 2 cores starve each other

    engine, info = engine_for(cfg.judge, "judge")
    try:
        judge_files(engine, info, cfg, failures, timings)
    finally:
        if open_engine is None:
            engine.close()
    consensus_files(cfg, timings)
    return timings, failures


def rollout_config(cfg: ThinkConfig) -> RolloutConfig:
    """The thinking world's rollout (STRATEGY, shared prefixes), as it runs and as `plan` estimates it."""
    return configured(RolloutConfig(), dict(k=cfg.k, temperature=TEMPERATURE, max_tokens=cfg.max_tokens, seed=cfg.seed,
                                            system_prompt=WORLD_SYSTEM_PROMPT, strategy=STRATEGY, share_prefixes=True))


def trace_gold(problems_path: Path, responses_path: Path, gold_path: Path) -> list[dict[str, Any]]:
    """The trace truth of every response record: `label` = its true first error, and its slips."""
    from prm_annotate.world.trace_truth import check_trace

    problems = {p["id"]: p for p in read_jsonl(problems_path)}
    gold = []
    for r in read_jsonl(responses_path):
        cut = r.get("thought_steps")
        if cut is None:
            raise ValueError(f"{responses_path}: record {r['id']} has no thought_steps: not a thinking trace")
        truth = check_trace(problems[r["problem_id"]], r["steps"][:cut], r["steps"][cut:],
                            finished=bool(r.get("thought_finished")))
        gold.append({"id": r["id"], "problem_id": r["problem_id"], "steps": r["steps"], "label": truth.first_error,
                     "final_answer_correct": r["correct"], "trace_final_correct": truth.final_correct,
                     "finished": truth.finished, "corrected_slips": len(truth.corrected_slips),
                     "uncaught_slips": len(truth.uncaught_slips), "wrong_corrections": len(truth.wrong_corrections)})
    write_jsonl(gold_path, gold)
    return gold


def segmenter_steps(responses_path: Path) -> dict[str, dict[str, Any]]:
    """Steps per response under each segmenter of the registry, as `prm-annotate segment` cuts the
    records (the thought cut apart from the answer, segmenting/texts.py)."""
    from prm_annotate.errors import UsageError
    from prm_annotate.segmenting import SEGMENTERS, get_segmenter
    from prm_annotate.stages.segment import Resegmented, resegment

    records = [(f"line {i + 1}", r) for i, r in enumerate(read_jsonl(responses_path))]
    out: dict[str, dict[str, Any]] = {}
    for name in SEGMENTERS:
        stats = Resegmented()
        try:
            for _ in resegment(records, get_segmenter(name), str(responses_path), stats):
                pass
        except UsageError as exc:  # said in the table, never guessed
            out[name] = {"error": str(exc)}
            continue
        counts = sorted(stats.after)
        out[name] = {"records": stats.records, "steps": sum(counts),
                     "mean": sum(counts) / stats.records if stats.records else None,
                     "median": counts[len(counts) // 2] if counts else None, "max": counts[-1] if counts else None}
    return out


def think_quality(cfg: ThinkConfig, timings: Timings | None = None, failures: list[str] | None = None) -> dict[str, Any]:
    """Score the files in `cfg.workdir` against the trace truth; everything `print_think` prints."""
    paths = cfg.paths()
    gold = trace_gold(paths["problems"], paths["responses"], paths["gold"])
    scores, _ = scored(paths, len(gold))
    return {
        "settings": {**run_settings(cfg), "thinker": str(cfg.thinker), "judge": str(cfg.judge),
                     "strategy": f"{STRATEGY} --share-prefixes", "temperature": TEMPERATURE},
        **scores,
        "truth": {
            **truth_counts(gold),
            "unfinished": sum(not g["finished"] for g in gold),
            "corrected_slip": sum(g["corrected_slips"] > 0 for g in gold),
            "uncaught_slip": sum(g["uncaught_slips"] > 0 for g in gold),
            "wrong_correction": sum(g["wrong_corrections"] > 0 for g in gold),
            "right_answer_after_corrected_slip": sum(g["final_answer_correct"] is True and g["corrected_slips"] > 0
                                                     for g in gold),
        },
        "segmenters": segmenter_steps(paths["responses"]),
        "bill": stage_bill(paths),
        "plan": plan_against_bill(paths, {"rollout": rollout_config(cfg), "judge": judge_config(cfg)},
                                  {"rollout": cfg.thinker, "judge": cfg.judge}, cfg),
        "seconds": timings.seconds if timings else {},
        "failures": failures or [],
    }


def _share(count: int, n: int) -> str:
    return f"{count} ({100.0 * count / n:.1f}%)" if n else "0"


def render_think(report: dict[str, Any]):
    """The thinking world's report as rich renderables."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from prm_annotate.world.report import _pct, cost_table, dominance, plan_table, quality_table

    s, t, n = report["settings"], report["truth"], report["responses"]
    head = Text(
        f"Thinking world: {s['problems']} problems x {s['n']} traces = {n} responses of the thinker (T={s['temperature']}, "
        f"seed {s['seed']}, {s['dtype']}); MC by {s['strategy']}, K={s['k']}. Truth (trace_truth): "
        f"{_share(t['with_error'], n)} have a wrong paragraph; {_share(t['corrected_slip'], n)} hold a slip the trace "
        f"corrects, {_share(t['uncaught_slip'], n)} a slip it never catches, {_share(t['wrong_correction'], n)} a wrong "
        f"correction; {_share(t['answer_correct'], n)} reach the right answer ({t['right_answer_after_corrected_slip']} "
        f"after a corrected slip, whose first error is the slip); {t['unfinished']} thoughts were cut.")
    segments = Table(title="Steps per response under each segmenter (the segment command's cuts of these records)")
    for col in ("segmenter", "steps", "mean", "median", "max"):
        segments.add_column(col, justify="left" if col == "segmenter" else "right")
    for name, row in report["segmenters"].items():
        if "error" in row:
            segments.add_row(name, row["error"], "", "", "")
        else:
            segments.add_row(name, f"{row['steps']:,}", f"{row['mean']:.1f}", str(row["median"]), str(row["max"]))
    rows = {name: source_row(report, name) for name in ("MC", "judge", "consensus")}
    lines = [head, quality_table(report), segments, cost_table(report), Text(dominance(report)), plan_table(report),
             Text(f"Consensus keeps {_share(report['consensus_kept'], n)} of the responses; the judge left "
                  f"{report['judge_unparsed']} unparsed. F1 on the responses each labels: MC {_pct(rows['MC']['f1'])}, "
                  f"judge {_pct(rows['judge']['f1'])}, consensus {_pct(rows['consensus']['f1'])}.")]
    if report["failures"]:
        lines.append(Text(f"{len(report['failures'])} record(s) failed in a stage and are left out: "
                          + "; ".join(report["failures"][:3])))
    lines.append(Text(f"Files: {s['workdir']}/ (gold.jsonl holds the trace truth)."))
    return Group(*lines)


def print_think(report: dict[str, Any]) -> None:
    from prm_annotate.world.report import print_renderable

    print_renderable(render_think(report))
