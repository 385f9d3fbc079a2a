"""The report's data: the pipeline's files read, checked and joined by id, the overview computed
from every record, and the responses a person browses (a seeded sample).

Each file's kind is read from its first record (a response, rollout, judged, consensus or scored
file; a `merged` file with `mc` and `judge` is both a rollout and a judged file); one file per kind.
Every record is validated with the model of its kind (records.py), so bad input is what every
command gives: file, line, reason, exit 2. A response's steps come from the files holding all of
them (responses, judged, rollouts, scored); a consensus record holds the steps up to its first
error, and must be their prefix. Two files holding other steps for one id are bad input.

Decisions:
- Two passes: the first validates every record and keeps of each only its first errors, MC scores
  and step hashes (the overview and the join need nothing else); the second reads again the
  records of the sampled ids. A labelled set of hundreds of thousands of responses never sits in
  memory whole, and a stream (standard input) is refused.
- The overview counts over every record; the response pages over a sample of `max_responses` ids
  drawn with `seed` (all of them when there are fewer), disagreements of MC and judge first.
- The figures the overview shows of a file are `stats`' (its collectors see every record), and the
  agreement of first errors is `compare`'s (`compare.agreement`): one set of numbers.
- A first error's place is relative to the response's length: step f of n at f / (n - 1), in
  tenths; the last step is its own bar (the paper's warning: PRMs whose errors bunch at the last
  step learn the outcome, not the process); "no error" is counted apart.
- MC score curves are drawn only from responses whose every step was scored: a strategy that
  probed some steps (binary, scan, verify) leaves nulls, and a curve through them would invent
  values. Those responses are counted, not drawn.
- A judge's analysis per step is read from the paper's `<analysis_k>` tags for display only (the
  verdict is the one the judge stage recorded; nothing here re-reads it). Other styles show their
  whole output.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.jsonl import is_stream
from prm_annotate.io.manifest import source_runs
from prm_annotate.records import Consensus, Judged, Response, Rollout, Scored, describe_validation_error
from prm_annotate.reports.compare import agreement
from prm_annotate.evaluation.labels import ROWS, SAME, Gold, confusion_row, load_gold, records_by_id
from prm_annotate.reports.stats import COLLECTORS, kind_of

# The kinds a file can be, the record model each is validated with, and whether its steps are whole.
KINDS: dict[str, tuple[type, bool]] = {
    "response": (Response, True), "rollout": (Rollout, True), "judged": (Judged, True),
    "consensus": (Consensus, False), "scored": (Scored, True),
}
# Label sources: name shown, the kind of file, how a record gives its first error.
SOURCES = (("MC", "rollout"), ("judge", "judged"), ("consensus", "consensus"), ("PRM", "scored"))
FIRST_ERROR_BINS = 10
FE_MATRIX = (*range(-1, 10), "10+", "null")
# Fields a cost row takes from a run's stats, in the order shown.
COST_FIELDS = ("generated_tokens", "prompt_tokens", "completions", "engine_completions")
_ANALYSIS = re.compile(r"<analysis_(\d+)>(.*?)(?=</analysis_\d+>|<analysis_\d+>|<conclusion>|\Z)", re.S)


def file_kind(obj: dict[str, Any]) -> str:
    if isinstance(obj.get("prm"), dict) and "labels" not in obj:
        return "scored"
    return kind_of(obj)


# What a file's record keeps between the passes: its first errors and scores, not its text (a
# labelled set of 300,000 responses does not fit in memory as dicts; the sample is read again).
SLIM = {"rollout": (("mc", "first_error"), ("mc", "scores"), ("mc", "strategy")),
        "judged": (("judge", "first_error"),), "consensus": ((None, "first_error"),), "scored": (("prm", "first_error"),),
        "response": ()}


@dataclass
class InputFile:
    path: str
    kind: str
    slim: dict[str, dict[str, Any]]
    where: dict[str, str]
    stats: dict[str, Any]
    full: dict[str, dict[str, Any]] = field(default_factory=dict)  # the records of the sample (second pass)

    def kinds(self) -> tuple[str, ...]:
        return ("rollout", "judged") if self.kind == "merged" else (self.kind,)


def _slim(obj: dict[str, Any], kinds: tuple[str, ...]) -> dict[str, Any]:
    # Per-step hashes stand for the steps: equal within this process, a few bytes each.
    out: dict[str, Any] = {"n": len(obj["steps"]), "sig": tuple(hash(step) for step in obj["steps"])}
    for kind in kinds:
        for part, name in SLIM[kind]:
            out[f"{part}.{name}" if part else name] = (obj[part] if part else obj)[name]
    return out


def read_file(path: str) -> InputFile:
    """Every record of one file, validated by its kind's model; the file's `stats` on the way."""
    collectors = [make() for make in COLLECTORS]
    slim: dict[str, dict[str, Any]] = {}
    where_of: dict[str, str] = {}
    kind = ""
    for where, rid, obj in records_by_id(path):
        kind = kind or file_kind(obj)
        kinds = ("rollout", "judged") if kind == "merged" else (kind,)
        for k in kinds:
            if k not in KINDS:
                raise InputError(path, where, f"not a file of the pipeline (a {k} record): give responses, rollouts, "
                                              "judged, consensus or scored files, and gold labels with --gold")
            try:
                KINDS[k][0].model_validate(obj)
            except ValidationError as exc:
                raise InputError(path, where, f"not a {k} record: {describe_validation_error(exc)}") from None
        for collector in collectors:
            collector.see(obj)
        slim[rid], where_of[rid] = _slim(obj, kinds), where
    if not slim:
        raise InputError(path, "line 0", "the file has no records")
    stats: dict[str, Any] = {"path": path}
    for collector in collectors:
        stats.update(collector.report())
    return InputFile(path, kind, slim, where_of, stats)


def read_sample(f: InputFile, ids: set[str]) -> None:
    """The second pass: the whole records of the sampled ids (the file was validated whole)."""
    f.full = {rid: obj for _, rid, obj in records_by_id(f.path) if rid in ids}


@dataclass
class Joined:
    """The files by kind, and every id's step count."""

    files: list[InputFile]
    by_kind: dict[str, InputFile]
    n_steps: dict[str, int]
    gold: dict[str, Gold] = field(default_factory=dict)

    def slim(self, kind: str, rid: str) -> dict[str, Any] | None:
        f = self.by_kind.get(kind)
        return None if f is None else f.slim.get(rid)

    def record(self, kind: str, rid: str) -> dict[str, Any] | None:
        f = self.by_kind.get(kind)
        return None if f is None else f.full.get(rid)


