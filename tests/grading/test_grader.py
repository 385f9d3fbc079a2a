"""Answer grading: extraction, normalisation, math-verify comparisons, caching, hard timeout,
hostile answers, and agreement with the human verdicts of ProcessBench."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from prm_annotate.grading import grader as grading
from prm_annotate.grading.answers import extract_final_answer, normalize_answer
from prm_annotate.grading.grader import Grader, Verdict
from testing.paths import REPO, TEST_DATA

SHARED = TEST_DATA
GRADING_FILES = [SHARED / "grading" / "processbench-gsm8k-gold.jsonl",
                 SHARED / "grading" / "processbench-math-gold.jsonl"]
# Runs for minutes (days, really) in sympy: 9^(9^(9^9)) has ~10^(3.7e8) digits.
PATHOLOGICAL = r"\boxed{9^{9^{9^{9}}}}"
# Slow in sympy (a trinomial expanded to the 100th power) yet small to look at: it passes the
# grader's cost pre-check (grading/cost.py), so only the hard timeout bounds it.
SLOW = r"\boxed{(x+y+z)^{100}}"


@pytest.fixture(scope="module")
def grader():
    with Grader(timeout=5.0) as g:
        yield g


# --- extraction --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (r"So $x = \boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
    (r"first \boxed{3}, then \boxed{\sqrt{\frac{a}{b}}} at last", r"\sqrt{\frac{a}{b}}"),
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),                       # escaped braces inside
    (r"\fbox{7} is it", "7"),
    (r"ok \boxed{5} but truncated \boxed{12", "5"),           # unclosed box is skipped
    ("Thus the answer is 42.", "42"),
    ("Final Answer: The final answer is $\\frac{4}{7}$. I hope it is correct.", "$\\frac{4}{7}$"),
    ("The final answer is 0.00000672. I hope it is correct.", "0.00000672"),
    ("blah <<2*3=6>>6\n#### 1,234", "1,234"),
    ("#### For \\(T = 2\\):\n- 33.\n\n#### For \\(T = 3\\):\n- 132.\n\n### Final Answer\nThe product is **6**.", "6"),
    ("#### Case 1\nNo solution.\n\n#### Final Answer\nSo the answer is 4.", "4"),  # markdown headings
    ("She makes 9 * 2 = $<<9*2=18>>18 every day\nA: 18", "18"),
    ("**Answer:** Verna received $7.00 in change.", "Verna received $7.00 in change"),
    ("**Step 1:** add.\n\nSo she has **12 tomatoes** left.", "12 tomatoes"),
    ("The answer is framed within the context of the problem.\n\nSo it is 3.", "3"),  # prose skipped
    ("Therefore, the customer paid $37 on this shopping trip.", "$37"),
    ("\\[ 14 + 20 = 34 \\text{ hours}\\] So, she spends a total of 34 hours in 4 weeks.", "34"),
    ("Therefore, $\\cos \\angle RPS = -\\frac{24}{25}$.", "-\\frac{24}{25}"),
    ("18", "18"),
    ("$\\frac{1}{2}$", "$\\frac{1}{2}$"),
    ("I do not know.", None),
    ("", None),
])
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


def test_boxed_beats_later_answer_is():
    assert extract_final_answer("The answer is 3. Check: \\boxed{4}. The answer is 5.") == "4"


@pytest.mark.parametrize("raw, expected", [
    ("\\$1,234.50", "1234.50"),
    ("$2,280$ reports", "2280"),
    ("90,000", "90000"),
    ("34 \\text{ hours}", "34"),
    ("5 \\text{ cm}^2", "5"),
    ("\\text{(E)}", "E"),
    ("(C)", "C"),
    ("\\text{east}", "east"),
    ("27\\%", "27%"),                                         # the sign is kept: see comparison_forms
    ("76^\\circ", "76"),
    ("12.", "12"),
    ("\\$32,\\!348", "32348"),
    ("\\dfrac{1}{2}", "\\frac{1}{2}"),
    ("(2, \\infty)", "(2, \\infty)"),                          # a list keeps its comma
    ("4 blue boxes and 6 red boxes", "4 blue boxes and 6 red boxes"),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
])
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


# --- comparisons -------------------------------------------------------------------------------

# Comparisons in both directions, by kind of answer: tests/grading/test_answer_rules.py.


def test_no_answer_is_not_correct(grader):
    assert grader.grade("3", "I cannot solve this.") == Verdict(None, False, "no answer")


def test_empty_answers(grader):
    assert grader.grade("3", "**$$**") == Verdict("$$", False, "no answer")
    assert grader.grade("$$", "\\boxed{3}") == Verdict("3", None, "empty gold")


def test_gold_goes_first(monkeypatch):
    # math-verify is not symmetric: an interval gold accepts an inequality answer but an inequality
    # gold does not accept an interval answer. The worker calls it gold first...
    from prm_annotate.grading.worker import verify_answer

    assert verify_answer("1 < x < 2", "(1, 2)") == (True, None)
    assert verify_answer("(1, 2)", "1 < x < 2") == (False, None)
    assert verify_answer("1 \\le x \\le 2", "[1, 2]") == (True, None)
    assert verify_answer("[1, 2]", "1 \\le x \\le 2") == (False, None)
    # ...and the grader sends each pair gold first (the interval rule of answers.py now reads both
    # orders of the example above alike, so the order is checked where it is sent).
    sent = []
    with Grader() as g:
        real = g._compare
        monkeypatch.setattr(g, "_compare", lambda keys: sent.extend(keys) or real(keys))
        assert g.grade("\\frac{1}{3}", "\\boxed{\\frac{2}{6}}").correct is True
    assert sent == [("\\frac{1}{3}", "\\frac{2}{6}")]


def test_grade_many_keeps_order_and_matches_grade(grader):
    pairs = [("3", "\\boxed{3}"), ("3", "\\boxed{4}"), ("\\frac12", "\\boxed{0.5}"), ("3", "none"),
             ("\\frac12", "\\boxed{\\frac{2}{4}}"), ("3", "\\boxed{3}")]
    many = grader.grade_many(pairs)
    assert [v.correct for v in many] == [True, False, True, False, True, True]
    assert many == [grader.grade(g, t) for g, t in pairs]


def test_verdicts_are_cached(monkeypatch):
    calls = []
    with Grader() as g:
        real = g._compare

        def counting(keys):
            calls.append(list(keys))
            return real(keys)

        monkeypatch.setattr(g, "_compare", counting)
        first = g.grade_many([("\\frac{1}{3}", "\\boxed{\\frac{2}{6}}")] * 3)
        again = g.grade("\\frac{1}{3}", "so the answer is $\\frac{2}{6}$.")  # same normalised pair
        assert all(v.correct for v in first) and again.correct
        assert calls == [[("\\frac{1}{3}", "\\frac{2}{6}")], []]  # one math-verify call in all


def test_cache_is_bounded():
    with Grader(cache_size=2) as g:
        g.grade_many([("1", "\\boxed{1}"), ("2", "\\boxed{2}"), ("3", "\\boxed{3}")])
        assert list(g._cache) == [("2", "2"), ("3", "3")]


# --- hard timeout ------------------------------------------------------------------------------

def test_pathological_comparison_times_out():
    with Grader(timeout=1.0) as g:
        start = time.monotonic()
        v = g.grade("5", SLOW)
        took = time.monotonic() - start
        assert v == Verdict("(x+y+z)^{100}", None, "timeout")
        assert took < 1.0 + 10  # the deadline, plus killing the worker (generous on a loaded machine)
        # Its replacement was started at once (it loads math-verify before it is needed).
        [replacement] = list(g._idle.queue)
        assert replacement is not None and replacement.proc.poll() is None
        # The worker was replaced: the next comparison works, and the timeout is cached.
        assert g.grade("\\frac{1}{2}", "\\boxed{0.5}").correct is True
        start = time.monotonic()
        assert g.grade("5", SLOW).error == "timeout"
        assert time.monotonic() - start < 0.5


def test_a_tower_of_powers_is_too_costly_without_math_verify():
    with Grader(timeout=60.0) as g:
        v = g.grade("5", PATHOLOGICAL)
        assert (v.correct, v.error) == (None, "too costly: a number too large to compute")
        assert g.stats["too_costly"] == 1 and g.stats["math_verify"] == 0
        assert all(w is None for w in g._idle.queue)  # no worker was even started


def test_timeout_off_the_main_thread_and_in_a_batch():
    results: list = []
    with Grader(timeout=1.0) as g:
        def run():
            results.append(g.grade_many([("7", "\\boxed{7}"), ("7", f"The answer is ${SLOW[7:-1]}$."),
                                         ("\\frac12", "\\boxed{0.5}"), ("8", "\\boxed{2^3}")]))
        t = threading.Thread(target=run)
        t.start()
        t.join(timeout=60)
        assert not t.is_alive()
    [verdicts] = results
    assert [(v.correct, v.error) for v in verdicts] == [(True, None), (None, "timeout"), (True, None), (True, None)]


def test_timeout_inside_a_worker_process(tmp_path):
    # A daemonic multiprocessing worker may not start multiprocessing children; the grader's
    # subprocess worker must still work there, and signals are not used.
    script = tmp_path / "pool.py"
    script.write_text(
        "import multiprocessing as mp\n"
        "def job(_):\n"
        "    from prm_annotate.grading.grader import Grader\n"
        "    with Grader(timeout=1.0) as g:\n"
        f"        return [(v.correct, v.error) for v in g.grade_many([('5', {SLOW!r}), ('2', 'A: 2')])]\n"
        "if __name__ == '__main__':\n"
        "    with mp.get_context('fork').Pool(1) as pool:\n"
        "        print(pool.map(job, [0])[0])\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[(None, 'timeout'), (True, None)]"


def test_a_worker_started_without_waiting_grades_and_stops():
    g = Grader(timeout=5.0)
    g.start(wait=False)
    [worker] = list(g._idle.queue)
    assert worker is not None and worker.proc.poll() is None  # running while math-verify loads
    assert g.grade("\\frac12", "\\boxed{0.5}").correct is True  # waits for the rest of the import
    assert [w for w in g._idle.queue] == [worker] and worker.ready
    g.close()
    assert worker.proc.poll() is not None


def test_a_model_stage_starts_its_grader_with_the_stream():
    from prm_annotate.stages.rollout import RolloutStage
    from testing.scripted_engine import ScriptedEngine

    stage = RolloutStage(ScriptedEngine(lambda r: "\\boxed{1}"), k=2)
    assert all(w is None for w in stage.grader._idle.queue)
    stage.stream(iter([]), 4)
    [worker] = list(stage.grader._idle.queue)
    assert worker is not None and worker.proc.poll() is None
    stage.close()
    assert worker.proc.poll() is not None


def test_no_worker_left_behind():
    g = Grader(timeout=2.0)
    g.grade("\\frac12", "\\boxed{0.5}")
    [worker] = [w for w in list(g._idle.queue) if w is not None]
    g.close()
    assert worker.proc.poll() is not None


# --- untrusted model output --------------------------------------------------------------------

def _payload(path: Path) -> str:
    return f"__import__('os').system('touch {path}')"


def _hostile(path: Path) -> list[str]:
    cmd = _payload(path)
    return [
        f"\\boxed{{{cmd}}}",
        f"The answer is {cmd}.",
        f"#### {cmd}",
        f"Answer: {cmd}",
        f"**{cmd}**",
        f"${cmd}$",
        f"\\boxed{{1 + {cmd}}}",
        f"\\boxed{{eval(\"{cmd}\")}}",
        f"\\boxed{{(lambda: {cmd})()}}",
        f"The answer is 2 + {cmd}",
        f"\\boxed{{\\text{{{cmd}}}}}",
        f"x = {cmd}",
        cmd,
    ]


def test_payload_is_really_hostile(tmp_path):
    # Control: sympy's string parser evaluates its input, so the payload would create the file.
    marker = tmp_path / f"control_{uuid.uuid4().hex}"
    code = f"import sympy; sympy.sympify({_payload(marker)!r})"
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert marker.exists()


def test_hostile_answers_are_never_executed(tmp_path):
    # No digits in the marker's name: the grader reads the last number of a text as its answer, and
    # a random hex name ending in "5" made a hostile text "right" against the gold 5 (never run).
    marker = tmp_path / f"pwned_{uuid.uuid4().hex.translate(str.maketrans('0123456789', 'ghijklmnop'))}"
    hostile = _hostile(marker)
    with Grader(timeout=5.0) as g:
        against_gold = g.grade_many([("5", h) for h in hostile])
        g.grade_many([(h, h) for h in hostile])  # hostile text on the gold side too
    assert not marker.exists()
    assert not any(v.correct for v in against_gold)
    # The worker's comparison, run in this process, does not evaluate either.
    from prm_annotate.grading.worker import verify_answer
    for h in hostile:
        verify_answer(normalize_answer(h), normalize_answer(h))
        verify_answer("5", normalize_answer(h))
    assert not marker.exists()


def test_grading_module_does_not_load_sympy():
    code = "import sys, prm_annotate.grading.grader; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=REPO)
    assert out.stdout.strip() == "False", out.stderr


# Agreement with human verdicts, on every verdict file: tests/grading/test_answer_rules.py.

def test_agreement_splits_the_disagreements():
    a = grading.Agreement.of([True, False, None, True, False], [False, True, True, True, False])
    assert (a.total, a.agree, a.false_accepts, a.false_rejects, a.undecided) == (5, 2, 1, 1, 1)
    assert str(a) == "2/5 = 40.00% (false accepts 1, false rejects 1, undecided 1)"


def test_plain_math_verify_reads_the_whole_response(grader):
    # The reference: math-verify's own extraction on the text, none of the grader's rules. It reads
    # "not 18" as 18 where the grader does not, and a gold with its own delimiters as it is.
    plain = grader.plain_many([("18", "The answer is \\boxed{18}."), ("18", "The answer is \\boxed{19}."),
                               ("$9$", "Answer \\( 9 \\)"), ("18", "18?")])
    assert [v.correct for v in plain] == [True, False, True, True]
    assert grader.grade("18", "18?").correct is False


def test_grading_module_exports():
    assert grading.extract_final_answer is extract_final_answer


def test_two_workers_agree_with_one():
    # More pending comparisons than one chunk, so two worker processes share them.
    pairs = [(f"\\frac{{{i}}}{{7}}", f"\\boxed{{\\frac{{{2 * i + (i % 3 == 0)}}}{{14}}}}") for i in range(1, 301)]
    with Grader(workers=1) as one, Grader(workers=2) as two:
        a, b = one.grade_many(pairs), two.grade_many(pairs)
        assert two.stats["math_verify"] == 300
    assert a == b
    assert [v.correct for v in a] == [i % 3 != 0 for i in range(1, 301)]


@pytest.mark.parametrize("text", [
    "x" + "\n" * 50000 + "y",
    "\\boxed{" * 20000,
    "\\[" * 20000 + "5",
    "\\(" * 20000 + "5",
    "the answer is " * 10000,
    "**" * 30000,
    "= 1 " * 30000,
    "A\n" * 30000,
    "1 " + "ab " * 20000 + "!",
    " " * 50000 + "x",                       # whitespace runs against the end-anchored rules
    "k \\in " * 10000 + "\\mathbb{Z}",
    "\\boxed{1} and " * 5000,                  # box items joined into one answer
    "5 and " * 10000 + "6",
    "not " * 20000 + "18",
    "n" * 50000 + "'t 18",
    "2" * 50000 + "√",                         # the Unicode rules
    "√" * 50000 + "3",
    "\\pm " * 20000 + "1",
    "\\{" * 20000 + "1" + "\\}" * 20000,
    "x < " * 20000 + "1",
])
def test_degenerate_output_is_handled_quickly(text):
    # Long degenerate generations must not make the regular expressions quadratic: the parent runs
    # them without a timeout. The bound is loose (seconds) to hold on a loaded machine; the bad
    # cases took minutes before the rules were windowed.
    start = time.monotonic()
    answer = extract_final_answer(text)
    normalize_answer(text)
    if answer:
        normalize_answer(answer)
    assert time.monotonic() - start < 5


def _closing_braces_full_scan(text: str, start: int = 0) -> dict[int, int]:
    """The brace pairing as it was first written: a character loop over the whole text (`start`
    ignored). The fast version must agree with it wherever it is used."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


