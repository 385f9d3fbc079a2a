"""consensus: keep the steps where MC estimation and the LLM judge agree on the first error.

Both inputs are read and validated whole before anything is written (a bad line or a duplicate
id in either is bad input, exit 2). Records are joined by id; a record is kept when
`mc.first_error == judge.first_error` (both -1 agrees; a null judge verdict never agrees). The
kept record is the rollout record plus the judge's fields, with the steps truncated after the
first error and one label per kept step (True before the first error, False at it; all True when
-1). Records found in only one input are counted and named in the summary, never silently
dropped. The output is resumable like every stage's: ids already written are skipped.
"""
from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from prm_annotate.errors import UsageError
from prm_annotate.jsonl import check_input
from prm_annotate.output import ResumableWriter, check_output
from prm_annotate.records import Consensus, Judged, Rollout
from prm_annotate.manifest import append_manifest
from prm_annotate.runner import RunOptions, read_validated
from prm_annotate import __version__

# Rows of the confusion table, in display order.
SAME, JUDGE_EARLIER, JUDGE_LATER, ONE_NO_ERROR, UNPARSED = (
    "same", "judge earlier", "judge later", "one says no error", "judge unparsed")
ROWS = (SAME, JUDGE_EARLIER, JUDGE_LATER, ONE_NO_ERROR, UNPARSED)


def compare(mc_first: int, judge_first: int | None) -> str:
    if judge_first is None:
        return UNPARSED
    if mc_first == judge_first:
        return SAME
    if mc_first == -1 or judge_first == -1:
        return ONE_NO_ERROR
    return JUDGE_EARLIER if judge_first < mc_first else JUDGE_LATER


def consensus_record(rollout: Rollout, judged: Judged) -> dict[str, Any]:
    """The kept record for an agreeing pair."""
    first_error = rollout.mc.first_error
    out = {**judged.dump(), **rollout.dump()}  # the rollout's copy of shared fields wins; they are equal
    out["judge"] = judged.judge.model_dump(mode="json")
    kept = len(rollout.steps) if first_error == -1 else first_error + 1
    out["steps"] = rollout.steps[:kept]
    out["labels"] = [i != first_error for i in range(kept)]
    out["first_error"] = first_error
    out["steps_total"] = len(rollout.steps)
    return Consensus.model_validate(out).dump()


@dataclass
class ConsensusSummary:
    rollouts: int = 0
    judged: int = 0
    joined: int = 0
    written: int = 0
    skipped: int = 0
    rows: Counter = field(default_factory=Counter)
    only_rollouts: list[str] = field(default_factory=list)
    only_judged: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def agreed(self) -> int:
        return self.rows[SAME]

    def kept_percent(self) -> float:
        return 100.0 * self.agreed / self.joined if self.joined else 0.0

    def line(self) -> str:
        return (f"consensus: {self.joined} joined, {self.agreed} agreed ({self.kept_percent():.1f}% kept), "
                f"{self.joined - self.agreed} disagreed, {self.written} records written, "
                f"{self.skipped} already done, {len(self.only_rollouts)} only in rollouts, "
                f"{len(self.only_judged)} only in judged in {self.seconds:.1f} s")

    def as_dict(self) -> dict[str, Any]:
        return {"rollouts": self.rollouts, "judged": self.judged, "joined": self.joined, "agreed": self.agreed,
                "disagreed": self.joined - self.agreed, "kept_percent": round(self.kept_percent(), 2),
                "written": self.written, "skipped": self.skipped, "rows": {r: self.rows[r] for r in ROWS},
                "only_in_rollouts": len(self.only_rollouts), "only_in_judged": len(self.only_judged),
                "only_in_rollouts_ids": self.only_rollouts[:100], "only_in_judged_ids": self.only_judged[:100]}


def run_consensus(rollouts_path: str, judged_path: str, output: str, *,
                  limit: int | None = None) -> ConsensusSummary:
    started = time.monotonic()
    summary = ConsensusSummary()
    for path in (rollouts_path, judged_path):
        check_input(path)
    check_output(output, [rollouts_path, judged_path])
    rollouts = list(read_validated(rollouts_path, Rollout, RunOptions(rollouts_path, output, limit=limit), None))
    judged = {r.id: r for r in read_validated(judged_path, Judged, RunOptions(judged_path, output), None)}
    summary.rollouts, summary.judged = len(rollouts), len(judged)
    pairs = []
    for rollout in rollouts:
        other = judged.get(rollout.id)
        if other is None:
            summary.only_rollouts.append(rollout.id)
            continue
        if other.steps != rollout.steps:
            raise UsageError(f"{rollouts_path} and {judged_path} hold different steps for id {rollout.id!r}: "
                             "they are not the same response")
        pairs.append((rollout, other))
    if limit is None:  # with --limit, judged records past the limit are simply not looked at
        in_rollouts = {r.id for r in rollouts}
        summary.only_judged = [rid for rid in judged if rid not in in_rollouts]
    writer = ResumableWriter(output)
    try:
        for rollout, other in pairs:
            summary.joined += 1
            row = compare(rollout.mc.first_error, other.judge.first_error)
            summary.rows[row] += 1
            if row != SAME:
                continue
            if rollout.id in writer.done_ids:
                summary.skipped += 1
                continue
            writer.write(consensus_record(rollout, other))
            summary.written += 1
    finally:
        writer.close()
        summary.seconds = time.monotonic() - started
        append_manifest(output, {
            "stage": "consensus", "version": __version__, "argv": sys.argv,
            "inputs": {"rollouts": rollouts_path, "judged": judged_path}, "limit": limit,
            "counts": summary.as_dict(), "seconds": round(summary.seconds, 3),
        })
    return summary


def print_summary(summary: ConsensusSummary) -> None:
    """The table on stderr (rich), then the one-line summary."""
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    table = Table(title="MC vs judge: first error", show_footer=False)
    table.add_column("")
    table.add_column("records", justify="right")
    table.add_column("%", justify="right")
    for row in ROWS:
        n = summary.rows[row]
        pct = f"{100.0 * n / summary.joined:.1f}" if summary.joined else "-"
        table.add_row(f"{row}{' (kept)' if row == SAME else ''}", str(n), pct)
    table.add_section()
    table.add_row("joined", str(summary.joined), "100.0" if summary.joined else "-")
    table.add_row("only in rollouts", str(len(summary.only_rollouts)), "")
    table.add_row("only in judged", str(len(summary.only_judged)), "")
    console.print(table)
    for name, ids in (("rollouts", summary.only_rollouts), ("judged", summary.only_judged)):
        if ids:
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            console.print(f"only in {name}: {shown}")
    print(summary.line(), file=sys.stderr, flush=True)
