"""A cascade of judges: a cheap first judge decides what it is sure of, the big judge the rest.

The first judge has already run: its file (`judge --escalate-from FIRST.jsonl`) is a critic's
`judge` output (records with `judge`) or a PRM's `score` output (records with `prm`). Per response,
a named confidence (`--confidence`, `CONFIDENCES`) is read from what the first judge wrote, and

    confidence >= threshold  ->  the first judge's verdict stands (no request to the big judge)
    otherwise, or no verdict ->  the response goes to the second judge (the stage's own engine)

The decision is a fixed function of the first judge's record and the threshold, so shards, reruns
and Ray workers escalate the same set. A budget (`--budget 10%`: "the least confident 10%") is
turned into a threshold over the WHOLE first file before any work (`threshold_for_budget`), the
same in every shard, and written in the manifest with the budget.

A cascaded record's `judge` is the deciding judge's block (a PRM's verdict written as a judge
block: `judge_block_of_prm`), with `judge.cascade` saying who decided and why; an escalated
record keeps the first judge's block in `judge.cascade.first` (docs/contract.md).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import orjson

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.jsonl import STDIO, check_input
from prm_annotate.registry import Registry

FIRST, SECOND = "first", "second"
NO_VERDICT = "the first judge gave no verdict"
PRM_PROMPT = "prm-scores"  # a PRM's verdict as a judge block: no prompt, its step scores


class Confidence:
    """How sure the first judge is of its verdict, from what its record says (higher: surer)."""

    name: str
    summary: str
    reads: str  # the record block it reads: "judge" (a critic) or "prm" (a PRM)

    @staticmethod
    def of(block: Mapping[str, Any]) -> float | None:
        """The confidence; None when the record does not say enough (then it escalates)."""
        raise NotImplementedError


class VerdictProbability(Confidence):
    name = "verdict-prob"
    summary = ("the probability of the verdict's tokens, from `judge --verdict-logprobs`: the votes' mean, "
               "a vote for another verdict counting 0")
    reads = "judge"

    @staticmethod
    def of(block: Mapping[str, Any]) -> float | None:
        logprobs, votes, decided = block.get("verdict_logprobs"), block.get("votes") or [], block.get("first_error")
        if not isinstance(logprobs, list) or len(logprobs) != len(votes) or not votes:
            return None
        return sum(math.exp(lp) for v, lp in zip(votes, logprobs) if v == decided and lp is not None) / len(votes)


class VoteAgreement(Confidence):
    name = "votes"
    summary = "the share of the votes that give the decided first error (an unparsed vote counts against)"
    reads = "judge"

    @staticmethod
    def of(block: Mapping[str, Any]) -> float | None:
        votes = block.get("votes") or []
        return sum(v == block.get("first_error") for v in votes) / len(votes) if votes else None


class PRMMargin(Confidence):
    name = "prm-margin"
    summary = ("a PRM's smallest distance from its threshold over the steps that decide its first error "
               "(every step up to it; every step when it finds none)")
    reads = "prm"

    @staticmethod
    def of(block: Mapping[str, Any]) -> float | None:
        scores, threshold, first = block.get("scores"), block.get("threshold"), block.get("first_error")
        if not scores or threshold is None or first is None:
            return None
        deciding = scores if first < 0 else scores[:first + 1]
        return min(abs(s - threshold) for s in deciding)


CONFIDENCES: Registry = Registry("--confidence", "How sure the first judge is (read from its file)",
                                 "docs/cascade.md", (VerdictProbability, VoteAgreement, PRMMargin))


def verdict_logprob(text: str, lead: str, tokens: Sequence[Any]) -> float | None:
    """The log-probability of a verdict as written: the tokens from the one holding the last answer
    lead (`\\boxed`, `<conclusion>`) to the end of `text`; None when the lead is not there or the
    tokens cannot be placed (`tokens`: engines/sampling.py's TokenLogprob, offsets in `text`)."""
    pos = text.rfind(lead)
    if pos < 0 or not tokens:
        return None
    start = None
    for i, token in enumerate(tokens):
        if token.offset is not None and token.offset <= pos:
            start = i
    return None if start is None else float(sum(t.logprob for t in tokens[start:]))


def parse_budget(text: str) -> float:
    """"10%" or "0.1" -> 0.1; UsageError outside [0, 1]."""
    raw = str(text).strip()
    try:
        share = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"--budget {text}: write a share of the responses, e.g. 10% or 0.1") from None
    if not 0.0 <= share <= 1.0:
        raise UsageError(f"--budget {text}: between 0% and 100%")
    return share


