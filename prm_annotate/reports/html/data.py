"""The report's data: the pipeline's files read, checked and joined by id, the overview computed
from every record, and the responses a person browses (a seeded sample).

Each file's kind is read from its first record (a response, rollout, judged, consensus or scored
file; a `merged` file with `mc` and `judge` is both a rollout and a judged file); one file per kind.
Every record is validated with the model of its kind (records.py), so bad input is what every
command gives: file, line, reason, exit 2. A response's steps come from the files holding all of
them (responses, judged, rollouts, scored); a consensus record holds the steps up to its first
error, and must be their prefix. Two files holding other steps for one id are bad input.

Decisions:
- Two passes: the first validates every record and keeps of each id its string once, its step
  count, a digest of its steps and 8 bytes per file for its first error (the overview's other
  figures, MC curves and `stats`, are summed as the records go by); the second reads again the
  records of the sampled ids. A labelled set of millions of responses never sits in memory whole,
  and a stream (standard input) is refused. The consensus file (steps up to the first error) is
  read first, so the check that its steps are a prefix of the others' needs no per-step state.
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
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.jsonl import is_stream
from prm_annotate.io.manifest import source_runs
from prm_annotate.records import Consensus, Judged, Response, Rollout, Scored, describe_validation_error
from prm_annotate.reports.compare import agreement
from prm_annotate.evaluation.labels import (MISSING, ROWS, SAME, Gold, confusion_row, load_gold, read_rows,
                                            records_by_id)
from prm_annotate.reports.stats import collectors_of, kind_of

# The kinds a file can be, the record model each is validated with, and whether its steps are whole.
KINDS: dict[str, tuple[type, bool]] = {
    "response": (Response, True), "rollout": (Rollout, True), "judged": (Judged, True),
    "consensus": (Consensus, False), "scored": (Scored, True),
}
# The files a response's text is taken from, the first that holds it; the section the page shows of the others.
BASE = ("response", "judged", "rollout", "scored", "consensus")
SECTIONS = {"rollout": "mc", "judged": "judge", "scored": "prm"}
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


# What a file's record keeps between the passes: its first errors, 8 bytes an id each (a labelled set
# of a million responses does not fit in memory as dicts; the sample is read again).
FIRST_ERRORS = {"rollout": ("mc", "first_error"), "judged": ("judge", "first_error"), "consensus": (None, "first_error"),
                "scored": ("prm", "first_error")}
ABSENT, NULL = -(1 << 63), -(1 << 63) + 1  # a column's id without a record in the file; a null first error


class Ids:
    """Every id of the files, numbered as first met: the one place an id's string is held (the
    columns, step counts and step digests are arrays by that number)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.n_steps = array("q")
        self.digest = array("q")  # of all the id's steps (a chain of their hashes), from its first whole file
        self.origin = array("i")  # the position of that file in the command's list; -1: none yet

    def number(self, rid: str) -> int:
        i = self.index.get(rid)
        if i is None:
            i = self.index[rid] = len(self.index)
            self.n_steps.append(0)
            self.digest.append(0)
            self.origin.append(-1)
        return i

    def __len__(self) -> int:
        return len(self.index)


class Column(Mapping):
    """One file's first errors by id (None: the record has no label), read like the dict it stands for
    (`compare.agreement` takes it)."""

    def __init__(self, ids: Ids) -> None:
        self.ids, self.values = ids, array("q")

    def set(self, i: int, value: int | None) -> None:
        if i >= len(self.values):
            self.values.extend([ABSENT] * (i + 1 - len(self.values)))
        self.values[i] = NULL if value is None else value

    def at(self, i: int) -> int:
        return self.values[i] if i < len(self.values) else ABSENT

    def get(self, rid: str, default: Any = None) -> Any:
        i = self.ids.index.get(rid)
        value = ABSENT if i is None or i >= len(self.values) else self.values[i]
        return default if value == ABSENT else None if value == NULL else value

    def __getitem__(self, rid: str) -> int | None:
        value = self.get(rid, MISSING)
        if value is MISSING:
            raise KeyError(rid)
        return value

    def __contains__(self, rid: object) -> bool:
        return self.get(rid, MISSING) is not MISSING  # type: ignore[arg-type]

    def __iter__(self):
        return (rid for rid, i in self.ids.index.items() if self.at(i) != ABSENT)

    def __len__(self) -> int:
        return sum(1 for v in self.values if v != ABSENT)

    def items(self):
        for rid, i in self.ids.index.items():
            value = self.at(i)
            if value != ABSENT:
                yield rid, None if value == NULL else value


