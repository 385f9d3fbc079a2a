"""The thinking world: generated traces (prm_annotate/world/thinking.py) and the truth of any trace
(prm_annotate/world/trace_truth.py), read from the text alone and checked against the generator's
own record, on generated traces and on hand-written odd ones."""
from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prm_annotate.world.problems import World, make_problem, make_problems
from prm_annotate.world.thinking import TraceMix, make_trace, trace_for
from prm_annotate.world.trace_truth import check_trace, read_trace, split_trace

# 3 + 5 = 8, 8 - 2 = 6, 6 * 2 = 12.
PROBLEM = {
    "id": "arith-hand-0",
    "problem": "Tom has 3 apples. Then gets 5 more. Then loses 2. Then the apples double. How many apples now?",
    "answer": "12",
    "world": {"name": "Tom", "items": "apples", "start": 3, "ops": [["add", 5], ["sub", 2], ["mul", 2]]},
}


def trace(*thought: str, answer: str | None = "The answer is \\boxed{12}.", opener: bool = True) -> str:
    text = ("<think>\n" if opener else "") + "\n\n".join(thought) + "\n</think>\n\n"
    return text + (answer or "")


def generated_record(t) -> tuple:
    return (t.first_error, [(s.index, s.kind, s.op, s.corrected_at) for s in t.slips], list(t.kinds),
            t.final_correct)


def truth_record(tr) -> tuple:
    return (tr.first_error, [(s.index, s.kind, s.op, s.corrected_at) for s in tr.slips],
            [p.kind for p in tr.paragraphs], tr.final_correct)


# ---------------------------------------------------------------- generated traces

def test_truth_agrees_with_the_generators_record_on_thousands_of_traces():
    kinds_seen = set()
    for i in range(2500):
        problem, t = trace_for("test", i, 3)
        truth = read_trace(problem, t.text)
        assert truth_record(truth) == generated_record(t), (i, t.text)
        # The completion a model writes after the opened thought reads the same.
        assert truth_record(read_trace(problem, t.completion)) == generated_record(t)
        assert truth.finished and truth.thought_steps == len(t.thought)
        kinds_seen |= set(t.kinds)
    assert kinds_seen == {"step", "recheck", "correction", "slip", "wrong_correction", "propagated", "answer"}


def test_generator_is_seeded_and_its_mix_holds_every_event():
    assert trace_for("train", 7, 0) == trace_for("train", 7, 0)
    assert [trace_for("train", i, 0)[1] for i in range(20)] != [trace_for("train", i, 1)[1] for i in range(20)]
    traces = [trace_for("train", i, 0)[1] for i in range(2000)]
    share = lambda f: sum(map(f, traces)) / len(traces)  # noqa: E731
    assert share(lambda t: t.corrected_slip) > 0.3
    assert share(lambda t: t.uncaught_slip) > 0.15
    assert share(lambda t: any(s.kind == "wrong_correction" for s in t.slips)) > 0.05
    assert share(lambda t: t.first_error == -1) > 0.2
    # Corrected later (carried on, then caught in the verification pass) as well as at once.
    assert any(s.corrected_at is not None and s.corrected_at > s.index + 1 for t in traces for s in t.slips)
    assert max(len(t.steps) for t in traces) <= 20
    # Without slips and wrong corrections every trace is right: the events are the mix's, not noise.
    clean = TraceMix(slip=0, wrong_fix=0)
    for i in range(300):
        problem = make_problem("train", i, 0)
        t = make_trace(World.from_json(problem["world"]), random.Random(i), clean)
        assert read_trace(problem, t.text).first_error == -1 and t.first_error == -1


def test_a_changed_number_in_a_right_paragraph_is_found():
    """Mutate one number of a right thought paragraph of generated traces: the truth must now see
    an error at or before it (the generator's record is of the unmutated text, so this checks the
    reader, not the agreement)."""
    found = 0
    for i in range(600):
        problem, t = trace_for("test", i, 5)
        rng = random.Random(i)
        right = [j for j, k in enumerate(t.kinds[:len(t.thought)]) if k in ("step", "recheck", "correction")]
        if not right:
            continue
        j = rng.choice(right)
        text = t.thought[j]
        last = list(re.finditer(r"\d+", text))[-1]  # the result of the paragraph's step equation
        changed = text[:last.start()] + str(int(last.group()) + rng.choice([1, 2, 10])) + text[last.end():]
        thought = list(t.thought)
        thought[j] = changed
        truth = check_trace(problem, thought, list(t.answer))
        assert truth.first_error != -1 and truth.first_error <= j, (t.text, changed)
        assert not truth.paragraphs[j].ok
        found += 1
    assert found > 400


# ---------------------------------------------------------------- hand-written traces

