"""consensus: keep the steps where MC estimation and the LLM judge agree on the first error.

`--rule` names what they must agree on (CONSENSUS_RULES): `paper` (the default, the paper's: the
first error, as below) or `recovery` (labels beyond the first error, prm_annotate/recovery/labels.py):
kept when MC's reading (`mc.recovery`, rollout --recovery-rule) and the judge's (`judge.recovery`,
a recovery protocol) name the same slips corrected at the same steps (no slip on both agrees; a
null judge reading never agrees). Its kept record holds every step, labelled by the slips: a slip
wrong, the steps while a slip is uncorrected wrong, a correction and what follows it right again
(`Recovery.step_labels`), with `recovery` and `first_error` its first slip. A rollout without
`mc.recovery` or a judged record without `judge.recovery` is bad usage for this rule.

It runs through the shared runner (`run_stage`) like every stage: the rollouts are its input,
streamed; the judged file is read first into an index (`stages/judged_file.JudgedIndex`: per id
its line's offset, the judge's first error and a digest of its steps, never the records), and a
judged record is read again from its offset when a pair needs it whole: from the file the index
validated (one written since is exit 2), so neither it nor the kept record made from it is
validated again (what the join adds, the labels, is checked). Both inputs are validated
whole before anything is written (a bad line or a duplicate id in either is bad input, exit 2; with
--skip-invalid, bad rollout lines are set aside as in every stage); so is the join for a file
input (the runner's first pass shows the stage every rollout): a pair holding different steps is
bad usage. Records are joined by id; a record is kept
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
from prm_annotate.io.jsonl import check_input, is_stream
from prm_annotate.io.output import check_output
from prm_annotate.records import Consensus, Judged, Judgement, Rollout, recovery_of, trusted
from prm_annotate.registry import Registry
from prm_annotate.settings import Setting
from prm_annotate.stages.judged_file import JudgedIndex
from prm_annotate.pipeline.runner import (Outcome, RunOptions, RunSummary, StageBase, finished_ids, frozen_heap,
                                          run_stage)
from prm_annotate.pipeline.summary import Nouns
# The confusion table's rows live with the label readers: the report counts by them too.
from prm_annotate.evaluation.labels import (JUDGE_EARLIER, JUDGE_LATER, ONE_NO_ERROR, ROWS,  # noqa: F401
                                         SAME, UNPARSED, confusion_row)
from prm_annotate.recovery.consensus import RECOVERY_ROWS, recovery_row

# Why a rollout is not kept, besides its row: the summary sentence's reasons.
NO_JUDGED, NOT_ROLLED_OUT = "not in the judged file", "not rolled out by verify"


# A judged record's declared fields are all the rollout's too, but its verdict: a kept record takes
# the rollout's values for them, and from the judged record only its verdict and extra fields.
_JUDGED_FIELDS = tuple(Judged.model_fields)
assert set(_JUDGED_FIELDS) - set(Rollout.model_fields) == {"judge"}, "consensus_record's join needs them"


def _joined(rollout: Rollout, judged: Judged | dict[str, Any]) -> dict[str, Any]:
    """`{**judged.plain(), **rollout.plain()}` with the judge's verdict (the rollout's copy of shared
    fields wins; they are equal): the same keys in the same order and the same values. `judged` is
    the record, or its object as the index validated it (`JudgedIndex.raw`: not validated again)."""
    raw = judged.plain() if isinstance(judged, Judged) else judged
    out: dict[str, Any] = dict.fromkeys(_JUDGED_FIELDS)
    out.update((k, v) for k, v in raw.items() if k not in _JUDGED_FIELDS)
    out.update(rollout.plain())
    out["mc"] = rollout.mc
    # Judgement's fields are required and strict, so a validated verdict holds the file's values.
    out["judge"] = trusted(Judgement, raw["judge"])
    return out


def _made(out: dict[str, Any]) -> Consensus:
    """The kept record from a join of validated records: only what the join adds is checked (the
    labels against the first error or the slips), which is all validating it whole would find."""
    record = trusted(Consensus, out)
    record._labels_match()
    return record


def consensus_record(rollout: Rollout, judged: Judged | dict[str, Any]) -> Consensus:
    """The kept record for an agreeing pair."""
    first_error = rollout.mc.first_error
    out = _joined(rollout, judged)
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
    return _made(out)


def recovery_record(rollout: Rollout, judged: Judged | dict[str, Any]) -> Consensus:
    """The kept record of the recovery rule: every step, labelled by the agreed slips."""
    recovery = recovery_of(rollout.mc, len(rollout.steps))
    assert recovery is not None
    out = _joined(rollout, judged)
    out["labels"] = recovery.step_labels(len(rollout.steps))
    out["first_error"] = recovery.first_error()
    out["recovery"] = recovery.to_json()
    out["steps_total"] = len(rollout.steps)
    return _made(out)


class JudgedView:
    """A rollout's judged record in the index: its first error at hand, its object read when needed."""

    def __init__(self, index: JudgedIndex, slot: int):
        self.index, self.slot = index, slot
        self._raw: dict[str, Any] | None = None

    @property
    def first_error(self) -> int | None:
        return self.index.first_error(self.slot)

    def raw(self) -> dict[str, Any]:
        if self._raw is None:
            self._raw = self.index.raw(self.slot)
        return self._raw