class Presence:
    """The ids one file holds, as `records_by_id` asks (`in`, and where an id was first seen: the file
    is read again for that, on the duplicate's rare path)."""

    def __init__(self, f: InputFile, ids: Ids) -> None:
        self.f, self.ids = f, ids

    def __contains__(self, rid: object) -> bool:
        return self.f.holds(rid)

    def __getitem__(self, rid: str) -> tuple[str, str]:
        return self.f.path, next(where for where, obj in read_rows(self.f.path) if obj.get("id") == rid)

    def __setitem__(self, rid: str, place: tuple[str, str]) -> None:
        i = self.ids.number(rid)
        present = self.f.present
        if i >= len(present):
            present.extend(bytes(i + 1 - len(present)))
        present[i] = 1


@dataclass
class InputFile:
    path: str
    position: int  # in the command's list of files
    kind: str = ""
    ids: Ids | None = None
    present: bytearray = field(default_factory=bytearray)  # by id number: 1 if the file holds the id
    columns: dict[str, Column] = field(default_factory=dict)  # kind -> its first errors
    stats: dict[str, Any] = field(default_factory=dict)
    curves: Curves | None = None
    full: dict[str, dict[str, Any]] = field(default_factory=dict)  # the records of the sample (second pass)

    def kinds(self) -> tuple[str, ...]:
        return ("rollout", "judged") if self.kind == "merged" else (self.kind,)

    @property
    def whole(self) -> bool:
        return KINDS.get(self.kind, (None, True))[1]

    def holds(self, rid: object) -> bool:
        i = None if self.ids is None else self.ids.index.get(rid)  # type: ignore[arg-type]
        return i is not None and i < len(self.present) and self.present[i] == 1

    def __len__(self) -> int:
        return self.present.count(1)


class Curves:
    """Mean MC score by relative step position (tenths), for responses MC found an error in and
    those it did not, summed as the rollout file is read; responses with an unprobed step are
    counted, not drawn."""

    def __init__(self) -> None:
        self.sums = {g: [0.0] * FIRST_ERROR_BINS for g in ("error", "no error")}
        self.ns = {g: [0] * FIRST_ERROR_BINS for g in self.sums}
        self.drawn: Counter = Counter()
        self.partial: Counter = Counter()

    def see(self, mc: dict[str, Any]) -> None:
        scores = mc["scores"]
        if any(s is None for s in scores):
            self.partial[mc["strategy"]] += 1
            return
        group = "no error" if mc["first_error"] == -1 else "error"
        self.drawn[group] += 1
        n = len(scores)
        for i, s in enumerate(scores):
            b = FIRST_ERROR_BINS - 1 if n == 1 else min(FIRST_ERROR_BINS - 1, int(FIRST_ERROR_BINS * i / (n - 1)))
            self.sums[group][b] += s
            self.ns[group][b] += 1

    def report(self) -> dict[str, Any]:
        sums, ns = self.sums, self.ns
        means = {g: [round(sums[g][b] / ns[g][b], 4) if ns[g][b] else None for b in range(FIRST_ERROR_BINS)]
                 for g in sums}
        return {"mean": means, "responses": dict(self.drawn), "not drawn (some steps not probed)": dict(self.partial)}


def chain(steps: list, upto: int = -1) -> tuple[int, int]:
    """(the digest of all the steps, the digest of the first `upto`): per-step hashes chained, equal
    within this process for equal steps (a few bytes an id, not a tuple of hashes)."""
    h = at = 0
    for i, step in enumerate(steps):
        if i == upto:
            at = h
        h = hash((h, step))
    return h, h if upto == len(steps) else at


class Steps:
    """The check that files hold the same steps for an id (a consensus record: their prefix), made as
    they are read. The files holding whole steps are checked against the first of them to hold the
    id; the prefix file (consensus) is read first, so that its length and digest per id are known
    when the first whole file meets the id. The first mismatch is the one the order of the files
    gives: whole files in the command's order, then the prefix file; it is raised once every file
    has been read (bad input in any file comes first, as it did)."""

    def __init__(self, ids: Ids, files: list[InputFile]) -> None:
        self.ids, self.files = ids, files
        self.prefix: InputFile | None = None
        self.prefix_len = array("q")
        self.prefix_digest = array("q")
        self.whole_mismatch: tuple[InputFile, str, str] | None = None  # (file, where, id)
        self.prefix_mismatch = -1  # the smallest id number of a prefix record that differs

    def see(self, f: InputFile, i: int, rid: str, where: str, steps: list) -> None:
        ids = self.ids
        if not f.whole:
            digest, _ = chain(steps)
            self.prefix_len.append(len(steps))
            self.prefix_digest.append(digest)
            if ids.origin[i] == -1:
                ids.n_steps[i], ids.digest[i], ids.origin[i] = len(steps), digest, f.position
            return
        mine = ids.origin[i]
        prefix = self.prefix is not None and i < len(self.prefix_len)
        if mine != -1 and mine != getattr(self.prefix, "position", None):
            if self.whole_mismatch is None and (ids.digest[i], ids.n_steps[i]) != (chain(steps)[0], len(steps)):
                self.whole_mismatch = (f, where, rid)
            return
        upto = self.prefix_len[i] if prefix else -1
        digest, at = chain(steps, upto)
        ids.n_steps[i], ids.digest[i], ids.origin[i] = len(steps), digest, f.position
        if prefix and (upto > len(steps) or at != self.prefix_digest[i]):
            if self.prefix_mismatch == -1 or i < self.prefix_mismatch:
                self.prefix_mismatch = i

    def check(self) -> None:
        if self.whole_mismatch is not None:
            f, where, rid = self.whole_mismatch
            raise InputError(f.path, where, f"id {rid!r} holds other steps than in {self.origin_path(rid)}")
        if self.prefix_mismatch != -1:
            assert self.prefix is not None
            rid = next(r for r, i in self.ids.index.items() if i == self.prefix_mismatch)
            where = Presence(self.prefix, self.ids)[rid][1]
            raise InputError(self.prefix.path, where, f"id {rid!r} holds other steps than in {self.origin_path(rid)}")
        del self.prefix_len, self.prefix_digest

    def origin_path(self, rid: str) -> str:
        return self.files[self.ids.origin[self.ids.index[rid]]].path


