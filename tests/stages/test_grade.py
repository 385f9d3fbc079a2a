"""grade: what is graded is the response's text as written."""
from __future__ import annotations

from prm_annotate.records import GradeInput
from prm_annotate.stages.grade import GradeStage


def test_grade_reads_the_steps_as_the_record_joins_them():
    """A record cut inside its answer (a confidence cut, `step_joins` [""]) is graded on its own text;
    the same steps read with the separator between them (how grade read them before) are not."""
    row = {"id": "a", "answer": "12", "steps": ["Adding up, the total is \\boxed{1", "2}."]}
    stage = GradeStage()
    try:
        joined, separated = (next(iter(stage.process([GradeInput.model_validate(r)]))).records[0].dump()
                             for r in ({**row, "step_joins": [""]}, row))
    finally:
        stage.close()
    assert (joined["final_answer"], joined["correct"]) == ("12", True)
    assert separated["correct"] is not True and separated["final_answer"] != "12"
