"""What is in a file of any record type of the pipeline: counts, step counts, first errors, MC
scores, judge parse failures, tokens. Sections appear only for the fields the records have."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

from prm_annotate.judging import reason_kind
from prm_annotate.errors import InputError, UsageError
from prm_annotate.evaluation.labels import MISSING, get_path, read_rows
from prm_annotate.io.compact import IntSum, Numbers
from prm_annotate.io.id_keys import IdHashes, id_hash
from prm_annotate.io.jsonl import is_stream
from prm_annotate.recovery.report import count, counted, reading_of, recovery_field
from prm_annotate.settings import setting

FIRST_ERROR_FIELDS = ("label", "first_error", "mc.first_error", "judge.first_error")
STEP_BINS = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 7), (8, 10), (11, 15), (16, 20), (21, 30), (31, None))
SCORE_BINS = ((0.0, 0.0, "0"), (0.0, 0.25, "(0, .25]"), (0.25, 0.5, "(.25, .5]"), (0.5, 0.75, "(.5, .75]"),
              (0.75, 1.0, "(.75, 1)"), (1.0, 1.0, "1"))  # (low, high, name); low < s <= high, ends exact


def kind_of(obj: dict[str, Any]) -> str:
    has_mc, has_judge = isinstance(obj.get("mc"), dict), isinstance(obj.get("judge"), dict)
    if "labels" in obj and "first_error" in obj:
        return "consensus"
    if has_mc and has_judge:
        return "merged"
    if has_mc:
        return "rollout"
    if has_judge:
        return "judged"
    if "label" in obj and "steps" in obj:
        return "processbench"
    if "steps" in obj or "response" in obj:
        return "response"
    if "problem" in obj or "question" in obj:
        return "problem"
    return "unknown"


def _summary(values: Numbers) -> dict[str, Any]:
    if not values:
        return {}
    return {"min": values.min(), "mean": values.fmean(), "median": values.median(), "max": values.max(),
            "total": values.total()}


def _step_bin(n: int) -> str:
    for lo, hi in STEP_BINS:
        if n >= lo and (hi is None or n <= hi):
            return str(lo) if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
    return "0"


def _first_error_bin(value: Any) -> Any:
    """-1..9, "10+", "null", or "not an integer" ("2" is not 2, true is not 1: readers refuse them)."""
    if value is None:
        return "null"
    if isinstance(value, bool) or not isinstance(value, int):
        return "not an integer"
    return value if value < 10 else "10+"


def _score_bin(s: float) -> str:
    if s <= 0.0:
        return "0"
    if s >= 1.0:
        return "1"
    for _, hi, name in SCORE_BINS[1:-1]:
        if s <= hi:
            return name
    return SCORE_BINS[-2][2]


def _histogram(counter: Counter, order: list[Any]) -> dict[str, int]:
    return {str(k): counter[k] for k in order if counter[k]}


class Collector:
    """One section of the report: sees every record, then gives its entries (none when the
    records have nothing for it)."""

    def see(self, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def report(self) -> dict[str, Any]:
        raise NotImplementedError


class Counts(Collector):
    """Records, their kinds, their ids (8 bytes each: a hash; a hash seen twice is looked at again in
    the file, or, for a stream, taken as the duplicate it almost surely is)."""

    def __init__(self, path: str | None = None) -> None:
        self.records = self.bad_ids = self.missing = 0
        self.kinds: Counter = Counter()
        self.ids = IdHashes()
        self.path = path

    def see(self, obj: dict[str, Any]) -> None:
        self.records += 1
        self.kinds[kind_of(obj)] += 1
        rid = obj.get("id")
        if isinstance(rid, str):
            self.ids.add(rid)
        elif rid is None:
            self.missing += 1
        else:
            self.bad_ids += 1  # a number or an object: no reader takes it, so it is not counted as an id

    def _duplicates(self) -> tuple[int, int]:
        """(unique ids, ids seen more than once)."""
        clashes = self.ids.clashes()
        if not clashes or self.path is None or is_stream(self.path):
            return self.ids.distinct(), len(clashes)
        seen: Counter = Counter()
        for _, obj in read_rows(self.path):
            rid = obj.get("id")
            if isinstance(rid, str) and id_hash(rid) in clashes:
                seen[rid] += 1
        per_hash = Counter(id_hash(rid) for rid in seen)
        return self.ids.distinct(dict(per_hash)), sum(1 for c in seen.values() if c > 1)

    def report(self) -> dict[str, Any]:
        kinds = self.kinds
        unique, duplicated = self._duplicates()
        return {"records": self.records,
                "kind": kinds.most_common(1)[0][0] if len(kinds) == 1 else "mixed",
                "kinds": dict(kinds) if len(kinds) > 1 else {},
                "ids": {"unique": unique, "duplicated": duplicated + (self.missing > 1),
                        "missing": self.missing, **({"not a string": self.bad_ids} if self.bad_ids else {})}}


class Steps(Collector):
    def __init__(self) -> None:
        self.n_steps = Numbers()  # step counts: few distinct values

    def see(self, obj: dict[str, Any]) -> None:
        if isinstance(obj.get("steps"), list):
            self.n_steps.add(len(obj["steps"]))

    def report(self) -> dict[str, Any]:
        if not self.n_steps:
            return {}
        hist: Counter = Counter()
        for n, count in self.n_steps.sorted_items():
            hist[_step_bin(n)] += count
        return {"steps": _summary(self.n_steps),
                "steps_histogram": {name: hist[name] for name in [_step_bin(lo) for lo, _ in STEP_BINS] if hist[name]}}


class FirstErrors(Collector):
    ORDER: tuple[Any, ...] = (*range(-1, 10), "10+", "null", "not an integer")

    def __init__(self) -> None:
        self.bins: dict[str, Counter] = {f: Counter() for f in FIRST_ERROR_FIELDS}

    def see(self, obj: dict[str, Any]) -> None:
        for f in FIRST_ERROR_FIELDS:
            value = get_path(obj, f)
            # a top-level `label` is only a first error when it is one (math-shepherd's is text)
            if value is not MISSING and (f != "label" or value is None or type(value) is int):
                self.bins[f][_first_error_bin(value)] += 1

    def report(self) -> dict[str, Any]:
        return {"first_error": {f: _histogram(c, list(self.ORDER)) for f, c in self.bins.items() if c}}


class Section(Collector):
    """A collector of one object-valued section of a record (`mc`, `judge`): it sees the records that
    have one, and counts the `name=value` of each setting in `settings` (model, prompt, ...)."""

    section = ""
    settings: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.meta: Counter = Counter()

    def see(self, obj: dict[str, Any]) -> None:
        part = obj.get(self.section)
        if isinstance(part, dict):
            self.see_section(part)
            for name in self.settings:
                if name in part:
                    self.meta[f"{name}={part[name]}"] += 1

    def see_section(self, part: dict[str, Any]) -> None:
        raise NotImplementedError


class MCScores(Section):
    section = "mc"

    def __init__(self) -> None:
        super().__init__()
        self.scores = Numbers(cap=1 << 16)  # MC scores are mostly j/k: few distinct values
        self.bins: Counter = Counter()
        self.null_scores = 0

    def see_section(self, mc: dict[str, Any]) -> None:
        for s in mc.get("scores") or []:
            if s is None:
                self.null_scores += 1
            elif isinstance(s, (int, float)):
                s = float(s)
                self.scores.add(s)
                self.bins[_score_bin(s)] += 1

    def report(self) -> dict[str, Any]:
        scores, bins = self.scores, self.bins
        if not (scores or self.null_scores):
            return {}
        return {"mc_scores": {"steps scored": scores.n, "not probed (null)": self.null_scores,
                              "mean": scores.fmean() if scores else None,
                              **{name: bins[name] for _, _, name in SCORE_BINS}}}


class MCCosts(Section):
    """What the rollouts cost, and the settings they ran with."""

    section, settings = "mc", ("k", "label", "strategy", "model")

    def __init__(self) -> None:
        super().__init__()
        self.tokens, self.completions = IntSum(), IntSum()

    def see_section(self, mc: dict[str, Any]) -> None:
        for name, bucket in (("generated_tokens", self.tokens), ("completions", self.completions)):
            if isinstance(mc.get(name), int):
                bucket.add(mc[name])

    def report(self) -> dict[str, Any]:
        if not (self.tokens or self.completions or self.meta):
            return {}
        return {"mc": {"completions": self.completions.total, "generated_tokens": self.tokens.total,
                       "tokens per record": self.tokens.fmean() if self.tokens else None, **dict(self.meta)}}


class Judge(Section):
    section, settings = "judge", ("model", "prompt")

    def __init__(self) -> None:
        super().__init__()
        self.failures, self.votes = IntSum(), IntSum()
        self.unparsed = 0
        self.cut: int | None = None  # None: no record says (written before `judge.cut` was recorded)
        self.reasons: Counter = Counter()

    def see_section(self, judge: dict[str, Any]) -> None:
        if isinstance(judge.get("parse_failures"), int):
            self.failures.add(judge["parse_failures"])
        self.unparsed += judge.get("first_error", MISSING) is None
        if isinstance(judge.get("votes"), list):
            self.votes.add(len(judge["votes"]))
        if isinstance(judge.get("cut"), int) and not isinstance(judge["cut"], bool):
            self.cut = (self.cut or 0) + judge["cut"]
        for error in judge.get("parse_errors") or []:
            if isinstance(error, str):
                self.reasons[reason_kind(error)] += 1

    def report(self) -> dict[str, Any]:
        if not (self.failures or self.votes or self.meta):
            return {}
        votes = self.votes.total
        share = (lambda n: 100.0 * n / votes) if votes else (lambda n: None)
        return {"judge": {"parse_failures": self.failures.total,
                          "records with a parse failure": self.failures.nonzero,
                          "no parsed vote (first_error null)": self.unparsed,
                          "votes per record": self.votes.fmean() if self.votes else None,
                          "votes not parsed (%)": share(self.failures.total),
                          "votes cut at max tokens (%)": None if self.cut is None else share(self.cut),
                          **{f"not parsed: {kind}": n for kind, n in self.reasons.most_common()},
                          **dict(self.meta)}}


class Tally(Collector):
    """A section that is one counter, shown when anything was counted."""

    section = ""

    def __init__(self) -> None:
        self.counts: Counter = Counter()

    def report(self) -> dict[str, Any]:
        return {self.section: dict(self.counts)} if self.counts else {}


class StepLabels(Tally):
    """Consensus labels, step by step."""

    section = "step_labels"

    def see(self, obj: dict[str, Any]) -> None:
        for value in obj["labels"] if isinstance(obj.get("labels"), list) else []:
            self.counts["right" if value is True else "wrong" if value is False else "other"] += 1


class Answers(Tally):
    """Final answers: graded, judged by humans (ProcessBench), or missing."""

    section = "answers"

    def see(self, obj: dict[str, Any]) -> None:
        if "correct" in obj:
            value = obj["correct"]  # any JSON value: only true, false and null have a name
            known = value is None or isinstance(value, bool)
            self.counts[{True: "correct", False: "incorrect", None: "ungraded"}[value] if known else "other"] += 1
        if isinstance(obj.get("final_answer_correct"), bool):  # ProcessBench's human verdict
            self.counts["final_answer_correct" if obj["final_answer_correct"] else "final_answer_incorrect"] += 1
        if "final_answer" in obj and obj["final_answer"] is None:
            self.counts["no final answer"] += 1


class Tokens(Tally):
    """Token counts wherever a stage records them."""

    section = "tokens"

    def see(self, obj: dict[str, Any]) -> None:
        for owner in ("generator", "mc", "judge"):
            part = obj.get(owner)
            for key, value in part.items() if isinstance(part, dict) else ():
                # Counts only: max_tokens is a setting, not tokens spent.
                if (key.endswith("tokens") and not key.startswith("max_") and isinstance(value, int)
                        and not isinstance(value, bool)):
                    self.counts[f"{owner}.{key}"] += value


class Recoveries(Collector):
    """Labels beyond the first error (recovery/report.py): slips, corrected, uncaught, by field."""

    def __init__(self) -> None:
        self.readings: dict[str, Counter] = {}  # field -> the tally of its readings
        self.invalid: Counter = Counter()

    def see(self, obj: dict[str, Any]) -> None:
        field = recovery_field(obj)
        if field is None:
            return
        try:
            reading = reading_of(obj, field, "", "")
        except InputError:  # stats describes a file, it does not refuse it
            self.invalid[field] += 1
        else:
            count(self.readings.setdefault(field, Counter()), reading)

    def report(self) -> dict[str, Any]:
        if not self.readings and not self.invalid:
            return {}
        return {"recovery": {field: {**counted(self.readings.get(field, Counter())),
                                     **({"invalid": self.invalid[field]} if self.invalid[field] else {})}
                             for field in sorted(set(self.readings) | set(self.invalid))}}


# In the order the report shows them.
COLLECTORS: tuple[type[Collector], ...] = (Counts, Steps, FirstErrors, MCScores, MCCosts, Judge, StepLabels,
                                           Recoveries, Answers, Tokens)


def collectors_of(path: str) -> list[Collector]:
    """A fresh set of collectors for the file at `path`."""
    return [make(path) if make is Counts else make() for make in COLLECTORS]


def file_stats(path: str) -> dict[str, Any]:
    collectors = collectors_of(path)
    for _, obj in read_rows(path):
        for collector in collectors:
            collector.see(obj)
    out: dict[str, Any] = {"path": path}
    for collector in collectors:
        out.update(collector.report())
    return out


def stage_bills(paths: list[str], sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """The cost table of the model stages that wrote `paths` (engines/bill.py), read from each file's
    manifest: one row per file and stage (the runs of a resumed stage summed), each stage's share of
    the compute and the stage that dominates. `sizes` bills a stage at another parameter count
    (stage name -> count: the paper's 7B completer and 72B judge; a cascade's first judge is the row
    `first-judge`, billed at its own size beside the judge's). A manifest written before the
    bill existed is billed from its token counters and its model's config. No manifest: no row."""
    from prm_annotate.engines.bill import UNIT, Bill, model_params
    from prm_annotate.io.manifest import own_runs
    from prm_annotate.judging.cascade import FIRST_JUDGE, first_judge_bill

    sizes = sizes or {}
    rows: list[dict[str, Any]] = []
    for path in paths:
        billed: dict[str, Bill] = {}
        models: dict[str, str] = {}
        for run in own_runs(path):
            stage, settings = run.get("stage"), run.get("settings") or {}
            if not isinstance(stage, str) or not isinstance(run.get("stats"), dict):
                continue
            if isinstance(run.get("bill"), dict):
                bill = Bill.read(run["bill"])
            elif any(k in run["stats"] for k in ("prompt_tokens", "generated_tokens")) and "model" in settings:
                bill = Bill.of(run["stats"], *model_params(settings))
            else:
                continue  # a stage without a model (grade, consensus, score's own counters)
            billed[stage] = billed[stage] + bill if stage in billed else bill
            models[stage] = str(settings.get("model", ""))
            first = first_judge_bill(run)  # a cascade's first judge, billed at its own size
            if first is not None:
                billed[FIRST_JUDGE] = billed[FIRST_JUDGE] + first if FIRST_JUDGE in billed else first
                models[FIRST_JUDGE] = str(settings["cascade"].get("first_model", ""))
        for stage, bill in billed.items():
            if stage in sizes:
                bill = bill.at(sizes[stage])
            rows.append({"file": path, "stage": stage, "model": models[stage], **bill.record()})
    known = [r for r in rows if r["compute"] is not None]
    total = sum(r["compute"] for r in known)
    for r in rows:
        r["share"] = r["compute"] / total if r["compute"] is not None and total else None
    top = max(known, key=lambda r: r["compute"], default=None)
    return {"unit": UNIT, "stages": rows, "total_compute": total if known else None,
            "dominant": None if top is None or not total else top["stage"],
            "unknown_size": [r["stage"] for r in rows if r["compute"] is None]}


@dataclass(frozen=True)
class StatsConfig:
    """`stats`'s settings.

    Attributes:
        params: "STAGE=SIZE" texts: bill that stage's tokens at SIZE parameters (7B, 72e9) instead of
            its model's own count, as `stage_sizes` reads them.
    """

    params: Optional[list[str]] = setting(None, flags="--params", metavar="STAGE=SIZE", show_default=False, help=(
        "Bill a stage at another model size, e.g. --params rollout=7B --params judge=72B (the paper's); a cascade's "
        "first judge is first-judge."))

    def sizes(self) -> dict[str, int]:
        return stage_sizes(self.params or ())


def stage_sizes(texts) -> dict[str, int]:
    """{"judge": 72e9} from ["judge=72B"]; UsageError naming the bad one."""
    from prm_annotate.engines.bill import parse_params

    out: dict[str, int] = {}
    for text in texts:
        stage, eq, size = text.partition("=")
        try:
            if not eq or not stage.strip():
                raise ValueError("write STAGE=SIZE, e.g. judge=72B")
            out[stage.strip()] = parse_params(size)
        except ValueError as exc:
            raise UsageError(f"--params {text}: {exc}") from None
    return out