def test_a_right_trace_and_one_with_a_corrected_slip():
    right = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12."))
    assert right.first_error == -1 and right.final_correct and right.slips == () and right.answer == "12"
    slipped = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 5.",
                                        "Wait, 8 - 2 is 6, not 5. Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12."))
    assert [p.kind for p in slipped.paragraphs] == ["step", "slip", "correction", "step", "answer"]
    assert slipped.first_error == 1 and slipped.final_correct
    assert [(s.index, s.corrected_at) for s in slipped.corrected_slips] == [(1, 2)]
    assert slipped.paragraphs[2].corrects == (1,)


def test_a_slip_caught_late_with_the_steps_it_carried_redone():
    truth = read_trace(PROBLEM, trace(
        "Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 5.", "Step 3: 5 * 2 = 10.",
        "Let me check step 2: 8 - 2 = 5. Yes.",  # confirms the slip: wrong through it
        "Wait, 8 - 2 is 6, not 5. Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12."))
    assert [p.kind for p in truth.paragraphs] == [
        "step", "slip", "propagated", "propagated", "correction", "step", "answer"]
    assert [(s.index, s.corrected_at) for s in truth.slips] == [(1, 4)] and truth.final_correct


def test_a_slip_never_caught_and_a_wrong_correction():
    never = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 5.", "Step 3: 5 * 2 = 10.",
                                      answer="The answer is \\boxed{10}."))
    assert [p.kind for p in never.paragraphs] == ["step", "slip", "propagated", "propagated"]
    assert [(s.index, s.corrected_at) for s in never.uncaught_slips] == [(1, None)] and not never.final_correct
    wrong_fix = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Wait, 3 + 5 is 9, not 8. Step 1: 3 + 5 = 9.",
                                          "Step 2: 9 - 2 = 7.", "Step 3: 7 * 2 = 14.",
                                          answer="The answer is \\boxed{14}."))
    assert [p.kind for p in wrong_fix.paragraphs] == ["step", "wrong_correction", "propagated", "propagated",
                                                      "propagated"]
    assert wrong_fix.first_error == 1 and wrong_fix.uncaught_slips == [] and len(wrong_fix.wrong_corrections) == 1
    # A "correction" to another wrong value is a new slip, and the right one corrects both.
    twice = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 7.", "Wait, 3 + 5 is 9, not 7. Step 1: 3 + 5 = 9.",
                                      "Wait, 3 + 5 is 8, not 9. Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.",
                                      "Step 3: 6 * 2 = 12."))
    assert [(s.index, s.kind, s.corrected_at) for s in twice.slips] == [(0, "slip", 2), (1, "slip", 2)]


def test_garbled_paragraphs_missing_answers_cut_thoughts_and_two_answers():
    garbled = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Hmm, let me think about this.",
                                        "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12."))
    assert garbled.first_error == 1 and garbled.paragraphs[1].kind == "garbled" and garbled.final_correct
    missing = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12.",
                                        answer=None))
    assert missing.first_error == 2 and missing.answer is None and not missing.final_correct
    assert "no \\boxed{}" in missing.answer_problem
    cut = read_trace(PROBLEM, "Step 1: 3 + 5 = 8.\n\nStep 2: 8 - 2 = 6.\n\nStep 3: 6 * ")
    assert not cut.finished and cut.answer_problem == "the thought was not closed" and not cut.final_correct
    assert cut.first_error == 2 and cut.thought_steps == 3
    two = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12.",
                                    answer="The answer is \\boxed{12}.\n\nSo the answer is \\boxed{10}."))
    assert two.answer is None and two.answer_problem == "several different answers" and not two.final_correct
    assert two.first_error == 4 and two.paragraphs[4].kind == "garbled"
    one_box_two_values = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.",
                                                   "Step 3: 6 * 2 = 12.", answer="\\boxed{12} or \\boxed{6}"))
    assert one_box_two_values.first_error == 3 and one_box_two_values.answer is None
    assert read_trace(PROBLEM, "").first_error == 0


def test_labels_name_the_operation_and_unlabelled_equations_go_on():
    unlabelled = read_trace(PROBLEM, trace("3 + 5 = 8, then 8 - 2 = 6.", "6 * 2 = 12."))
    assert unlabelled.first_error == -1 and [p.ops for p in unlabelled.paragraphs[:2]] == [(0, 1), (2,)]
    skipped = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 3: 6 * 2 = 12."))
    assert skipped.first_error == 1 and "skips" in skipped.paragraphs[1].reason
    extra = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12.",
                                      "Step 4: 12 + 1 = 13."))
    assert extra.first_error == 3 and extra.paragraphs[3].reason == "extra operation"
    # A wrong claim with right equations is a slip of its own.
    claim = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Wait, 8 - 2 is 5. Step 2: 8 - 2 = 6.",
                                      "Step 3: 6 * 2 = 12."))
    assert claim.first_error == 1 and claim.slips[0].op is None


