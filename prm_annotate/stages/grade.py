"""grade: re-grade the final answers of existing responses.

Reads any records with `id`, `answer` and `steps` or `response` (the whole text) and writes them
back with `final_answer` and `correct` set by the grader. A comparison the grader cannot finish
(timeout, parse failure) is recorded as `correct: null` with `grade_error`, never guessed.

Records with a reference verdict (`final_answer_correct`, or the field given) are counted in
`stats`: agreement and its false accepts / false rejects, for the grader and, with `baseline`, for
plain math-verify on the same responses (same worker, same hard timeouts), side by side.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from prm_annotate.grading.grader import Agreement, Grader
from prm_annotate.thinking.grading import finished_by_length, grade_traces
from prm_annotate.records import GradeInput, Graded
from prm_annotate.pipeline.runner import Outcome, RunSummary, StageBase
from prm_annotate.pipeline.summary import Nouns
from prm_annotate.settings import setting
from prm_annotate.steps import DEFAULT_SEP, join_steps
from prm_annotate.segmenting.texts import record_trace
from prm_annotate.thinking.tags import Trace


@dataclass(frozen=True)
class GradeConfig:
    """What `grade` compares its verdicts with (the records' steps are joined by `--step-sep`, the
    shared separator).

    Attributes:
        reference_field: a boolean field of the records holding a reference verdict (ProcessBench's
            `final_answer_correct`); the summary reports how often the grader agrees with it.
    """

    reference_field: str = setting("final_answer_correct", flags="--reference-field",
                                   help="A boolean field with a reference verdict to report agreement with.")
    baseline: bool = setting(True, flags="--baseline/--no-baseline", help=(
        "Beside the agreement, grade the records with a reference verdict by plain math-verify too."))


class GradeStage(StageBase):
    name = "grade"
    input_model = GradeInput
    output_model = Graded
    nouns = Nouns("response", "graded", details=(("correct", "correct"), ("grade_errors", "not gradable")))

    def __init__(self, grader: Grader | None = None, step_sep: str = DEFAULT_SEP,
                 reference_field: str = "final_answer_correct", baseline: bool = True):
        self.grader = grader or Grader()
        self.step_sep = step_sep
        self.reference_field = reference_field
        self.baseline = baseline
        self.stats: Counter = Counter()

    def settings(self) -> dict[str, Any]:
        return {"step_sep": self.step_sep, "reference_field": self.reference_field}

    def agreement(self, prefix: str = "") -> Agreement:
        """Agreement with the reference verdicts so far: the grader's, or plain math-verify's
        (prefix "plain_"). Kept as plain counters in `stats` so Ray actors' stats add up."""
        return Agreement(**{f: self.stats[f"{prefix}reference_{f}"] for f in
                            ("total", "agree", "false_accepts", "false_rejects", "undecided")})

    def _count(self, prefix: str, correct: bool | None, reference: bool) -> None:
        one = Agreement.of([correct], [reference])
        for field, value in vars(one).items():
            self.stats[f"{prefix}reference_{field}"] += value

    def process(self, batch: list[GradeInput]) -> Iterable[Outcome]:
        # The text as written: a record's steps with its own joins (`step_joins`), else the separator.
        texts = [r.response if r.steps is None else join_steps(r.steps, _joins(r), self.step_sep) for r in batch]
        verdicts = grade_traces(self.grader, [r.answer for r in batch], [self._trace(r, t) for r, t in zip(batch, texts)],
                                [finished_by_length(r) for r in batch])
        outs = [record.dump() for record in batch]
        # A human verdict beside the response (ProcessBench's final_answer_correct): the summary
        # reports how often the grader agrees with it, and plain math-verify beside it.
        with_reference = [i for i, out in enumerate(outs) if isinstance(out.get(self.reference_field), bool)]
        if self.baseline and with_reference:
            plain = self.grader.plain_many([(batch[i].answer, texts[i]) for i in with_reference])
            for i, verdict in zip(with_reference, plain):
                self._count("plain_", verdict.correct, outs[i][self.reference_field])
        for out, verdict in zip(outs, verdicts):
            reference = out.get(self.reference_field)
            out["final_answer"] = verdict.final_answer
            out["correct"] = verdict.correct
            if verdict.error:
                out["grade_error"] = verdict.error  # "no answer" comes with correct=False
            else:
                out.pop("grade_error", None)
            self.stats["grade_errors"] += verdict.correct is None
            self.stats["correct"] += verdict.correct is True
            if isinstance(reference, bool):
                self._count("", verdict.correct, reference)
            yield Outcome.one(Graded.make(out))

    def notes(self, summary: RunSummary) -> list[str]:
        """How often the grader (and plain math-verify) agrees with the reference verdicts: before the sentence."""
        lines = []
        ours = self.agreement()
        if ours.total:
            lines.append(f"grade: agrees with {self.reference_field} on {ours.agree} of {ours.total} "
                         f"({100 * ours.share:.1f}%): {_split(ours)}")
            plain = self.agreement("plain_")
            if plain.total:
                lines.append(f"grade: plain math-verify agrees on {plain.agree} of {plain.total} "
                             f"({100 * plain.share:.1f}%): {_split(plain)}")
        return lines

    def _trace(self, record: GradeInput, text: str) -> Trace:
        """A thinking response (`thought_steps`) is graded by its answer only, an unfinished thought
        not at all (thinking/grading.py); any other text as it is."""
        extra = record.model_extra or {}
        thought_steps = extra.get("thought_steps")
        if record.steps is None or not isinstance(thought_steps, int) or isinstance(thought_steps, bool):
            return Trace(text, None, text)
        finished = extra.get("thought_finished")
        return record_trace(record.steps, _joins(record), thought_steps, finished if isinstance(finished, bool) else None,
                            self.step_sep)

    def close(self) -> None:
        self.grader.close()


def _joins(record: GradeInput) -> list[str] | None:
    """The record's `step_joins` where they fit its steps (grade reads any file: a stray field is
    not its to refuse), else None: every join the separator."""
    joins = (record.model_extra or {}).get("step_joins")
    ok = (record.steps is not None and isinstance(joins, list) and len(joins) == len(record.steps) - 1
          and all(isinstance(j, str) for j in joins))
    return joins if ok else None


def _split(a: Agreement) -> str:
    return (f"{a.false_accepts} false accepts (graded right, reference wrong), {a.false_rejects} false rejects"
            + (f", {a.undecided} undecided" if a.undecided else ""))
