"""A judge run's cascade (`judge --escalate-from FIRST.jsonl`): the first judge's file read whole
before any work and identified by its sha256, the confidence kind and the threshold (given, or a
budget's over the whole first file), and the records it writes where the first judge decides. What
a confidence is and who decides a response: prm_annotate/judging/cascade.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import orjson

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.jsonl import STDIO, check_input
from prm_annotate.judging.cascade import (CONFIDENCES, SECOND, Confidence, Decision, PRMMargin, VerdictProbability,
                                          VoteAgreement, decide, judge_block_of_prm, parse_budget, threshold_for_budget)
from prm_annotate.records import Judged, Scored
from prm_annotate.stages.judged_file import RecordIndex, file_sha256


class FirstJudgeFile:
    """The first judge's file, validated whole before any work and identified by its sha256; every
    record a critic's (`judge`) or every record a PRM's (`prm`). Held as an index (per id its
    offset and a digest of its steps: stages/judged_file.RecordIndex); a block is read again from
    its offset when a record is decided."""

    def __init__(self, path: str, sha256: str, reads: str, index: RecordIndex, first: dict[str, Any],
                 params: int | None = None):
        self.path, self.sha256, self.reads, self.index, self.first = path, sha256, reads, index, first
        self.model, self.params = str(first.get("model", "")), params

    @classmethod
    def load(cls, path: str) -> "FirstJudgeFile":
        if path == STDIO:
            raise UsageError("--escalate-from must be a file (its sha256 goes into every record and the manifest)")
        check_input(path)
        reads = None
        with open(path, "rb") as fh:
            for number, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        obj = orjson.loads(line)
                    except orjson.JSONDecodeError as exc:
                        raise InputError(path, number, f"not JSON: {exc}") from None
                    reads = "prm" if isinstance(obj, dict) and "prm" in obj and "judge" not in obj else "judge"
                    break
        if reads is None:
            raise UsageError(f"--escalate-from {path}: no records")
        index = RecordIndex.read(path, Scored if reads == "prm" else Judged)
        first = index.record(0).dump()[reads]
        return cls(path, file_sha256(path), reads, index, first, _params_from_manifest(path))

    @property
    def blocks(self) -> Iterator[dict[str, Any]]:
        """Every record's block, in file order (read again)."""
        for slot in range(len(self.index)):
            yield self._block(slot)

    def get(self, rid: str) -> dict[str, Any] | None:
        """The block of id `rid`; None when the file has no such record."""
        slot = self.index.slot(rid)
        return None if slot is None else self._block(slot)

    def _block(self, slot: int) -> dict[str, Any]:
        """A record's block as its validated record gives it (read again from its offset)."""
        return self.index.record(slot).dump()[self.reads]

    def check_kind(self, kind: type[Confidence]) -> None:
        if kind.reads != self.reads:
            what = "a PRM's (score's output)" if self.reads == "prm" else "a judge's (judge's output)"
            raise UsageError(f"--confidence {kind.name} reads a {kind.reads} record, but {self.path} is {what}: "
                             f"choose {', '.join(n for n, k in CONFIDENCES.items() if k.reads == self.reads)}")

    def block(self, rid: str, steps: list[str]) -> dict[str, Any]:
        """The first judge's block for this response; ValueError when it is missing or saw other steps."""
        slot = self.index.slot(rid)
        if slot is None:
            raise ValueError(f"{self.path} has no record with id {rid!r}: the first judge did not see this response")
        if not self.index.same_steps(slot, steps):
            raise ValueError(f"{self.path} holds other steps for id {rid!r}: the first judge saw another response")
        return self._block(slot)

    def confidences(self, kind: type[Confidence]) -> list[float | None]:
        return [None if b.get("first_error") is None else kind.of(b) for b in self.blocks]

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

    def plan(self, records: Iterable[Any]) -> tuple[Iterator[Any], Callable[[], str]]:
        """The records this judge would be asked (`plan judge`), as they are read, and what says the
        rest once they are all read: what the first judge decided and what it already cost, at its
        own size."""
        from prm_annotate.engines.bill import Bill, amount

        spent = Bill(params=self.first.params, params_from="given" if self.first.params else "unknown")
        counts = {"read": 0, "asked": 0}

        def asked() -> Iterator[Any]:
            nonlocal spent
            for r in records:
                counts["read"] += 1
                block = self.first.get(r.id)
                if block is None:
                    continue  # refused by the run: not in the first file
                b = block.get("bill") or {}
                spent = spent + Bill(requests=b.get("requests", 0), prompt_tokens=b.get("prompt_tokens", 0),
                                     decode_tokens=b.get("generated_tokens", 0),
                                     thought_tokens=b.get("thought_tokens", 0),
                                     params=spent.params, params_from=spent.params_from)
                if decide(block, self.kind, self.threshold).by == SECOND:
                    counts["asked"] += 1
                    yield r

        def said() -> str:
            compute = ("at an unknown size" if spent.compute is None
                       else f"{spent.compute:,.4g} billion-parameter-tokens")
            return (f"cascade: {counts['asked']:,} of {counts['read']:,} responses go to this judge "
                    f"({self.kind.name} below {self.threshold:.4g}); the first judge ({self.first.model}) already "
                    f"spent {amount(spent.prefill_tokens)} prefill + {amount(spent.decode_tokens)} decode tokens, "
                    f"{compute}")

        return asked(), said

    def note(self, stats: Mapping[str, int]) -> str:
        """The summary's line: who decided this run's records."""
        first, second = (stats.get(f"cascade: decided by the {who} judge", 0) for who in ("first", "second"))
        budget = "" if self.budget is None else f" (--budget {100 * self.budget:g}%)"
        return (f"judge: cascade: {first:,} decided by the first judge ({self.first.model}), {second:,} escalated "
                f"here: {self.kind.name} below {self.threshold:.4g}{budget} or no verdict")

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
    block = first.first
    return VerdictProbability.name if "verdict_logprobs" in block else VoteAgreement.name
