"""consensus: keep the steps where MC estimation and the LLM judge agree on the first error.

`--rule` names what they must agree on (CONSENSUS_RULES): `paper` (the default, the paper's: the
first error, as below) or `recovery` (labels beyond the first error, prm_annotate/recovery.py):
kept when MC's reading (`mc.recovery`, rollout --recovery-rule) and the judge's (`judge.recovery`,
a recovery protocol) name the same slips corrected at the same steps (no slip on both agrees; a
null judge reading never agrees). Its kept record holds every step, labelled by the slips: a slip
wrong, the steps while a slip is uncorrected wrong, a correction and what follows it right again
(`Recovery.step_labels`), with `recovery` and `first_error` its first slip. A rollout without
`mc.recovery` or a judged record without `judge.recovery` is bad usage for this rule.

It runs through the shared runner (`run_stage`) like every stage: the rollouts are its input, the
judged records are read beside them into a dict by id. Both inputs are validated whole before
anything is written (a bad line or a duplicate id in either is bad input, exit 2; with
--skip-invalid, bad rollout lines are set aside as in every stage); so is the join for a file
input: a pair holding different steps is bad usage. Records are joined by id; a record is kept
when `mc.first_error == judge.first_error` (both -1 agrees; a null judge verdict never agrees).
The kept record is the rollout record plus the judge's fields, with the steps truncated after the
first error and one label per kept step (True before the first error, False at it; all True when
-1). Rollouts of `--strategy verify` join the same way: their `mc.first_error` equals the judge's
exactly when MC confirmed it (strategies/verify.py), so those are the ones kept; such a record
checked against another verdict than the judged file's (`mc.judge_first_error`) is bad usage, and
the responses verify did not roll out (no parsed judge verdict) are counted in the summary line. Records found in only one input are counted and named in the summary, never silently
dropped. The output is resumable like every stage's: ids already written are skipped (and, as in
every stage, not counted again in this run's table).
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from prm_annotate.errors import UsageError
from prm_annotate.io.jsonl import STDIO, check_input, is_stream, iter_jsonl
from prm_annotate.io.output import check_output
from prm_annotate.records import Consensus, Judged, Rollout, recovery_of
from prm_annotate.registry import Registry
from prm_annotate.settings import Setting
from prm_annotate.pipeline.runner import Outcome, RunOptions, RunSummary, StageBase, read_validated, run_stage
from prm_annotate.pipeline.summary import Nouns
# The confusion table's rows live with the label readers: the report counts by them too.
from prm_annotate.evaluation.labels import (JUDGE_EARLIER, JUDGE_LATER, ONE_NO_ERROR, RECOVERY_ROWS, ROWS,  # noqa: F401
                                         SAME, UNPARSED, confusion_row, recovery_row)

# Why a rollout is not kept, besides its row: the summary sentence's reasons.
NO_JUDGED, NOT_ROLLED_OUT = "not in the judged file", "not rolled out by verify"


def consensus_record(rollout: Rollout, judged: Judged) -> Consensus:
    """The kept record for an agreeing pair."""
    first_error = rollout.mc.first_error
    out = {**judged.dump(), **rollout.dump()}  # the rollout's copy of shared fields wins; they are equal
    out["judge"] = judged.judge.model_dump(mode="json")
    kept = len(rollout.steps) if first_error == -1 else first_error + 1
    out["steps"] = rollout.steps[:kept]
    if rollout.step_joins is not None:  # a thinking response's joins and thought, cut with its steps
        out["step_joins"] = rollout.step_joins[: kept - 1]
    if rollout.thought_steps is not None:
        out["thought_steps"] = min(rollout.thought_steps, kept)
    out["labels"] = [i != first_error for i in range(kept)]
    out["first_error"] = first_error
    out["steps_total"] = len(rollout.steps)
    # Written in the model's field order (not `make`'s): the order consensus has always written.
    return Consensus.model_validate(out)


def recovery_record(rollout: Rollout, judged: Judged) -> Consensus:
    """The kept record of the recovery rule: every step, labelled by the agreed slips."""
    recovery = recovery_of(rollout.mc, len(rollout.steps))
    assert recovery is not None
    out = {**judged.dump(), **rollout.dump()}
    out["judge"] = judged.judge.model_dump(mode="json")
    out["labels"] = recovery.step_labels(len(rollout.steps))
    out["first_error"] = recovery.first_error()
    out["recovery"] = recovery.to_json()
    out["steps_total"] = len(rollout.steps)
    return Consensus.model_validate(out)


def _paper_row(rollout: Rollout, judged: Judged) -> str:
    return confusion_row(rollout.mc.first_error, judged.judge.first_error)


def _recovery_row(rollout: Rollout, judged: Judged) -> str:
    n = len(rollout.steps)
    return recovery_row(recovery_of(rollout.mc, n, "mc.recovery"), recovery_of(judged.judge, n, "judge.recovery"))


@dataclass(frozen=True)
class ConsensusRule:
    """What MC and the judge must agree on for a record to be kept (`consensus --rule`).

    Attributes:
        name: the rule's name on the command line.
        summary: what it keeps, for --help.
        title: its confusion table's title.
        rows: its table's rows, in order (SAME is kept).
        row: the row of a joined pair.
        kept: the record written for a pair in SAME.
        reads_recovery: it needs `mc.recovery` and `judge.recovery` in its inputs.
    """

    name: str
    summary: str
    title: str
    rows: tuple[str, ...]
    row: Callable[[Rollout, Judged], str]
    kept: Callable[[Rollout, Judged], Consensus]
    reads_recovery: bool = False

    def check(self, rollout: Rollout, judged: Judged | None, rollouts_path: str, judged_path: str) -> None:
        if not self.reads_recovery:
            return
        if "recovery" not in (rollout.mc.model_extra or {}):
            raise UsageError(f"{rollouts_path}: id {rollout.id!r} has no mc.recovery: --rule {self.name} reads MC's "
                             "slips (run rollout with --recovery-rule soft-drop)")
        if judged is not None and "recovery" not in (judged.judge.model_extra or {}):
            raise UsageError(f"{judged_path}: id {rollout.id!r} has no judge.recovery: --rule {self.name} reads the "
                             "judge's slips (run judge with --protocol recovery)")


CONSENSUS_RULES: Registry[Any] = Registry("--rule", "What MC and the judge must agree on", "docs/recovery.md", (
    ConsensusRule("paper", "MC and the judge agree on the first error (the paper's; steps cut after it)",
                  "MC vs judge: first error", ROWS, _paper_row, consensus_record),
    ConsensusRule("recovery", "MC and the judge agree on every slip and its correction (every step kept, "
                  "labelled right again from a correction on)", "MC vs judge: slips and corrections", RECOVERY_ROWS,
                  _recovery_row, recovery_record, reads_recovery=True),
))
CONSENSUS_RULE = Setting(flags=("--rule",), help=lambda: CONSENSUS_RULES.help())


def consensus_rule(name: str) -> ConsensusRule:
    return CONSENSUS_RULES.named(name)


@dataclass
class ConsensusSummary:
    """One consensus run, as its table and summary line say it."""

    rollouts: int  # read
    judged: int
    joined: int  # rollouts with a judged record
    written: int
    skipped: int  # already done in an earlier run
    rows: Counter = field(default_factory=Counter)
    only_rollouts: list[str] = field(default_factory=list)
    only_judged: list[str] = field(default_factory=list)
    rejects: int = 0  # bad rollout lines set aside (--skip-invalid)
    not_rolled_out: int = 0  # verify rollouts without a parsed judge verdict
    seconds: float = 0.0
    run: RunSummary | None = None  # the runner's summary, whose sentence is the last line
    rule: ConsensusRule = CONSENSUS_RULES["paper"]

    @property
    def agreed(self) -> int:
        return self.rows[SAME]

    def kept_percent(self) -> float:
        return 100.0 * self.agreed / self.joined if self.joined else 0.0

    def line(self) -> str:
        """The run's summary sentence (pipeline/summary.py): rollouts read = kept + set aside by reason + already done."""
        assert self.run is not None
        return self.run.line()