def read_file(f: InputFile, ids: Ids, steps: Steps) -> None:
    """Every record of one file, validated by its kind's model; its first errors, its `stats` and
    (a rollout file) its MC curves on the way."""
    collectors = collectors_of(f.path)
    f.ids = ids
    for where, rid, obj in records_by_id(f.path, Presence(f, ids)):  # type: ignore[arg-type]
        f.kind = f.kind or file_kind(obj)
        kinds = f.kinds()
        for k in kinds:
            if k not in KINDS:
                raise InputError(f.path, where, f"not a file of the pipeline (a {k} record): give responses, "
                                                "rollouts, judged, consensus or scored files, and gold labels with --gold")
            try:
                KINDS[k][0].model_validate(obj)
            except ValidationError as exc:
                raise InputError(f.path, where, f"not a {k} record: {describe_validation_error(exc)}") from None
        for collector in collectors:
            collector.see(obj)
        i = ids.index[rid]
        for k in kinds:
            if k in FIRST_ERRORS:
                part, name = FIRST_ERRORS[k]
                if k not in f.columns:
                    f.columns[k] = Column(ids)
                f.columns[k].set(i, (obj[part] if part else obj)[name])
        if "rollout" in kinds:
            f.curves = f.curves or Curves()
            f.curves.see(obj["mc"])
        steps.see(f, i, rid, where, obj["steps"])
    if not len(f):
        raise InputError(f.path, "line 0", "the file has no records")
    f.stats = {"path": f.path}
    for collector in collectors:
        f.stats.update(collector.report())


def _first_kind(path: str) -> str:
    """The kind of a file's first record ("" when it has none or cannot be read: its pass says why)."""
    try:
        return next((file_kind(obj) for _, obj in read_rows(path)), "")
    except (InputError, UsageError):
        return ""


def read_sample(j: Joined, f: InputFile, ids: set[str]) -> None:
    """The second pass: the records of the sampled ids (the file was validated whole). A record is kept
    whole where the page takes a response's text from it (the first of BASE to hold the id); else
    only the section the page shows of its kind (a thinking trace is not held three times)."""
    rank = min(BASE.index(k) for k in f.kinds())
    above = [j.by_kind[k] for k in BASE[:rank] if k in j.by_kind and j.by_kind[k] is not f]
    sections = [SECTIONS[k] for k in f.kinds() if k in SECTIONS]
    for _, obj in read_rows(f.path):
        rid = obj["id"]
        if rid not in ids:
            continue
        if not any(g.holds(rid) for g in above):
            f.full[rid] = obj
        elif sections:
            f.full[rid] = {part: obj[part] for part in sections}


@dataclass
class Joined:
    """The files by kind, and every id's step count."""

    files: list[InputFile]
    by_kind: dict[str, InputFile]
    ids: Ids
    gold: dict[str, Gold] = field(default_factory=dict)

    def first_error(self, kind: str, rid: str) -> int | None | object:
        """The first error a file of `kind` gives `rid` (None: unlabelled), MISSING without a record."""
        f = self.by_kind.get(kind)
        return MISSING if f is None else f.columns[kind].get(rid, MISSING)

    def record(self, kind: str, rid: str) -> dict[str, Any] | None:
        f = self.by_kind.get(kind)
        return None if f is None else f.full.get(rid)