def _paper_row(rollout: Rollout, judged: JudgedView) -> str:
    return confusion_row(rollout.mc.first_error, judged.first_error)


def _recovery_row(rollout: Rollout, judged: JudgedView) -> str:
    n = len(rollout.steps)
    return recovery_row(recovery_of(rollout.mc, n, "mc.recovery"),
                        recovery_of(judged.raw()["judge"], n, "judge.recovery"))


@dataclass(frozen=True)
class ConsensusRule:
    """What MC and the judge must agree on for a record to be kept (`consensus --rule`).

    Attributes:
        name: the rule's name on the command line.
        summary: what it keeps, for --help.
        title: its confusion table's title.
        rows: its table's rows, in order (SAME is kept).
        row: the row of a joined pair (the judged record read only when the row needs it).
        kept: the record written for a pair in SAME (from the judged record's object, `JudgedIndex.raw`).
        reads_recovery: it needs `mc.recovery` and `judge.recovery` in its inputs.
    """

    name: str
    summary: str
    title: str
    rows: tuple[str, ...]
    row: Callable[[Rollout, JudgedView], str]
    kept: Callable[[Rollout, dict[str, Any]], Consensus]
    reads_recovery: bool = False

    def check(self, rollout: Rollout, judged_recovery: bool | None, rollouts_path: str, judged_path: str) -> None:
        """`judged_recovery`: whether its judged record holds judge.recovery (None: no judged record)."""
        if not self.reads_recovery:
            return
        if "recovery" not in (rollout.mc.model_extra or {}):
            raise UsageError(f"{rollouts_path}: id {rollout.id!r} has no mc.recovery: --rule {self.name} reads MC's "
                             "slips (run rollout with --recovery-rule soft-drop)")
        if judged_recovery is False:
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
    """The rollouts are the runner's input; each is joined by id with its judged record, found in
    the judged file's index (`JudgedIndex`) and read again from its offset only when the row or the
    kept record needs it whole: the stage holds ids and a few bytes each, never the judged records."""

    name = "consensus"
    input_model = Rollout
    output_model = Consensus
    nouns = Nouns("rollout", "kept")

    def __init__(self, judged: JudgedIndex, rollouts_path: str, judged_path: str,
                 rule: ConsensusRule = CONSENSUS_RULES["paper"]):
        self.judged, self.rollouts_path, self.judged_path = judged, rollouts_path, judged_path
        self.rule = rule
        self.only_rollouts: list[str] = []
        self.stats: Counter = Counter()  # pairs joined, the rows of the table, ids only in the rollouts

    def settings(self) -> dict[str, Any]:
        # The paper's rule records what consensus always recorded (nothing); another names itself.
        return {} if self.rule is CONSENSUS_RULES["paper"] else {"rule": self.rule.name}

    def inputs(self) -> dict[str, str]:
        return {"rollouts": self.rollouts_path, "judged": self.judged_path}

    def close(self) -> None:
        self.judged.close()

    def check(self, rollout: Rollout) -> None:
        """The join of one rollout, before anything is written (the runner's first pass over a file;
        `process` on a stream): the same response, checked against the same verdict. Marks its
        judged id as met."""
        slot = self.judged.slot(rollout.id)
        if slot is not None:
            self.judged.mark(slot)
            if not self.judged.same_steps(slot, rollout.steps):
                raise UsageError(f"{self.rollouts_path} and {self.judged_path} hold different steps for id "
                                 f"{rollout.id!r}: they are not the same response")
            mc = rollout.mc.model_extra or {}
            if "verified" in mc and mc.get("judge_first_error") != self.judged.first_error(slot):
                raise UsageError(f"{self.rollouts_path}: id {rollout.id!r} was verified against the judge's first "
                                 f"error {mc.get('judge_first_error')}, but {self.judged_path} says "
                                 f"{self.judged.first_error(slot)}: run consensus with the judged file the rollout "
                                 "was verified against (its --judged)")
        self.rule.check(rollout, None if slot is None else self.judged.has_recovery(slot),
                        self.rollouts_path, self.judged_path)

    def process(self, batch: list[Rollout]) -> Iterable[Outcome]:
        for rollout in batch:
            slot = self.judged.slot(rollout.id)
            if slot is None or not self.judged.marked(slot):  # a file's joins were checked in its first pass
                self.check(rollout)
            not_rolled_out = str((rollout.mc.model_extra or {}).get("verified", "")).startswith("not rolled out")
            self.stats["not rolled out"] += not_rolled_out
            if rollout.unfinished_thought:  # no answer: never labelled (rollout sets them aside too)
                self.stats["set aside: unfinished thought"] += 1
                yield Outcome(rollout.id)
                continue
            if slot is None:
                self.only_rollouts.append(rollout.id)
                self.stats["only in rollouts"] += 1
                yield Outcome(rollout.id, reason=NOT_ROLLED_OUT if not_rolled_out else NO_JUDGED)  # nothing to write
                continue
            judged = JudgedView(self.judged, slot)
            row = self.rule.row(rollout, judged)
            self.stats["joined"] += 1
            self.stats[row] += 1
            if row == SAME:
                yield Outcome.one(self.rule.kept(rollout, judged.raw()))
            else:
                yield Outcome(rollout.id, reason=NOT_ROLLED_OUT if not_rolled_out else row)