def threshold_for_budget(confidences: Sequence[float | None], share: float) -> float:
    """The threshold that escalates at most `share` of the records, the least confident first (a
    record without a confidence always escalates and counts first). Escalated: confidence <
    threshold; ties at the threshold all stay, so a budget is never overspent by a tie (unless the
    records without a verdict alone exceed it)."""
    known = sorted(c for c in confidences if c is not None)
    room = math.floor(share * len(confidences) + 1e-9) - (len(confidences) - len(known))
    if room <= 0:
        return known[0] if known else 0.0
    if room >= len(known):
        return math.nextafter(known[-1], math.inf)
    return known[room]


@dataclass(frozen=True)
class Decision:
    by: str  # FIRST or SECOND
    reason: str
    confidence: float | None

    def record(self, kind: str, threshold: float, sha256: str, first: Mapping[str, Any] | None = None) -> dict:
        """`judge.cascade` as written; `first`: the first judge's block, on an escalated record."""
        out: dict[str, Any] = {"decided_by": self.by, "reason": self.reason, "confidence": self.confidence,
                               "kind": kind, "threshold": threshold, "first_sha256": sha256}
        if first is not None:
            out["first"] = dict(first)
        return out


def decide(block: Mapping[str, Any], kind: type[Confidence], threshold: float) -> Decision:
    """Who decides a response: a fixed function of the first judge's block and the threshold."""
    if block.get("first_error") is None:
        return Decision(SECOND, NO_VERDICT, None)
    c = kind.of(block)
    if c is None:
        return Decision(SECOND, f"the first judge's record gives no {kind.name} confidence", None)
    if c >= threshold:
        return Decision(FIRST, f"{kind.name} {c:.4g} >= {threshold:.4g}", c)
    return Decision(SECOND, f"{kind.name} {c:.4g} < {threshold:.4g}", c)


def judge_block_of_prm(prm: Mapping[str, Any]) -> dict[str, Any]:
    """A PRM's verdict as a judge block (what consensus, verify and export read): its first error as
    the one vote, its scores and threshold beside it."""
    out = {"first_error": prm["first_error"], "votes": [prm["first_error"]], "parse_failures": 0,
           "model": prm.get("model", ""), "prompt": PRM_PROMPT}
    out.update({k: prm[k] for k in ("scores", "threshold", "bill") if k in prm})
    return out