class ConsensusStage(StageBase):
    """The rollouts are the runner's input; each is joined with its judged record by id."""

    name = "consensus"
    input_model = Rollout
    output_model = Consensus
    nouns = Nouns("rollout", "kept")

    def __init__(self, judged: dict[str, Judged], rollouts_path: str, judged_path: str,
                 rule: ConsensusRule = CONSENSUS_RULES["paper"]):
        self.judged, self.rollouts_path, self.judged_path = judged, rollouts_path, judged_path
        self.rule = rule
        self.seen: set[str] = set()  # rollout ids this run joined or found alone
        self.only_rollouts: list[str] = []
        self.stats: Counter = Counter()  # pairs joined, the rows of the table, ids only in the rollouts

    def settings(self) -> dict[str, Any]:
        # The paper's rule records what consensus always recorded (nothing); another names itself.
        return {} if self.rule is CONSENSUS_RULES["paper"] else {"rule": self.rule.name}

    def inputs(self) -> dict[str, str]:
        return {"rollouts": self.rollouts_path, "judged": self.judged_path}

    def check(self, rollout: Rollout) -> None:
        other = self.judged.get(rollout.id)
        if other is not None and other.steps != rollout.steps:
            raise UsageError(f"{self.rollouts_path} and {self.judged_path} hold different steps for id "
                             f"{rollout.id!r}: they are not the same response")
        mc = rollout.mc.model_extra or {}
        if other is not None and "verified" in mc and mc.get("judge_first_error") != other.judge.first_error:
            raise UsageError(f"{self.rollouts_path}: id {rollout.id!r} was verified against the judge's first error "
                             f"{mc.get('judge_first_error')}, but {self.judged_path} says {other.judge.first_error}: "
                             "run consensus with the judged file the rollout was verified against (its --judged)")
        self.rule.check(rollout, other, self.rollouts_path, self.judged_path)

    def process(self, batch: list[Rollout]) -> Iterable[Outcome]:
        for rollout in batch:
            self.check(rollout)
            self.seen.add(rollout.id)
            not_rolled_out = str((rollout.mc.model_extra or {}).get("verified", "")).startswith("not rolled out")
            self.stats["not rolled out"] += not_rolled_out
            other = self.judged.get(rollout.id)
            if rollout.unfinished_thought:  # no answer: never labelled (rollout sets them aside too)
                self.stats["set aside: unfinished thought"] += 1
                yield Outcome(rollout.id)
                continue
            if other is None:
                self.only_rollouts.append(rollout.id)
                self.stats["only in rollouts"] += 1
                yield Outcome(rollout.id, reason=NOT_ROLLED_OUT if not_rolled_out else NO_JUDGED)  # nothing to write
                continue
            row = self.rule.row(rollout, other)
            self.stats["joined"] += 1
            self.stats[row] += 1
            if row == SAME:
                yield Outcome.one(self.rule.kept(rollout, other))
            else:
                yield Outcome(rollout.id, reason=NOT_ROLLED_OUT if not_rolled_out else row)