def _random_latexish(rng, n: int) -> str:
    pieces = ["{", "}", "\\", "\\boxed", "\\boxed{", "\\fbox {", "\\\\", "\\{", "\\}", " ", "\n", "x", "12", "$", "."]
    return "".join(rng.choice(pieces) for _ in range(n))


def test_brace_pairing_from_an_unescaped_brace_equals_a_full_scan():
    import random

    from prm_annotate import boxed

    rng = random.Random(0)
    for _ in range(3000):
        text = _random_latexish(rng, rng.randrange(1, 40))
        full = _closing_braces_full_scan(text)
        assert boxed.closing_braces(text) == full
        # Every brace the full scan reads as a brace (not escaped) is a valid place to start.
        opened = [i for i, c in enumerate(text) if c == "{" and not _escaped(text, i)]
        for start in opened:
            assert boxed.closing_braces(text, start) == {a: b for a, b in full.items() if a >= start}, (text, start)


def _escaped(text: str, index: int) -> bool:
    """Whether the full scan skips text[index] as the character after a backslash."""
    i = 0
    while i < index:
        i += 2 if text[i] == "\\" else 1
    return i != index


def test_boxed_extraction_unchanged_by_the_partial_brace_scan(monkeypatch):
    import random

    from prm_annotate import boxed
    from prm_annotate.grading import answers

    rng = random.Random(1)
    texts = [_random_latexish(rng, rng.randrange(1, 60)) for _ in range(3000)]
    texts += ["Step 1: {a} \\{ 3 + 4 = 7.\n\n" * 20 + "The answer is \\boxed{\\frac{1}{2}}.",
              "\\boxed{1} then \\boxed{\\boxed{2}", "\\\\boxed{5} \\boxed {6}", "\\boxed{a\\}b}"]
    fast = [answers._last_boxed(t) for t in texts]
    monkeypatch.setattr(boxed, "closing_braces", _closing_braces_full_scan)
    assert fast == [answers._last_boxed(t) for t in texts]