class FirstJudgeFile:
    """The first judge's file, read whole before any work and identified by its sha256; every record
    a critic's (`judge`) or every record a PRM's (`prm`)."""

    def __init__(self, path: str, sha256: str, reads: str, blocks: dict[str, dict], steps: dict[str, list],
                 model: str, params: int | None = None):
        self.path, self.sha256, self.reads, self.blocks, self.steps = path, sha256, reads, blocks, steps
        self.model, self.params = model, params

    @classmethod
    def load(cls, path: str) -> "FirstJudgeFile":
        from prm_annotate.pipeline.runner import RunOptions, read_validated
        from prm_annotate.records import Judged, Scored

        if path == STDIO:
            raise UsageError("--escalate-from must be a file (its sha256 goes into every record and the manifest)")
        check_input(path)
        data = Path(path).read_bytes()
        reads = None
        for number, line in enumerate(data.splitlines(), 1):
            if line.strip():
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise InputError(path, number, f"not JSON: {exc}") from None
                reads = "prm" if isinstance(obj, dict) and "prm" in obj and "judge" not in obj else "judge"
                break
        if reads is None:
            raise UsageError(f"--escalate-from {path}: no records")
        model_cls = Scored if reads == "prm" else Judged
        blocks: dict[str, dict] = {}
        steps: dict[str, list] = {}
        for record in read_validated(path, model_cls, RunOptions(path), None):
            dumped = record.dump()
            blocks[record.id], steps[record.id] = dumped[reads], record.steps
        first = next(iter(blocks.values()))
        return cls(path, hashlib.sha256(data).hexdigest(), reads, blocks, steps, str(first.get("model", "")),
                   _params_from_manifest(path))

    def check_kind(self, kind: type[Confidence]) -> None:
        if kind.reads != self.reads:
            what = "a PRM's (score's output)" if self.reads == "prm" else "a judge's (judge's output)"
            raise UsageError(f"--confidence {kind.name} reads a {kind.reads} record, but {self.path} is {what}: "
                             f"choose {', '.join(n for n, k in CONFIDENCES.items() if k.reads == self.reads)}")

    def block(self, rid: str, steps: list[str]) -> dict[str, Any]:
        """The first judge's block for this response; ValueError when it is missing or saw other steps."""
        if rid not in self.blocks:
            raise ValueError(f"{self.path} has no record with id {rid!r}: the first judge did not see this response")
        if self.steps[rid] != steps:
            raise ValueError(f"{self.path} holds other steps for id {rid!r}: the first judge saw another response")
        return self.blocks[rid]

    def confidences(self, kind: type[Confidence]) -> list[float | None]:
        return [None if b.get("first_error") is None else kind.of(b) for b in self.blocks.values()]

    def check_resume(self, output: str, threshold: float) -> None:
        """Refuse to continue an output cascaded from another first file or at another threshold."""
        if output == STDIO or not Path(output).is_file():
            return
        with open(output, "rb") as fh:
            for number, line in enumerate(fh, 1):
                try:
                    cascade = orjson.loads(line)["judge"].get("cascade")
                except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
                    continue  # a torn last line: the writer cuts it
                said = (cascade or {}).get("first_sha256"), (cascade or {}).get("threshold")
                if said != (self.sha256, threshold):
                    raise UsageError(
                        f"{output} line {number} was cascaded from first file sha256 {str(said[0])[:12]} at threshold "
                        f"{said[1]}, this run from {self.path} ({self.sha256[:12]}) at {threshold}: a resumed cascade "
                        "must keep its first file and threshold (or write a new output)")


def _params_from_manifest(path: str) -> int | None:
    """The first judge's model size as its run recorded it (`--model-params` or its config), if it did."""
    from prm_annotate.engines.bill import model_params
    from prm_annotate.io.manifest import own_runs

    for run in reversed(list(own_runs(path))):
        bill = run.get("bill")
        if isinstance(bill, dict) and bill.get("params"):
            return int(bill["params"])
        settings = run.get("settings") or {}
        if "model" in settings:
            return model_params(settings)[0]
    return None