def join(paths: list[str], gold_path: str | None = None) -> Joined:
    if not paths:
        raise UsageError("give at least one file of the pipeline (responses, rollouts, judged, consensus, scored)")
    if any(is_stream(p) for p in paths):
        raise UsageError("report reads its files twice (the overview, then the sample): give files, not a stream")
    ids = Ids()
    files = [InputFile(p, n) for n, p in enumerate(paths)]
    steps = Steps(ids, files)
    # The prefix file first (its bad input, if any, is raised at its place in the list).
    prefixes = [f for f in files if not KINDS.get(_first_kind(f.path), (None, True))[1]]
    failed: dict[int, InputError] = {}
    if len(prefixes) == 1:
        steps.prefix = prefixes[0]
        try:
            read_file(prefixes[0], ids, steps)
        except InputError as exc:
            failed[prefixes[0].position] = exc
    for f in files:
        if f.position in failed:
            raise failed[f.position]
        if f is not steps.prefix:
            read_file(f, ids, steps)
    by_kind: dict[str, InputFile] = {}
    for f in files:
        for k in f.kinds():
            if k in by_kind:
                raise UsageError(f"{by_kind[k].path} and {f.path} are both {k} files: give one file of each kind")
            by_kind[k] = f
    steps.check()
    gold = load_gold(gold_path) if gold_path else {}
    return Joined(files, by_kind, ids, gold)


def first_errors(j: Joined) -> dict[str, Mapping[str, int | None]]:
    """Each label source's first error by id (None: the source has the record but no label)."""
    out: dict[str, Mapping[str, int | None]] = {}
    for name, kind in SOURCES:
        f = j.by_kind.get(kind)
        if f is not None:
            out[name] = f.columns[kind]
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


def position_histograms(j: Joined, fes: dict[str, Mapping[str, int | None]]) -> dict[str, dict[str, int]]:
    out = {}
    index, n_steps = j.ids.index, j.ids.n_steps
    for name, col in fes.items():
        counts: Counter = Counter()
        for rid, fe in col.items():
            i = index.get(rid)
            if fe is not None and i is not None:
                counts[position_bin(fe, n_steps[i])] += 1
        out[name] = {b: counts[b] for b in [*map(str, range(FIRST_ERROR_BINS)), "last", "none"]}
    return out


def mc_curves(j: Joined) -> dict[str, Any]:
    """The rollout file's MC score curves (`Curves`), none without one."""
    f = j.by_kind.get("rollout")
    return {} if f is None or f.curves is None else f.curves.report()


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
    ours, theirs = mc.columns["rollout"], judged.columns["judged"]
    only: Counter = Counter()
    for i in range(len(j.ids)):
        a, b = ours.at(i), theirs.at(i)
        if a != ABSENT and b != ABSENT:
            rows[confusion_row(None if a == NULL else a, None if b == NULL else b)] += 1
        elif a != ABSENT or b != ABSENT:
            only["rollouts" if a != ABSENT else "judged"] += 1
    joined = sum(rows.values())
    return {"joined": joined, "kept": rows[SAME], "rows": {r: rows[r] for r in ROWS},
            "only in rollouts": only["rollouts"], "only in judged": only["judged"]}


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
        "responses": len(j.ids),
        "files": [{"path": f.path, "kind": f.kind, "stats": f.stats} for f in j.files],
        "kept": None if kept is None else len(kept),
        "kept_share": (100.0 * len(kept) / aside["joined"]) if kept is not None and aside.get("joined") else None,
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
    base = next((j.record(k, rid) for k in BASE if j.record(k, rid) is not None), {})
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
        entry["kept"] = j.by_kind["consensus"].holds(rid)
    if rid in j.gold:
        entry["gold"] = j.gold[rid].label
    if roll is not None and judged is not None:
        entry["row"] = confusion_row(roll["mc"]["first_error"], judged["judge"]["first_error"])
    return entry


def sample_ids(j: Joined, max_responses: int, seed: int) -> list[str]:
    """A seeded sample of the ids, disagreements of MC and the judge first, then by id."""
    ids = sorted(j.ids.index)
    if len(ids) > max_responses:
        ids = sorted(random.Random(seed).sample(ids, max_responses))
    mc, judged = j.by_kind.get("rollout"), j.by_kind.get("judged")

    def agrees(rid: str) -> bool:
        a, b = j.first_error("rollout", rid), j.first_error("judged", rid)
        return a is MISSING or b is MISSING or a == b

    return sorted(ids, key=agrees) if mc is not None and judged is not None else ids


def report_data(paths: list[str], gold: str | None = None, max_responses: int = 1000, seed: int = 0) -> dict[str, Any]:
    j = join(paths, gold)
    ids = sample_ids(j, max_responses, seed)
    for f in j.files:
        read_sample(j, f, set(ids))
    return {"overview": overview(j), "sample": {"shown": len(ids), "of": len(j.ids), "seed": seed},
            "responses": [response_entry(j, rid) for rid in ids]}