class _Dropped:
    """Rejects of a check that only looks: the runner's own read sets them aside."""

    def write(self, *args: Any) -> None:
        pass


def run_consensus(rollouts_path: str, judged_path: str, output: str, *, limit: int | None = None,
                  skip_invalid: bool = False, quiet: bool = False, rule: str = "paper") -> ConsensusSummary:
    chosen = consensus_rule(rule)
    for path in (rollouts_path, judged_path):
        check_input(path)
    check_output(output, [rollouts_path, judged_path])
    opts = RunOptions(rollouts_path, output, limit=limit, skip_invalid=skip_invalid, quiet=quiet)
    judged = {r.id: r for r in read_validated(judged_path, Judged, RunOptions(judged_path, output), None)}
    stage = ConsensusStage(judged, rollouts_path, judged_path, chosen)
    if not is_stream(rollouts_path):
        # The join is checked whole before anything is written (a stream is checked as it is read).
        for rollout in read_validated(rollouts_path, Rollout, opts, _Dropped() if skip_invalid else None):
            stage.check(rollout)
    run = run_stage(stage, opts)
    summary = ConsensusSummary(rollouts=run.read, judged=len(judged), joined=stage.stats["joined"],
                               written=run.written, skipped=run.skipped, rejects=run.rejects, seconds=run.seconds,
                               rows=Counter({r: stage.stats[r] for r in chosen.rows if stage.stats[r]}), rule=chosen,
                               only_rollouts=stage.only_rollouts, not_rolled_out=stage.stats["not rolled out"], run=run)
    if limit is None:  # with --limit, judged records past the limit are simply not looked at
        # Ids skipped as already done were joined by an earlier run: they are in the output.
        done = set() if output == STDIO else {obj["id"] for _, obj in iter_jsonl(output)}
        summary.only_judged = [rid for rid in judged if rid not in stage.seen and rid not in done]
    return summary


def print_summary(summary: ConsensusSummary) -> None:
    """The table on stderr (rich), then the one-line summary."""
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    table = Table(title=summary.rule.title, show_footer=False)
    table.add_column("")
    table.add_column("records", justify="right")
    table.add_column("%", justify="right")
    for row in summary.rule.rows:
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
