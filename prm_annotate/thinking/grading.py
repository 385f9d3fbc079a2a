"""Grading a thinking policy's completion: only its answer, and only when it has one.

- A thought with no `</think>` has no answer: not graded (`correct` null, `UNFINISHED`), so a
  draft in the thought never passes for the answer.
- The answer is what follows `</think>`. An answer that thinks again and answers again
  (`thinking.tags.answer_parts`) has a single answer only when the grader finds its answers equal
  (`8\\sqrt{2}` and `\\sqrt{128}` are one answer): otherwise it is refused (`correct` null,
  "two different answers: …"), never one of the two picked; equality the grader cannot decide is
  refused the same way.
"""
from __future__ import annotations

from typing import Any, Sequence

from prm_annotate.grading.answers import extract_final_answer
from prm_annotate.grading.grader import Grader, Verdict
from prm_annotate.thinking.tags import Trace, answer_parts, thinks_again

UNFINISHED = "unfinished thought: no </think> before the completion ended"
TWO_ANSWERS = "two different answers"


def _answers(trace: Trace, cut: bool = False) -> list[str]:
    """The answers of its parts; a cut completion's last part only as far as it closed one."""
    parts = answer_parts(trace.answer)
    found = (extract_final_answer(p, cut and i == len(parts) - 1) for i, p in enumerate(parts))
    return [a for a in found if a is not None]


def answer_text(trace: Trace) -> str:
    """What is graded: the answer, without the thoughts it went back to."""
    return "\n\n".join(answer_parts(trace.answer)) if trace.thinks and thinks_again(trace.answer) else trace.answer


def conflicting_answers(grader: Grader, traces: Sequence[Trace], cut: Sequence[bool] | None = None) -> list[str | None]:
    """Per trace, why its answers do not make one answer (None: they do, or it has at most one)."""
    pairs, owners = [], []
    for i, trace in enumerate(traces):
        if trace.thinks and trace.finished and thinks_again(trace.answer):
            answers = _answers(trace, bool(cut and cut[i]))
            for other in answers[:-1]:
                pairs.append((answers[-1], other))  # the last answer as the reference
                owners.append(i)
    reasons: list[str | None] = [None] * len(traces)
    for i, (pair, verdict) in zip(owners, zip(pairs, grader.grade_many([(g, a) for g, a in pairs]))):
        if verdict.correct is not True and reasons[i] is None:
            unequal = "" if verdict.correct is False else " (the grader could not tell whether they are equal)"
            reasons[i] = f"{TWO_ANSWERS}: {pair[1]!r}, then {pair[0]!r} after thinking again{unequal}"
    return reasons


def finished_by_length(record: Any) -> bool:
    """A record `sample` wrote whose completion was cut at its token budget (`generator.finish_reason`)."""
    extra = record.get("generator") if isinstance(record, dict) else (getattr(record, "model_extra", None) or {}).get("generator")
    return isinstance(extra, dict) and extra.get("finish_reason") == "length"


def grade_traces(grader: Grader, golds: Sequence[str], traces: Sequence[Trace],
                 cut: Sequence[bool] | None = None) -> list[Verdict]:
    """Each trace's verdict against its gold answer (module docstring); `cut`: per trace, whether it
    was cut at its token budget (Grader.grade_many)."""
    refusals = conflicting_answers(grader, traces, cut)
    todo = [i for i, (t, r) in enumerate(zip(traces, refusals)) if t.finished and r is None]
    graded = dict(zip(todo, grader.grade_many([(golds[i], answer_text(traces[i])) for i in todo],
                                              [bool(cut and cut[i]) for i in todo])))
    out = []
    for i, (trace, refusal) in enumerate(zip(traces, refusals)):
        if not trace.finished:
            out.append(Verdict(None, None, UNFINISHED))
        elif refusal is not None:
            out.append(Verdict(None, None, refusal))
        else:
            out.append(graded[i])
    return out
