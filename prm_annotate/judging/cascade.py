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
record keeps the first judge's block in `judge.cascade.first` (docs/contract.md). The first file and
a run's cascade (its threshold, the records it writes): prm_annotate/stages/cascade.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from prm_annotate.errors import UsageError
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
    summary = ("the votes' mean probability of the verdict's tokens (judge --verdict-logprobs); another "
               "verdict's vote counts 0")
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
    reads = "prm"
    summary = ("a PRM's smallest distance from its threshold over the steps deciding its first error (those up to "
               "it, or all)")

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
