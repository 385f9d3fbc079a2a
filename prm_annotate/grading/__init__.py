"""Final answers: found in a response and normalised (`answers`, text only, nothing evaluated),
then compared with the gold answer (`grader`): an exact comparison first, then math-verify in a
child process it can kill (`worker`), after a cost check for answers sympy would choke on (`cost`).

    with Grader() as grader:
        verdict = grader.grade("16", response_text)   # Verdict(final_answer, correct: bool | None, error)
"""
from prm_annotate.grading.answers import extract_final_answer, normalize_answer
from prm_annotate.grading.grader import Agreement, Grader, Verdict

__all__ = ["Agreement", "Grader", "Verdict", "extract_final_answer", "normalize_answer"]