def run_consensus(rollouts_path: str, judged_path: str, output: str, *, limit: int | None = None,
                  skip_invalid: bool = False, quiet: bool = False, rule: str = "paper") -> ConsensusSummary:
    chosen = consensus_rule(rule)
    for path in (rollouts_path, judged_path):
        check_input(path)
    check_output(output, [rollouts_path, judged_path])
    opts = RunOptions(rollouts_path, output, limit=limit, skip_invalid=skip_invalid, quiet=quiet)
    with frozen_heap():
        judged = JudgedIndex.read(judged_path)
    stage = ConsensusStage(judged, rollouts_path, judged_path, chosen)
    # A file's join is checked whole (`stage.check`) in the runner's first pass, before anything is
    # written; a stream's as it is read.
    try:
        run = run_stage(stage, opts)
    finally:
        stage.close()
    summary = ConsensusSummary(rollouts=run.read, judged=len(judged), joined=stage.stats["joined"],
                               written=run.written, skipped=run.skipped, rejects=run.rejects, seconds=run.seconds,
                               rows=Counter({r: stage.stats[r] for r in chosen.rows if stage.stats[r]}), rule=chosen,
                               only_rollouts=stage.only_rollouts, not_rolled_out=stage.stats["not rolled out"], run=run)
    if limit is None:  # with --limit, judged records past the limit are simply not looked at
        # Every rollout of a file was checked, so marked; a stream's finished in an earlier run were
        # not read by this one's stage: they are in the output.
        unmet = judged.unmarked()
        if unmet and is_stream(rollouts_path):
            done = finished_ids(output)
            unmet = [rid for rid in unmet if rid not in done]
        summary.only_judged = unmet
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