@dataclass
class Cascade:
    """A judge run's cascade: the first file, the confidence kind and the threshold (given, or the
    budget's over the whole first file)."""

    first: FirstJudgeFile
    kind: type[Confidence]
    threshold: float
    budget: float | None = None

    @classmethod
    def make(cls, path: str, confidence: str | None, threshold: float | None, budget: str | None) -> "Cascade":
        if (threshold is None) == (budget is None):
            raise UsageError("--escalate-from needs one of --escalate-below THRESHOLD or --budget SHARE")
        first = FirstJudgeFile.load(path)
        kind = CONFIDENCES.named(confidence or default_confidence(first))
        first.check_kind(kind)
        share = parse_budget(budget) if budget is not None else None
        if share is not None:
            threshold = threshold_for_budget(first.confidences(kind), share)
        assert threshold is not None
        return cls(first, kind, float(threshold), share)

    def decide(self, rid: str, steps: list[str]) -> tuple[dict[str, Any], Decision]:
        block = self.first.block(rid, steps)
        return block, decide(block, self.kind, self.threshold)

    def stood(self, record: dict[str, Any], block: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
        """The output record where the first judge's verdict stands."""
        judge = judge_block_of_prm(block) if self.first.reads == "prm" else dict(block)
        judge["cascade"] = decision.record(self.kind.name, self.threshold, self.first.sha256)
        return {**record, "judge": judge}

    def escalated(self, judge: dict[str, Any], block: Mapping[str, Any], decision: Decision) -> None:
        """The second judge's block gets the cascade's account, the first judge's block in it."""
        judge["cascade"] = decision.record(self.kind.name, self.threshold, self.first.sha256, first=block)

    def plan(self, records: list[Any]) -> tuple[list[Any], str]:
        """The records this judge would be asked (`plan judge`), and a note of the rest: what the first
        judge decided and what it already cost, at its own size."""
        from prm_annotate.engines.bill import Bill, amount

        asked, spent = [], Bill(params=self.first.params, params_from="given" if self.first.params else "unknown")
        for r in records:
            block = self.first.blocks.get(r.id)
            if block is None:
                continue  # refused by the run: not in the first file
            b = block.get("bill") or {}
            spent = spent + Bill(requests=b.get("requests", 0), prompt_tokens=b.get("prompt_tokens", 0),
                                 decode_tokens=b.get("generated_tokens", 0), thought_tokens=b.get("thought_tokens", 0),
                                 params=spent.params, params_from=spent.params_from)
            if decide(block, self.kind, self.threshold).by == SECOND:
                asked.append(r)
        compute = "at an unknown size" if spent.compute is None else f"{spent.compute:,.4g} billion-parameter-tokens"
        return asked, (f"cascade: {len(asked):,} of {len(records):,} responses go to this judge ({self.kind.name} "
                       f"below {self.threshold:.4g}); the first judge ({self.first.model}) already spent "
                       f"{amount(spent.prefill_tokens)} prefill + {amount(spent.decode_tokens)} decode tokens, {compute}")

    def settings(self) -> dict[str, Any]:
        confidences = self.first.confidences(self.kind)
        escalated = sum(c is None or c < self.threshold for c in confidences)
        return {"first": self.first.path, "first_sha256": self.first.sha256, "first_reads": self.first.reads,
                "first_model": self.first.model, "first_params": self.first.params, "confidence": self.kind.name,
                "threshold": self.threshold, "budget": self.budget,
                "escalated": escalated, "first_records": len(confidences)}


def default_confidence(first: FirstJudgeFile) -> str:
    """A PRM's margin; a critic's verdict probability when it recorded logprobs, else its votes."""
    if first.reads == "prm":
        return PRMMargin.name
    block = next(iter(first.blocks.values()))
    return VerdictProbability.name if "verdict_logprobs" in block else VoteAgreement.name


FIRST_JUDGE = "first-judge"  # the first judge's row in `stats`'s bill (`--params first-judge=1.5B`)


def first_judge_bill(run: Mapping[str, Any]) -> Any:
    """The first judge's bill of a cascaded judge run (its manifest entry: the `first: ...` counters
    of the records it wrote, at the first judge's recorded size); None for a run without a cascade."""
    from prm_annotate.engines.bill import Bill

    cascade = (run.get("settings") or {}).get("cascade")
    stats = run.get("stats") or {}
    if not isinstance(cascade, dict):
        return None
    params = cascade.get("first_params")
    return Bill(requests=int(stats.get("first: requests", 0)), prompt_tokens=int(stats.get("first: prompt_tokens", 0)),
                decode_tokens=int(stats.get("first: generated_tokens", 0)),
                thought_tokens=int(stats.get("first: thought_tokens", 0)),
                params=params, params_from="given" if params is not None else "unknown")
