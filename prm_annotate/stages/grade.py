"""grade: re-grade the final answers of existing responses.

Reads any records with `id`, `answer` and `steps` or `response` (the whole text) and writes them
back with `final_answer` and `correct` set by the grader. A comparison the grader cannot finish
(timeout, parse failure) is recorded as `correct: null` with `grade_error`, never guessed.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from prm_annotate.grading import Grader
from prm_annotate.records import GradeInput
from prm_annotate.runner import Outcome
from prm_annotate.steps import DEFAULT_SEP, join_steps


class GradeStage:
    name = "grade"
    input_model = GradeInput

    def __init__(self, grader: Grader | None = None, step_sep: str = DEFAULT_SEP,
                 reference_field: str = "final_answer_correct"):
        self.grader = grader or Grader()
        self.step_sep = step_sep
        self.reference_field = reference_field
        self.stats: Counter = Counter()

    def settings(self) -> dict[str, Any]:
        return {"step_sep": self.step_sep, "reference_field": self.reference_field}

    def process(self, batch: list[GradeInput]) -> Iterable[Outcome]:
        texts = [r.response if r.steps is None else join_steps(r.steps, self.step_sep) for r in batch]
        verdicts = self.grader.grade_many([(r.answer, t) for r, t in zip(batch, texts)])
        for record, verdict in zip(batch, verdicts):
            out = record.dump()
            out["final_answer"] = verdict.final_answer
            out["correct"] = verdict.correct
            if verdict.error:
                out["grade_error"] = verdict.error  # "no answer" comes with correct=False
            else:
                out.pop("grade_error", None)
            self.stats["grade_errors"] += verdict.correct is None
            self.stats["correct"] += verdict.correct is True
            reference = out.get(self.reference_field)
            if isinstance(reference, bool):
                # A human verdict beside the response (ProcessBench's final_answer_correct):
                # the summary reports how often the grader agrees with it.
                self.stats["with_reference"] += 1
                self.stats["agree_with_reference"] += verdict.correct is reference
            yield Outcome.one(out)