# --- the cost pre-check ----------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    "9^{9^{9^{9}}}", "10^{10^{7}}", "7^{123456789}", "0.5^{10^{10}}", "2^{-10^{10}}", "(10^{8})!", "\\binom{10^{9}}{10^{5}}",
    "\\frac{1}{10^{10^{9}}}", "x^{10^{10}}", "(x+1)^{1000}", "x + 9^{9^{9}}",
    "\\frac{1}{" * 16 + "2" + "}" * 16, "{" * 16 + "2" + "}" * 16, "(" * 30 + "1" + ")" * 30,
    "+".join(["1"] * 600),
])
def test_costly_answers_are_spotted(answer):
    from prm_annotate.grading.cost import too_costly

    assert too_costly(answer) is not None


@pytest.mark.parametrize("answer", ["10^{10^{6}}", "2^{100000}", "3^{3^{3}}", "e^{-x^{2}}", "(x+1)^{2}",
                                    "\\binom{10}{3}", "5!", "\\frac{\\sqrt{3}}{2}", "1.5^{3}", "x^2+2x+1"])
def test_affordable_answers_pass(answer):
    from prm_annotate.grading.cost import too_costly

    assert too_costly(answer) is None


def test_no_real_answer_is_too_costly():
    # Every gold and final answer of the shipped data (GSM8K, MATH-500, ProcessBench): none is
    # refused, so the pre-check changes no verdict on real data.
    from prm_annotate.grading.cost import too_costly

    root = TEST_DATA
    answers = [json.loads(line)["answer"] for line in (root / "math500" / "test.jsonl").read_text().splitlines()]
    for name in ("processbench-gsm8k-gold.jsonl", "processbench-math-gold.jsonl"):
        for line in (root / "grading" / name).read_text().splitlines():
            r = json.loads(line)
            answers += [r["answer"], extract_final_answer("\n\n".join(r["steps"])) or ""]
    normalised = [normalize_answer(str(a)) for a in answers if a]
    assert len(normalised) > 1000
    assert [a for a in normalised if too_costly(a)] == []