def join(paths: list[str], gold_path: str | None = None) -> Joined:
    if not paths:
        raise UsageError("give at least one file of the pipeline (responses, rollouts, judged, consensus, scored)")
    if any(is_stream(p) for p in paths):
        raise UsageError("report reads its files twice (the overview, then the sample): give files, not a stream")
    files = [read_file(p) for p in paths]
    by_kind: dict[str, InputFile] = {}
    for f in files:
        for k in f.kinds():
            if k in by_kind:
                raise UsageError(f"{by_kind[k].path} and {f.path} are both {k} files: give one file of each kind")
            by_kind[k] = f
    sigs: dict[str, tuple[int, ...]] = {}
    origin: dict[str, str] = {}
    for f in sorted(files, key=lambda f: not KINDS.get(f.kind, (None, True))[1]):  # whole steps first
        whole = KINDS.get(f.kind, (None, True))[1]
        for rid, rec in f.slim.items():
            theirs, mine = rec["sig"], sigs.get(rid)
            if mine is None:
                sigs[rid], origin[rid] = theirs, f.path
            elif (mine != theirs) if whole else (mine[: len(theirs)] != theirs):
                raise InputError(f.path, f.where[rid], f"id {rid!r} holds other steps than in {origin[rid]}")
    gold = load_gold(gold_path) if gold_path else {}
    return Joined(files, by_kind, {rid: len(sig) for rid, sig in sigs.items()}, gold)


def first_errors(j: Joined) -> dict[str, dict[str, int | None]]:
    """Each label source's first error by id (None: the source has the record but no label)."""
    out: dict[str, dict[str, int | None]] = {}
    for name, kind in SOURCES:
        f = j.by_kind.get(kind)
        if f is None:
            continue
        key = {"rollout": "mc.first_error", "judged": "judge.first_error", "scored": "prm.first_error"}.get(kind,
                                                                                                       "first_error")
        out[name] = {rid: rec[key] for rid, rec in f.slim.items()}
    if j.gold:
        out["gold"] = {rid: g.label for rid, g in j.gold.items()}
    return out


