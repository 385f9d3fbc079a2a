"""The results of `world prm`: the summary written to results.json, the table and the picture.

Per source: the seeds' mean, standard deviation and range of every metric, and for F1 and
Best-of-N at the largest N an interval for the seeds' mean (bootstrap.pooled: problems and seeds
resampled). The comparisons the paper makes are paired differences on the same held-out problems,
per seed (problems resampled) and pooled over the seeds (bootstrap.pooled). A difference whose
interval covers 0 reads "no difference shown".
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable

import numpy as np

from lab.world.prm.bootstrap import Draws, accuracy_metric, f1_metric, paired, pooled, single
from lab.world.prm.labels import SOURCES

# (a, b, what the difference a - b asks)
COMPARISONS = (
    ("consensus", "MC", "consensus vs MC"),
    ("consensus", "MC (consensus-sized)", "consensus vs MC of the same size (quality, quantity held equal)"),
    ("consensus", "judge", "consensus vs judge"),
    ("MC", "MC soft", "hard vs soft MC labels"),
    ("truth (ceiling)", "consensus", "what perfect labels would add to consensus's"),
    ("truth (ceiling)", "truth (shuffled)", "the control: the true labels against the same labels shuffled among responses"),
    ("truth, no final step", "truth (shuffled), no final step",
     "the control without the final-step prior (no response's final step trained on)"),
)
SCALARS = ("f1", "error_acc", "correct_acc", "step_auc", "right_over_wrong", "score_range", "f1_at_0.5")
PER_PROBLEM = ("f1_counts", "picks", "rw_counts")  # the bootstrap's inputs: in the per-PRM files, not in results.json


def metric_names(largest_n: str) -> dict[str, tuple[Callable[[dict[str, Any]], np.ndarray], Any]]:
    """Metric shown -> (per-problem stats of a scorer's metrics, the metric of summed stats)."""
    def picks(agg: str) -> Callable[[dict[str, Any]], np.ndarray]:
        return lambda m: np.stack([np.asarray(m["picks"][agg][largest_n], float),
                                   np.ones(len(m["picks"][agg][largest_n]))], axis=1)

    return {"F1": (lambda m: np.asarray(m["f1_counts"], float), f1_metric),
            "right > wrong": (lambda m: np.asarray(m["rw_counts"], float), accuracy_metric),
            f"BoN@{largest_n} min": (picks("min"), accuracy_metric),
            f"BoN@{largest_n} prod": (picks("prod"), accuracy_metric)}


def spread(values: list[float | None]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "sd": None, "min": None, "max": None, "values": values}
    return {"mean": statistics.fmean(known), "sd": statistics.stdev(known) if len(known) > 1 else 0.0,
            "min": min(known), "max": max(known), "values": values}


def _public(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k not in PER_PROBLEM}


def source_summary(runs: list[dict[str, Any]], draws: Draws, metrics: dict[str, Any]) -> dict[str, Any]:
    """One source over its seeds."""
    ms = [r["metrics"] for r in runs]
    ns = [str(n) for n in ms[0]["bon"]["n"]]
    bon = {agg: {n: spread([m["bon"]["accuracy"][f"prm-{agg}"][n] for m in ms]) for n in ns} for agg in ("min", "prod")}
    flawed = {agg: spread([m["bon"]["right_answer_wrong_step"][f"prm-{agg}"]["share"] for m in ms])
              for agg in ("min", "prod")}
    return {
        "train": {"responses": spread([r["train"]["responses"] for r in runs]),
                  "val_responses": spread([r["train"]["val_responses"] for r in runs]),
                  "steps": [r["train"]["steps"] for r in runs], "best_steps": [r["train"]["best_step"] for r in runs],
                  "capped": sum(r["train"]["capped"] for r in runs),
                  "thresholds": [r["train"]["threshold"] for r in runs],
                  "seconds": spread([r["seconds"]["train"] + r["seconds"]["score"] for r in runs]),
                  "train_seconds": spread([r["seconds"]["train"] for r in runs])},
        **{k: spread([m[k] for m in ms]) for k in SCALARS},
        "bon": bon,
        "min_on_final_step": spread([m["bon"]["min_on_final_step"]["share"] for m in ms]),
        "right_answer_wrong_step": flawed,
        "intervals": {name: pooled(draws, [stats(m) for m in ms], None, fn).to_dict()
                      for name, (stats, fn) in metrics.items()},
        "per_seed": [{"seed": r["seed"], "train": r["train"], "seconds": r["seconds"], "metrics": _public(r["metrics"])}
                     for r in runs],
    }


def comparison(a: list[dict[str, Any]], b: list[dict[str, Any]], draws: Draws, stats: Any, fn: Any) -> dict[str, Any]:
    sa, sb = [stats(r["metrics"]) for r in a], [stats(r["metrics"]) for r in b]
    return {"per_seed": [{"seed": r["seed"], **paired(draws, x, y, fn).to_dict()} for r, x, y in zip(a, sa, sb)],
            "pooled": pooled(draws, sa, sb, fn).to_dict()}


def summarize(cfg: Any, report: dict[str, Any], held: Any, results: dict[tuple[str, int], dict[str, Any]],
              refs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """results.json: settings and sizes, the report's label quality, each source over its seeds,
    the reference rows, the baselines and the comparisons."""
    from lab.world.prm.scores import blind_baselines
    from prm_annotate.world.report import source_row

    seeds = sorted({s for _, s in results})
    runs = {s.name: [results[s.name, seed] for seed in seeds] for s in SOURCES}
    first = runs[SOURCES[0].name][0]["metrics"]["bon"]
    largest = str(first["n"][-1])
    metrics = metric_names(largest)
    draws = Draws(len(held.problem_ids), len(seeds))
    return {
        "settings": {**cfg.settings(), "seeds": seeds, "bootstrap": {"draws": draws.problems.shape[0],
                                                                       "scheme": "paired by held-out problem; pooled: "
                                                                                 "problems and seeds resampled"}},
        "sizes": {"train_problems": cfg.train_problems, "heldout_problems": len(held.problem_ids),
                  "heldout_responses": len(held.gold), "report_responses": report["responses"]},
        "labels": {name: source_row(report, name) for name in ("MC", "judge", "consensus")},
        "report_seconds": report["seconds"],
        "sources": {name: source_summary(rs, draws, metrics) for name, rs in runs.items()},
        "references": {name: {**_public(m), "intervals": {k: single(draws, stats(m), fn).to_dict()
                                                          for k, (stats, fn) in metrics.items()}}
                       for name, m in refs.items()},
        "baselines": {**{k: first["accuracy"][k] for k in ("majority", "pass@N")},
                      **blind_baselines(held, first["n"])},
        "n": first["n"],
        "comparisons": [{"a": a, "b": b, "question": q, "metric": name,
                         **comparison(runs[a], runs[b], draws, stats, fn)}
                        for a, b, q in COMPARISONS for name, (stats, fn) in metrics.items()],
    }


def _num(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _iv(d: dict[str, Any], signed: bool = False) -> str:
    fmt = "{:+.1f}" if signed else "{:.1f}"
    return f"{fmt.format(d['estimate'])} [{fmt.format(d['low'])}, {fmt.format(d['high'])}]"


def _range(values: list[int]) -> str:
    return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"


def _stops(train: dict[str, Any]) -> str:
    capped = f", {train['capped']} AT THE CAP" if train["capped"] else ""
    return f"{_range(train['steps'])} / {_range(train['best_steps'])}{capped}"


def results_table(summary: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    largest = str(summary["n"][-1])
    seeds, sizes = summary["settings"]["seeds"], summary["sizes"]
    table = Table(title=f"PRMs per label source: mean ± sd over {len(seeds)} seeds [95% interval], on "
                        f"{sizes['heldout_responses']} held-out responses of {sizes['heldout_problems']} problems, "
                        "against the true first errors")
    for col in ("PRM", "train", "stop / best step", "train s", "F1 ± sd [95%]", "err acc", "cor acc", "AUC",
                "right > wrong [95%]", "score range", f"BoN@{largest} min [95%]", f"BoN@{largest} prod [95%]",
                "min last", "flawed picks"):
        table.add_column(col, justify="left" if col == "PRM" else "right")
    for name, s in summary["sources"].items():
        iv = s["intervals"]
        table.add_row(name, _num(s["train"]["responses"]["mean"], 0), _stops(s["train"]),
                      _num(s["train"]["train_seconds"]["mean"], 0),
                      f"{_num(s['f1']['mean'])} ± {_num(s['f1']['sd'])} [{_num(iv['F1']['low'])}, {_num(iv['F1']['high'])}]",
                      _num(s["error_acc"]["mean"]), _num(s["correct_acc"]["mean"]), _num(s["step_auc"]["mean"], 3),
                      _iv(iv["right > wrong"]), _num(s["score_range"]["mean"], 4),
                      _iv(iv[f"BoN@{largest} min"]), _iv(iv[f"BoN@{largest} prod"]),
                      _num(s["min_on_final_step"]["mean"]), _num(s["right_answer_wrong_step"]["min"]["mean"]))
    for name, m in summary["references"].items():
        iv = m["intervals"]
        flawed = m["bon"]["right_answer_wrong_step"]["prm-min"]["share"]
        label = name if "seconds" in m else f"{name} (annotator)"
        table.add_row(label, "", "", _num(m.get("seconds"), 0), _iv(iv["F1"]), _num(m["error_acc"]),
                      _num(m["correct_acc"]), _num(m["step_auc"], 3), _iv(iv["right > wrong"]),
                      _num(m["score_range"], 4),
                      _iv(iv[f"BoN@{largest} min"]),
                      _iv(iv[f"BoN@{largest} prod"]),
                      _num(m["bon"]["min_on_final_step"]["share"]), _num(flawed))
    base = summary["baselines"]
    line = Text("baselines (the same for every PRM): " + "; ".join(
        f"N={n}: " + ", ".join(f"{k} {_num(base[k][str(n)])}" for k in base) for n in summary["n"]))
    comp = Table(title="Paired differences (a - b) on the same held-out problems [95% bootstrap interval]")
    for col in ("comparison", "metric", f"pooled over {len(seeds)} seeds", "reading", "per seed"):
        comp.add_column(col)
    for c in summary["comparisons"]:
        comp.add_row(f"{c['a']} - {c['b']}", c["metric"], _iv(c["pooled"], signed=True), c["pooled"]["reading"],
                     "; ".join(_iv(s, signed=True) for s in c["per_seed"]))
    notes = Text("train: training responses (mean); stop / best step: ranges over the seeds; train s: seconds to "
                 "train one PRM (mean; loading, training, validations, saving; the no-training row: scoring); err / cor acc: error "
                 "and correct accuracy; AUC: step AUC vs the true step labels; right > wrong: % of a problem's (right, "
                 "wrong answer) response pairs the min step score orders right (50: cannot tell them apart); score range: median "
                 "over problems of the range of its different responses' min step scores (0: scores the problem, not the "
                 "response); random response / random text: a pick blind to correctness among the N responses / "
                 "their different texts; min last: % of responses whose lowest "
                 f"step score is on the last step; flawed picks: % of BoN@{largest} min's right-answer picks with a "
                 "wrong step (the paper's two diagnostics)")
    return Group(table, notes, line, comp)


def print_results(summary: dict[str, Any]) -> None:
    from prm_annotate.reports.tables import show

    show(results_table(summary))


def plot_results(summary: dict[str, Any], path: Path) -> None:
    """F1 per source (seed mean, 95% interval, each seed a dot) beside Best-of-N by min against N,
    with majority vote and pass@N: a PNG, drawn headless."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = summary["sources"]
    names = list(sources) + [n if "seconds" in m else f"{n} (annotator)" for n, m in summary["references"].items()]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for i, (name, s) in enumerate(sources.items()):
        iv = s["intervals"]["F1"]
        left.errorbar(i, iv["estimate"], yerr=[[iv["estimate"] - iv["low"]], [iv["high"] - iv["estimate"]]],
                      fmt="o", color=f"C{i}", capsize=4)
        left.scatter([i] * len(s["f1"]["values"]), s["f1"]["values"], s=10, color=f"C{i}", alpha=0.5)
    for j, (name, m) in enumerate(summary["references"].items(), start=len(sources)):
        iv = m["intervals"]["F1"]
        left.errorbar(j, iv["estimate"], yerr=[[iv["estimate"] - iv["low"]], [iv["high"] - iv["estimate"]]],
                      fmt="s", mfc="none", color="gray", capsize=4)
    left.set_xticks(range(len(names)), names, rotation=25, ha="right")
    left.set_ylabel("ProcessBench F1 vs the truth (%)")
    left.set_title(f"F1 on held-out responses ({len(summary['settings']['seeds'])} seeds, 95% interval)")
    ns = summary["n"]
    for i, (name, s) in enumerate(sources.items()):
        right.plot(ns, [s["bon"]["min"][str(n)]["mean"] for n in ns], marker="o", color=f"C{i}", label=name)
    for key, style in (("majority", "--"), ("pass@N", ":"), ("random text", "-.")):
        right.plot(ns, [summary["baselines"][key][str(n)] for n in ns], style, color="black", label=key)
    right.set_xscale("log", base=2)
    right.set_xticks(ns, [str(n) for n in ns])
    right.set_xlabel("N (responses per problem)")
    right.set_ylabel("accuracy (% of held-out problems)")
    right.set_title("Best-of-N by the min step score (seed mean)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