def test_split_trace_keeps_the_thought_and_the_answer_apart():
    assert split_trace("<think>\nA\n\nB\n</think>\n\nC") == (["\nA", "B\n"], ["C"], True)
    assert split_trace("A\n\n\n\nB</think>C") == (["A", "B"], ["C"], True)
    assert split_trace("A\n\nB") == (["A", "B"], [], False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12.", "Step 2: 8 - 2 = 5.",
    "Wait, 8 - 2 is 6, not 5. Step 2: 8 - 2 = 6.", "Let me check step 1: 3 + 5 = 8. Yes.", "Hmm.",
    "The answer is \\boxed{12}.", "\\boxed{", "Step 9: 1 + 1 = 2.", "Step 0: 2 = 2", "</think>", "<think>",
    "5 x 2 = 10", "-3 - -4 = 1"]), max_size=12))
def test_any_text_is_read_without_crashing(pieces):
    truth = read_trace(PROBLEM, "\n\n".join(pieces))
    assert len(truth.paragraphs) == len(split_trace("\n\n".join(pieces))[0]) + len(split_trace("\n\n".join(pieces))[1])
    assert (truth.first_error == -1) == (all(p.ok for p in truth.paragraphs) and truth.answer is not None)
    for s in truth.slips:
        assert not truth.paragraphs[s.index].ok
        assert s.corrected_at is None or (s.corrected_at > s.index and truth.paragraphs[s.corrected_at].ok)


# ---------------------------------------------------------------- the shipped thinker in vLLM

@pytest.mark.engine
def test_shipped_thinker_writes_traces_the_truth_reads(world_thinker):
    """The thinker's chat template opens the thought in the prompt; every sample is a thought
    closed by `</think>` and a boxed answer, in the world's step style, and the truth reads each
    one. Slips it corrects and slips it never catches both occur (the mix the world is for)."""
    from prm_annotate.engines.base import GenerationRequest, Sampling
    from prm_annotate.world import THINKER_DIR

    system = json.loads((THINKER_DIR / "world.json").read_text())["system_prompt"]
    problems = make_problems(24, seed=0)
    results = world_thinker.generate([
        GenerationRequest(key=p["id"], n=4, sampling=Sampling(temperature=0.7, max_tokens=1024, seed=i),
                          messages=({"role": "system", "content": system}, {"role": "user", "content": p["problem"]}))
        for i, p in enumerate(problems)])
    truths = []
    for p in problems:
        for text in results[p["id"]].texts:
            assert "<think>" not in text, text  # the prompt opened the thought: never a second one
            thought, answer, finished = split_trace(text)
            truth = read_trace(p, text)  # every sample is read, whatever it holds
            assert len(truth.paragraphs) == len(thought) + len(answer) and truth.finished == finished
            truths.append(truth)
    # The shape: a closed thought, then one answer paragraph with the box (a rare sample is cut or odd).
    shaped = [t for t in truths if t.finished and len(t.paragraphs) == t.thought_steps + 1 and t.answer is not None]
    assert len(shaped) >= 0.9 * len(truths)
    assert sum(bool(t.paragraphs) and t.paragraphs[0].ops[:1] == (0,) for t in truths) >= 0.9 * len(truths)  # it starts at step 1
    assert any(t.corrected_slips for t in truths) and any(t.uncaught_slips for t in truths)
    assert 0.1 <= sum(t.final_correct for t in truths) / len(truths) <= 0.95


def test_truths_recovery_is_the_generators_slips_and_keeps_the_papers_first_error():
    from prm_annotate.recovery.labels import Recovery, Slip
    corrected = 0
    for i in range(400):
        problem, t = trace_for("test", i, 5)
        truth = read_trace(problem, t.text)
        r = truth.recovery()
        assert r == Recovery(tuple(Slip(s.index, s.corrected_at) for s in t.slips))
        assert r.first_error() == truth.first_error == t.first_error
        corrected += bool(r.corrected)
        # Under recovery labels a corrected trace ends right exactly when every error was caught.
        if truth.final_correct:
            assert r.step_labels(len(t.steps))[-1] == (not r.uncaught)
    assert corrected > 100
    # A garbled paragraph and an unanswered right trace: new errors no paragraph corrects.
    garbled = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Hmm.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12."))
    assert garbled.recovery() == Recovery((Slip(1, None),)) and garbled.recovery().first_error() == garbled.first_error
    missing = read_trace(PROBLEM, trace("Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", answer=None))
    assert missing.recovery() == Recovery((Slip(missing.first_error, None),))