def _fe_bin(value: int | None) -> Any:
    return "null" if value is None else value if value < 10 else "10+"


def position_bin(first_error: int, n_steps: int) -> str:
    """Where a first error sits in its response: "none", "last", or the tenth it falls in."""
    if first_error == -1:
        return "none"
    if first_error >= n_steps - 1:
        return "last"
    return str(min(FIRST_ERROR_BINS - 1, int(FIRST_ERROR_BINS * first_error / (n_steps - 1))))


def position_histograms(j: Joined, fes: dict[str, dict[str, int | None]]) -> dict[str, dict[str, int]]:
    out = {}
    for name, col in fes.items():
        counts: Counter = Counter()
        for rid, fe in col.items():
            if fe is not None and rid in j.n_steps:
                counts[position_bin(fe, j.n_steps[rid])] += 1
        out[name] = {b: counts[b] for b in [*map(str, range(FIRST_ERROR_BINS)), "last", "none"]}
    return out


def mc_curves(j: Joined) -> dict[str, Any]:
    """Mean MC score by relative step position (tenths), for responses MC found an error in and
    those it did not; responses with an unprobed step are counted, not drawn."""
    f = j.by_kind.get("rollout")
    if f is None:
        return {}
    sums = {g: [0.0] * FIRST_ERROR_BINS for g in ("error", "no error")}
    ns = {g: [0] * FIRST_ERROR_BINS for g in sums}
    drawn, partial = Counter(), Counter()
    for rec in f.slim.values():
        scores = rec["mc.scores"]
        if any(s is None for s in scores):
            partial[rec["mc.strategy"]] += 1
            continue
        group = "no error" if rec["mc.first_error"] == -1 else "error"
        drawn[group] += 1
        n = len(scores)
        for i, s in enumerate(scores):
            b = FIRST_ERROR_BINS - 1 if n == 1 else min(FIRST_ERROR_BINS - 1, int(FIRST_ERROR_BINS * i / (n - 1)))
            sums[group][b] += s
            ns[group][b] += 1
    means = {g: [round(sums[g][b] / ns[g][b], 4) if ns[g][b] else None for b in range(FIRST_ERROR_BINS)] for g in sums}
    return {"mean": means, "responses": dict(drawn), "not drawn (some steps not probed)": dict(partial)}


def cost_rows(paths: list[str]) -> list[dict[str, Any]]:
    """One row per run in the manifests reachable from the files: what each stage spent."""
    rows, seen = [], set()
    for path in paths:
        for file, run in source_runs(path):
            if run is None:
                continue
            # A run is itself whichever file's manifest names it (a copied file keeps its manifest).
            key = (run.get("stage"), run.get("finished"), run.get("seconds"), str(run.get("argv")))
            if key in seen:
                continue
            seen.add(key)
            stats, settings, counts = run.get("stats") or {}, run.get("settings") or {}, run.get("counts") or {}
            rows.append({"file": file, "stage": run.get("stage"), "finished": run.get("finished"),
                         "seconds": run.get("seconds"), "model": settings.get("model"),
                         "written": counts.get("written"), "failed": counts.get("failed"),
                         "rejected": counts.get("rejected"),
                         **{k: stats.get(k) for k in COST_FIELDS}})
    return rows


def set_aside(j: Joined) -> dict[str, Any]:
    """Why responses did not reach the consensus set: the confusion rows of the joined pairs, and
    ids found in one of the two files only."""
    mc, judged = j.by_kind.get("rollout"), j.by_kind.get("judged")
    if mc is None or judged is None:
        return {}
    rows: Counter = Counter()
    for rid, rec in mc.slim.items():
        other = judged.slim.get(rid)
        if other is not None:
            rows[confusion_row(rec["mc.first_error"], other["judge.first_error"])] += 1
    joined = sum(rows.values())
    return {"joined": joined, "kept": rows[SAME], "rows": {r: rows[r] for r in ROWS},
            "only in rollouts": len(mc.slim.keys() - judged.slim.keys()),
            "only in judged": len(judged.slim.keys() - mc.slim.keys())}


def overview(j: Joined) -> dict[str, Any]:
    fes = first_errors(j)
    matrix: dict[str, dict[str, int]] = {}
    if "MC" in fes and "judge" in fes:
        counts: Counter = Counter()
        for rid, m in fes["MC"].items():
            if rid in fes["judge"]:
                counts[(_fe_bin(m), _fe_bin(fes["judge"][rid]))] += 1
        matrix = {str(a): {str(b): counts[(a, b)] for b in FE_MATRIX} for a in FE_MATRIX}
    kept = j.by_kind.get("consensus")
    aside = set_aside(j)
    return {
        "responses": len(j.n_steps),
        "files": [{"path": f.path, "kind": f.kind, "stats": f.stats} for f in j.files],
        "kept": None if kept is None else len(kept.slim),
        "kept_share": (100.0 * len(kept.slim) / aside["joined"]) if kept is not None and aside.get("joined") else None,
        "agreement": agreement(fes) if len(fes) > 1 else {},
        "matrix": matrix,
        "positions": position_histograms(j, fes),
        "curves": mc_curves(j),
        "cost": cost_rows([f.path for f in j.files]),
        "set_aside": aside,
        "gold": bool(j.gold),
    }


def step_analyses(text: str, n_steps: int) -> list[str | None] | None:
    """The paper style's analysis of each step, as written (display only); None if it has none."""
    found = {int(m.group(1)) - 1: m.group(2).strip() for m in _ANALYSIS.finditer(text)}
    if not found:
        return None
    return [found.get(i) for i in range(n_steps)]


def response_entry(j: Joined, rid: str) -> dict[str, Any]:
    """One response as the page shows it (short keys: the page holds thousands)."""
    base = next((j.record(k, rid) for k in ("response", "judged", "rollout", "scored", "consensus")
                 if j.record(k, rid) is not None), {})
    steps = base["steps"]
    entry: dict[str, Any] = {"id": rid, "problem": base.get("problem"), "pid": base.get("problem_id"),
                             "steps": steps, "correct": base.get("correct"), "answer": base.get("final_answer"),
                             "thought": base.get("thought_steps")}
    roll = j.record("rollout", rid)
    if roll is not None:
        mc = roll["mc"]
        entry["mc"] = {"s": mc["scores"], "fe": mc["first_error"], "k": mc["k"], "strategy": mc["strategy"],
                       "kept": mc.get("kept_completions")}
    judged = j.record("judged", rid)
    if judged is not None:
        judge = judged["judge"]
        outputs = [o for o in judge.get("outputs") or [] if isinstance(o, str)]
        entry["judge"] = {"fe": judge["first_error"], "votes": judge["votes"], "out": outputs,
                          "per": [step_analyses(o, len(steps)) for o in outputs],
                          "errors": judge.get("parse_errors") or []}
    scored = j.record("scored", rid)
    if scored is not None:
        entry["prm"] = {"s": scored["prm"]["scores"], "fe": scored["prm"]["first_error"]}
    if "consensus" in j.by_kind:
        entry["kept"] = rid in j.by_kind["consensus"].slim
    if rid in j.gold:
        entry["gold"] = j.gold[rid].label
    if roll is not None and judged is not None:
        entry["row"] = confusion_row(roll["mc"]["first_error"], judged["judge"]["first_error"])
    return entry


def sample_ids(j: Joined, max_responses: int, seed: int) -> list[str]:
    """A seeded sample of the ids, disagreements of MC and the judge first, then by id."""
    ids = sorted(j.n_steps)
    if len(ids) > max_responses:
        ids = sorted(random.Random(seed).sample(ids, max_responses))
    mc, judged = j.by_kind.get("rollout"), j.by_kind.get("judged")

    def agrees(rid: str) -> bool:
        a, b = j.slim("rollout", rid), j.slim("judged", rid)
        return a is None or b is None or a["mc.first_error"] == b["judge.first_error"]

    return sorted(ids, key=agrees) if mc is not None and judged is not None else ids


def report_data(paths: list[str], gold: str | None = None, max_responses: int = 1000, seed: int = 0) -> dict[str, Any]:
    j = join(paths, gold)
    ids = sample_ids(j, max_responses, seed)
    for f in j.files:
        read_sample(f, set(ids))
    return {"overview": overview(j), "sample": {"shown": len(ids), "of": len(j.n_steps), "seed": seed},
            "responses": [response_entry(j, rid) for rid in ids]}
