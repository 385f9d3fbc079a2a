"""The grader's answer rules (prm_annotate/grading/answers.py), each kind in both directions: answers that
qualify their value, several-part answers, percentages, markup around an answer, families of
solutions with an integer parameter. Every case is written here from the rule it checks."""
from __future__ import annotations

import json

import pytest

from prm_annotate.boxed import find_boxes
from prm_annotate.grading.answers import (
    comparison_forms,
    extract_final_answer,
    hedged,
    normalize_answer,
)
from prm_annotate.grading.grader import Agreement, Grader
from testing.paths import TEST_DATA
from testing.verdict_files import control, olympiad_solutions, olympiad_split, unboxed_math, verdict_files


@pytest.fixture(scope="module")
def grader():
    with Grader(timeout=5.0) as g:
        yield g


# --- answers that say something other than the gold value ------------------------------------

# (gold, answer): each answer contains the gold number and means something else.
QUALIFIED = [
    # negated
    ("18", "not 18"), ("18", "never 18"), ("18", "definitely not 18"), ("18", "18 is wrong"),
    ("18", "18 is incorrect"), ("18", "18 is false"), ("18", "it is not 18"), ("18", "it cannot be 18"),
    ("18", "it can't be 18"), ("18", "it isn't 18"), ("18", "certainly no 18"), ("18", "not equal to 18"),
    ("18", "x \\neq 18"), ("18", "x != 18"), ("18", "\\ne 18"), ("18", "18 is not the answer"),
    ("18", "neither 18 nor 19"), ("18", "any number except 18"), ("18", "\\text{not } 18"),
    ("18", "anything but 18"),
    # hedged
    ("18", "18?"), ("18", "maybe 18"), ("18", "perhaps 18"), ("18", "possibly 18"), ("18", "probably 18"),
    ("18", "impossible to tell, maybe 18"), ("18", "18 or so"), ("18", "likely 18"), ("18", "I guess 18"),
    ("18", "it might be 18"), ("18", "18, I'm not sure"), ("18", "18, I think"), ("18", "unsure, 18"),
    ("18", "either 18 or 19"), ("18", "18 or 19"), ("18", "18 and 19"), ("18", "\\pm 18"),
    ("18", "18-ish"), ("18", "unknown, 18"),
    ("18", "18, not sure"), ("18", "18 (because I guess so)"), ("18", "18 (since maybe n = 2)"),
    ("18", "18 (because?)"),
    # conditional
    ("18", "18 if n is even"), ("18", "18 when n is odd"), ("18", "18 unless it rains"),
    ("18", "assuming no tax, 18"), ("18", "18 provided the shop is open"), ("18", "it depends; 18"),
    ("18", "18, otherwise 19"),
    # inequalities and bounds
    ("5", "at least 5"), ("5", "at most 5"), ("5", "less than 5"), ("5", "more than 5"),
    ("5", "greater than 5"), ("5", "fewer than 5"), ("5", "no more than 5"), ("5", "5 or more"),
    ("5", "5 or fewer"), ("5", "x > 5"), ("5", "x < 5"), ("5", "x \\ge 5"), ("5", "x \\geq 5"),
    ("5", "x \\le 5"), ("5", "x \\leq 5"), ("5", "5 \\le x"), ("5", "x \\lt 5"), ("5", "over 5"),
    ("5", "under 5"), ("5", "above 5"), ("5", "below 5"), ("5", "it exceeds 5"), ("5", "between 5 and 6"),
    ("5", "up to 5"), ("5", "5+"), ("5", "≥ 5"), ("5", "≤ 5"), ("5", "> 5"), ("5", "< 5"),
    # code
    ("18", "(lambda: 18)()"), ("18", "print(18)"), ("18", "return 18"), ("18", "eval('18')"),
    ("18", "int('18')"), ("18", "def f(): return 18"), ("18", "str(18)"), ("18", "[18][0]"),
    ("18", "{'answer': 18}"), ("18", "x == 18"), ("18", "lambda: 18"), ("18", "import math; 18"),
]

# How a response states the answer: every qualified answer is tried in each of these.
WRAPPERS = [
    "{}",
    "\\boxed{{{}}}",
    "So the answer is {}.",
    "Answer: {}",
    "Step 1: count.\n\n**{}**",
    "#### {}",
    "The answer is $\\boxed{{{}}}$.",
]


def test_the_catalogue_is_large():
    assert len(QUALIFIED) >= 50
    assert len({a for _, a in QUALIFIED}) == len(QUALIFIED)


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_qualified_answers_are_never_right(grader, wrapper):
    pairs = [(gold, wrapper.format(answer)) for gold, answer in QUALIFIED]
    verdicts = grader.grade_many(pairs)
    right = [(pair, v.final_answer) for pair, v in zip(pairs, verdicts) if v.correct]
    assert right == []
    # Control: the same wrapper around the bare gold number is right, so the wrapper is not what fails.
    assert all(v.correct for v in grader.grade_many([(g, wrapper.format(g)) for g in ("18", "5")]))


@pytest.mark.parametrize("gold, text", [
    ("18", "The answer is 18."), ("18", "She has 18 apples."), ("18", "$18"), ("18", "18 dollars"),
    ("18", "\\boxed{18}"), ("18", "\\boxed{\\$18.00}"), ("18", "Answer: 18"), ("18", "#### 18"),
    ("18", "**18**"), ("18", "So, Janet makes $18 every day at the farmers' market."),
    ("18", "The answer is 18, not 20."), ("18", "The answer is 18 (not 20)."), ("18", "x = 18"),
    ("18", "The total is 18 cookies."), ("18", "18 apples"), ("18", "The answer is approximately 18."),
    ("18", "A: 18"), ("18", "Therefore, 18 guests did not get a second hotdog."),
    ("18", "So, they would each have $18 if they share equally."), ("18", "Janet would save $18.00."),
    ("18", "She could buy 18 apples."), ("18", "A: 4/12=<<4/12=0.33>>0.33 foot, so 18"),
    ("18", "Answer: Verna received $18.00 in change."), ("5", "The least possible sum is 5."),
    ("\\text{No}", "\\boxed{\\text{No}}"), ("\\text{no}", "The answer is no."),
    ("x \\ge 5", "\\boxed{x \\geq 5}"), ("1 \\pm \\sqrt{2}", "\\boxed{1 \\pm \\sqrt{2}}"),
])
def test_answers_stating_the_value_stay_right(grader, gold, text):
    v = grader.grade(gold, text)
    assert v.correct is True, v


@pytest.mark.parametrize("gold, text", [
    ("20", "The answer is 18, not 20."), ("19", "18 is the answer, not 19"),
    ("18", "So she has 19 apples, not 18."),
])
def test_a_contrast_states_the_value_before_it(grader, gold, text):
    assert grader.grade(gold, text).correct is False


def test_hedged_only_counts_what_the_gold_does_not_say():
    assert hedged("not 18", "18") and not hedged("18", "18")
    assert not hedged("no", "\\text{no}") and hedged("no, 18", "18")
    assert not hedged("x < 3", "x < 3") and hedged("x < 3", "3")


def test_a_closing_sentence_keeps_the_words_that_bound_its_value():
    assert extract_final_answer("So the bottle must be at least 7 degrees.") == "be at least 7"  # the three words before the value
    assert hedged(extract_final_answer("So the bottle must be at least 7 degrees."))
    assert hedged(extract_final_answer("Is the answer 18?"))
    assert extract_final_answer("So she has 18 apples left.") == "18"


# --- answers with several parts ---------------------------------------------------------------

SEVERAL_PARTS = [
    # all solutions of an equation, one box each, in either order
    ("-1, -9", "So the solutions are $x=\\boxed{-1}$ and $x=\\boxed{-9}$.", True),
    ("-1, -9", "The solutions are \\(\\boxed{-9}\\) and \\(\\boxed{-1}\\).", True),
    ("-1, -9", "The solutions are $x = -1$ and $x = -9$.", True),
    ("-1, -9", "Final answer: x = -1 or x = -9", True),
    ("-1, -9", "The solutions are $x=\\boxed{-1}$ and $x=\\boxed{9}$.", False),
    ("-1, -9", "The only solution is \\boxed{-9}.", False),                     # one part missing
    ("-1, -9", "\\boxed{-1}, \\boxed{-9}, \\boxed{3}", False),                  # one part too many
    # several values
    ("5, 15", "The possible values are 5 and 15.", True),
    ("5, 15", "\\boxed{5}, \\boxed{15}", True),
    ("5, 15", "\\boxed{5, 15, 25}", False),
    ("5, 15", "The possible values are 5 and 16.", False),
    # several tuples
    ("(1, 2), (3, 4)", "The pairs are \\boxed{(1,2)} and \\boxed{(3,4)}.", True),
    ("(1, 2), (3, 4)", "The pairs are $(3,4)$ and $(1,2)$.", True),
    ("(1, 2), (3, 4)", "The pairs are \\boxed{(1,2)} and \\boxed{(4,3)}.", False),
    # a single gold: several different stated values are not it
    ("18", "\\boxed{18} and \\boxed{19}", False),
    ("18", "\\boxed{18}, \\boxed{18}", True),                                  # the same value twice
    # boxes separated by other words are successive attempts: the last one counts
    ("18", "First \\boxed{17}. Wait, recount: \\boxed{18}", True),
    ("17", "First \\boxed{17}. Wait, recount: \\boxed{18}", False),
    ("(2, 3), (3, 2)", "The solutions are \\((x, y) = (2, 3)\\) and \\((x, y) = (3, 2)\\).", True),
    ("(2, 3), (3, 2)", "The solutions are \\((x, y) = (2, 3)\\) and \\((x, y) = (2, 3)\\).", False),
    ("-1, -9", "\\[\n\\boxed{-1 \\text{ and } -9}\n\\]", True),
    ("-1, -9", "\\[\n\\boxed{-1 \\text{ and } 9}\n\\]", False),
    # a tuple is ordered
    ("(1, 2)", "\\boxed{(2, 1)}", False),
    ("(1, 2)", "\\boxed{(1, 2)}", True),
]


# --- percentages --------------------------------------------------------------------------------

@pytest.mark.parametrize("gold, answer, correct", [
    ("0.625", "62.5%", True), ("0.625", "62.5\\%", True), ("0.625", "62.5 percent", True),
    ("62.5", "62.5%", True), ("62.5\\%", "62.5", True), ("62.5\\%", "0.625", True),
    ("62.5\\%", "62.5\\%", True), ("\\frac{5}{8}", "62.5\\%", True),
    ("0.625", "62.5", False), ("62.5", "0.625", False), ("62.5\\%", "0.625\\%", False),
    ("62.5\\%", "6.25\\%", False), ("0.625", "6.25\\%", False), ("0.625", "0.625\\%", True),
    ("28", "0.28", False), ("28\\%", "28", True), ("100\\%", "2", False),
])
def test_percentages(grader, gold, answer, correct):
    v = grader.grade(gold, f"The answer is $\\boxed{{{answer}}}$.")
    assert v.correct is correct and v.error is None, v


def test_the_percent_rule_forms():
    assert comparison_forms("0.625", "62.5%") == [("0.625", "62.5"), ("0.625", "0.625")]
    assert comparison_forms("62.5%", "62.5%") == [("62.5", "62.5")]
    assert comparison_forms("28", "0.28") == [("28", "0.28")]
    assert normalize_answer("62.5 percent") == normalize_answer("62.5\\%") == "62.5%"


# --- markup around an answer --------------------------------------------------------------------

MARKUP = [
    ("1", "**Final answer: \\(1\\)**", True),
    ("1", "Therefore the answer is \\(1\\)**.", True),
    ("1", "**The answer is \\( 1 \\).**", True),
    ("1", "Thus the minimum value is \\(1\\).", True),
    ("1", "Hence the number of such functions is \\( 1 \\).", True),
    ("1", "### Final Answer\nThe value is \\(\\boxed{1}\\)**", True),
    ("1", "**Final answer: \\(2\\)**", False),
    ("1", "Therefore the answer is \\(12\\)**.", False),
    ("1", "Thus the minimum value is \\(-1\\).", False),
    ("\\frac{1}{2}", "So the probability is __\\(\\frac12\\)__.", True),
]


# --- answers written in prose (olympiad-level responses that end without a box) ------------------

# A closing sentence that ends on a math environment it states gives that environment, whatever
# numbers its words name before it; one that opens with a word is a sentence, not a bare answer.
PROSE_ENDINGS = [
    ("\\frac{11}{32}", "With n = 5 the probability is \\(\\frac{11}{32}\\).", True),
    ("5", "With n = 5 the probability is \\(\\frac{11}{32}\\).", False),
    ("\\frac{11}{32}", "With n = 5, the probability is approximately \\( \\frac{11}{32} \\).", True),
    ("\\frac{11}{32}", "With n = 5 we get \\( \\frac{11}{32} \\).", True),
    ("\\frac{11}{32}", "With n = 5 the probability is given by \\( \\frac{11}{32} \\).", True),
    ("\\frac{2}{5}", "So 4 pairs give 0. Hence the probability that the product of 2 of them is 0 is $\\frac{2}{5}$.", True),
    ("0", "So 4 pairs give 0. Hence the probability that the product of 2 of them is 0 is $\\frac{2}{5}$.", False),
    ("4.4\\%", "Rounded, 4.44 is 4.4. Therefore, the value of \\(r\\) is \\(4.4\\%\\).", True),
    ("1, 2", "The roots are \\(1\\) and \\(2\\).", True),                       # a list, as before
    ("1, 2", "Hence $S = \\{1, 2\\}$.", True),
    ("1, 2, 3", "Therefore, $n \\in \\{1,2,3\\}$.", True),
    ("1, 2", "Hence $S = \\{1, 3\\}$.", False),
    # a gloss after the environment; a display over several lines; a value named on its right
    ("\\phi + 1", "Thus the sum of the roots is \\(\\phi + 1\\), where \\(\\phi\\) is the golden ratio.", True),
    ("1", "Thus the sum of the roots is \\(\\phi + 1\\), where \\(\\phi\\) is the golden ratio.", False),
    ("\\frac{1+\\sqrt{5}}{2}", "Since \\( u = x^2 \\), we have:\n\\[\nx^2 = \\frac{1 + \\sqrt{5}}{2}\n\\]", True),
    ("2", "Since \\( u = x^2 \\), we have:\n\\[\nx^2 = \\frac{1 + \\sqrt{5}}{2}\n\\]", False),
    ("3", "Solving for \\( A_{4} \\):\n\\[ 1 = \\frac{A_{4}}{3} \\]\n\\[ 3 = A_{4} \\]", True),
    ("4", "Solving for \\( A_{4} \\):\n\\[ 1 = \\frac{A_{4}}{3} \\]\n\\[ 3 = A_{4} \\]", False),
]


# A "±" stands for two values, on either side: right against both, wrong against one.
PLUS_MINUS = [
    ("10+2\\sqrt{17}, 10-2\\sqrt{17}", "The solutions are $x = 10 \\pm 2\\sqrt{17}$.", True),
    ("10 \\pm 2 \\sqrt{17}", "\\boxed{10 - 2\\sqrt{17}, 10 + 2\\sqrt{17}}", True),
    ("-18, 18", "\\boxed{\\pm 18}", True),
    ("-3, 3", "\\boxed{x = \\pm 3}", True),
    ("\\frac{-3+\\sqrt{5}}{2}, \\frac{-3-\\sqrt{5}}{2}", "\\boxed{x = \\frac{-3 \\pm \\sqrt{5}}{2}}", True),
    ("1-\\sqrt2, 1+\\sqrt2", "So \\(x = 1 \\mp \\sqrt{2}\\).", True),
    ("-1, 1, 2", "\\boxed{\\pm 1, 2}", True),
    ("(1,2),(-1,2)", "\\boxed{(\\pm 1, 2)}", True),
    ("18", "\\boxed{\\pm 18}", False),                                          # one of the two
    ("\\pm 18", "\\boxed{18}", False),
    ("10+2\\sqrt{17}", "The solutions are $x = 10 \\pm 2\\sqrt{17}$.", False),
    ("10+2\\sqrt{17}, 10-2\\sqrt{17}", "\\boxed{10 \\pm \\sqrt{17}}", False),
    ("-1, 1, 2", "\\boxed{\\pm 1, 3}", False),
]


# A set of reals in either notation, with any letter for the variable; a bound on one value is
# still no value.
INTERVALS = [
    ("(2, \\infty)", "\\boxed{x > 2}", True),
    ("(2, \\infty)", "Therefore, the inequality holds for all \\( x > 2 \\).", True),
    ("x > 2", "\\boxed{(2, \\infty)}", True),
    ("[2, \\infty)", "\\boxed{k \\geq 2}", True),
    ("k \\geqslant 2", "\\boxed{n \\ge 2}", True),
    ("(-\\infty, -1) \\cup (2, \\infty)", "\\boxed{x < -1 \\text{ or } x > 2}", True),
    ("(-\\infty, -1) \\cup (2, \\infty)", "So $x < -1$ or $x > 2$, that is \\(x \\in (-\\infty, -1) \\cup (2, \\infty)\\).", True),
    ("[1, 2]", "Thus \\( 1 \\leq x \\leq 2 \\).", True),
    ("(0, 4]", "So the range of \\(t\\) is \\( 0 < t \\leq 4 \\).", True),
    ("(1, 2)", "\\boxed{2 > x > 1}", True),
    ("-\\frac{9}{2} \\leq x \\leq -2", "\\boxed{[-\\frac{9}{2}, -2]}", True),
    ("(0, 4]", "So the range of \\(t\\) is \\( 0 < t < 4 \\).", False),               # the end point
    ("(-\\infty, -1) \\cup (2, \\infty)", "\\boxed{x < -1 \\text{ or } x > 3}", False),
    ("(1, 2)", "\\boxed{x > 1}", False),
    ("(5, \\infty)", "\\boxed{x \\geq 5}", False),
    ("(2, \\infty)", "\\boxed{x > 2 \\text{ if } a > 0}", False),                      # a condition
    ("5", "\\boxed{x \\geq 5}", False),                                               # a bound on 5
]


def test_inequalities_in_interval_notation():
    from prm_annotate.grading.answers import _interval_of

    assert _interval_of("x > 2") == "(2, \\infty)"
    assert _interval_of("x \\le -1") == "(-\\infty, -1]"
    assert _interval_of("3 \\geq y") == "(-\\infty, 3]"
    assert _interval_of("0 < t \\le 4") == "(0, 4]"
    assert _interval_of("x < -1, x > 2") == "(-\\infty, -1) \\cup (2, \\infty)"
    assert _interval_of("1 < x > 0") is None and _interval_of("x < y") is None
    assert _interval_of("x > 1, y > 2") is None and _interval_of("x \\ne 2") is None
    assert _interval_of("x > 1 and x < 3") is None  # an intersection: not read


# A solution set written out in braces is the list of its elements.
BRACED_SETS = [
    ("(1,2)", "\\boxed{\\{(1,2)\\}}", True),
    ("(2, 3)", "So the only solution is \\( \\{(2, 3)\\} \\).", True),
    ("1, 2", "\\boxed{\\lbrace 1, 2 \\rbrace}", True),
    ("\\{1, 2\\}", "The solutions are $x = 2$ and $x = 1$.", True),
    ("(1, 2), (2, 1)", "The solution set is \\(\\{(2, 1), (1, 2)\\}\\).", True),
    ("-1, 1", "\\boxed{\\{\\pm 1\\}}", True),
    ("(1,2)", "\\boxed{\\{(1,2), (2, 1)\\}}", False),                                 # one too many
    ("(1,2)", "\\boxed{\\{(2,1)\\}}", False),
    ("1, 2, 3", "\\boxed{\\{1, 2\\}}", False),
]


def test_a_set_given_by_a_condition_is_left_alone():
    assert normalize_answer("\\{n \\mid n > 2\\}") == "\\{n \\mid n > 2\\}"
    assert normalize_answer("\\{1\\}, \\{2\\}") == "\\{1\\}, \\{2\\}"
    assert normalize_answer("\\{(1, 2)\\}") == "(1, 2)"


# Mathematics written with Unicode signs is the LaTeX it stands for.
UNICODE_SIGNS = [
    ("\\sqrt{3}", "The total area is 4 * (√3 / 4) = √3 square units.", True),
    ("2\\sqrt{3}", "The side is 2√3 cm.", True),
    ("2\\sqrt{3}", "The side is √(12).", True),
    ("\\frac{\\pi}{2}", "The angle is π/2.", True),
    ("-5", "The answer is −5.", True),
    ("[2, \\infty)", "The answer is x ≥ 2.", True),
    ("3", "So the answer is √3.", False),
    ("\\sqrt{3}", "The total area is 4 * (√3 / 4) = 3 square units.", False),
    ("\\pi", "The angle is π/2.", False),
    ("2", "The answer is x ≥ 2.", False),
]


# The letter of a function's argument is a bound name when both sides define functions.
ARGUMENT_NAMES = [
    ("f(x)=1", "\\boxed{f(y) = 1}", True),
    ("f(n)=n", "\\boxed{f(m)=m}", True),
    ("a_n = 2^n - 1", "\\boxed{a_k = 2^k - 1}", True),
    ("$f(n)=n$, $g(n)=1$", "\\boxed{f(m) = m, g(m) = 1}", True),
    ("f(x)=2x", "\\boxed{f(n) = 2m}", False),
    ("f(x)=x", "\\boxed{f(y) = y^2}", False),
    ("f(x) = x", "\\boxed{f(y) = x}", False),                                          # x is taken
]


# A count in words is its number.
NUMBER_WORDS = [
    ("5", "Nasim can buy 24, 25, 27, 28 and 29 cards, making the answer **five integers**.", True),
    ("5", "The answer is exactly five.", True),
    ("12", "So the answer is twelve.", True),
    ("5", "The answer is six.", False),
    ("2", "So the answer is one.", False),
]


# --- prose endings of the second development set (MATH level-5 solutions without their boxes, and
# the ProcessBench MATH responses of processbench-math-rest-gold.jsonl): one list per rule --------

# Words before "is" that bound or negate belong to its subject; a hedge, a modal or a bound after
# the verb still qualifies the value.
SUBJECT_OF_IS = [
    ("\\frac{11}{32}", "The probability that Blaise will win more games than Pierre is \\( \\frac{11}{32} \\).", True),
    ("\\frac{73}{100}", "So the probability that the product is greater than 10 is $1-27/100=\\frac{73}{100}$.", True),
    ("\\frac{69}{125}", "Hence the probability that a cube has no paint is $\\frac{69}{125}$.", True),
    ("28", "The sum of the integers $n$ with $n^2 < 50$ is $28$.", True),
    ("10", "So the probability that the product is greater than 10 is at least $\\frac{1}{2}$.", False),
    ("\\frac{1}{2}", "So the probability that the product is greater than 10 is at least $\\frac{1}{2}$.", False),
    ("18", "I think it is $18$.", False),
    ("18", "So the value cannot be $18$.", False),
    ("18", "So the answer might be $18$.", False),
    ("18", "So the count is not $18$.", False),
    ("18", "The number of such pairs is less than $18$.", False),
]

# In a list of equations, one for the things named before it is the value they were found for;
# equations for the same or for new things stay a list.
DERIVED_VALUES = [
    ("23", "Therefore, $a=3$, $b=-4$, $c=24$, and $a+b+c = 3-4+24 = 23$.", True),
    ("\\sqrt{6}", "So $x^2y^2 = 6$ and $xy = \\sqrt{6}$.", True),
    ("2015", "and so $b+1=2016$ or $b=2015$ is the smallest value that works.", True),
    ("3", "Therefore, $a=3$, $b=-4$, $c=24$, and $a+b+c = 3-4+24 = 23$.", False),
    ("-1, -9", "So $x = -1$ and $x = -9$.", True),
    ("x=1, y=2", "So $x = 1$ and $y = 2$.", True),
    ("2", "So $x = 1$ and $y = 2$.", False),                      # a new name: two parts, not one
    ("3", "Thus $n = 3$ or $n = 4$.", False),
]

# An equation whose left side is an expression in variables is read whole.
EQUATIONS = [
    ("x^2 + y^2 = 13", "Thus, the equation of the circle is:\n\\[ x^2 + y^2 = 13 \\]", True),
    ("13", "Thus, the equation of the circle is:\n\\[ x^2 + y^2 = 13 \\]", True),
    ("x^2 + y^2 = 12", "Thus, the equation of the circle is:\n\\[ x^2 + y^2 = 13 \\]", False),
    ("\\frac{x^2}{16} - \\frac{y^2}{9} = 1", "so \\[\\frac{x^2}{16} - \\frac{y^2}{9} = 1.\\]", True),
    ("1 - x", "So the function is $f(x) = -x + 1$.", True),      # a name: its value
]

# A remark after the answer is not where the answer is.
REMARK_SENTENCES = [
    ("4", "Thus the missing digit is $45 - 41 = 4$. Note that the numbers $13, 25, 86,$ and $97$ sum to $221$.", True),
    ("221", "Thus the missing digit is $45 - 41 = 4$. Note that the numbers $13, 25, 86,$ and $97$ sum to $221$.", False),
    ("44", "Therefore, $17^{-1} \\equiv 44 \\pmod{83}$.\n\nWe may check our answer: $17\\cdot 44 = 748 = 9\\cdot 83+1$, so our answer is correct.", True),
    ("\\frac{5}{36}", "so the desired probability is $\\dfrac{5}{36}$.\n\n(Special thanks to 5849206328x for this solution.)", True),
    ("23", "Therefore, $n = 23$.  Note that $n = 23$ is possible, because she can omit 17 and 18 to get the sum $276 - 35 = 241$.", True),
    ("7", "Note that $x = 7$.", True),                           # nothing but remarks: the last one
]

# Other ways of stating one value: a residue, an exact value with its rounding, a word in \text{},
# the same set in two notations, a restatement.
STATED_TWICE = [
    ("3", "Thus $29^{13} - 5^{13} \\equiv 1+2 \\equiv 3 \\pmod 7$.", True),
    ("2", "Thus $29^{13} - 5^{13} \\equiv 1+2 \\equiv 3 \\pmod 7$.", False),
    ("\\frac{3}{7}", "As $t$ must be positive, $t = \\frac{3}{7} \\approx 0.43$.", True),
    ("0.43", "As $t$ must be positive, $t = \\frac{3}{7} \\approx 0.43$.", True),
    ("0.42", "As $t$ must be positive, $t = \\frac{3}{7} \\approx 0.43$.", False),
    ("\\frac{4}{7}", "As $t$ must be positive, $t = \\frac{3}{7} \\approx 0.43$.", False),
    ("\\text{Monday}", "This is 8 days away from Sunday, so the day of the week is $\\text{Monday}$.", True),
    ("\\text{Tuesday}", "This is 8 days away from Sunday, so the day of the week is $\\text{Monday}$.", False),
    ("24", "So the area is 24 $\\text{ cm}$.", True),            # a word after a number is its unit
    ("[-2, 7]", "so $-2 \\le x \\le 7$ and $x \\in [-2,7]$.", True),
    ("[-2, 8]", "so $-2 \\le x \\le 7$ and $x \\in [-2,7]$.", False),
    ("(6,7)", "Therefore, our final answer is $6<y<7$, which is written in interval notation as $(6,7)$.", True),
    ("(-\\infty, 2) \\cup (3, \\infty)", "So the domain is $x<2 \\text{ or } x>3$, or $x \\in (-\\infty, 2) \\cup (3, \\infty)$ in interval notation.", True),
    ("2", "So $x = 1$, or $x = 2$.", False),                     # "or" alone is an alternative
    ("14400", "for a total of $5! \\times 5! = 14,\\!400$ arrangements.", True),
    ("120", "So $5!=120$.", True),
    ("\\begin{pmatrix} 0 & 1 \\\\ 1 & 0 \\end{pmatrix}", "\\[\\boxed{\\begin{pmatrix}0&1\\\\1&0\\end{pmatrix}}\\]", True),
    ("\\begin{pmatrix} 0 & 1 \\\\ 1 & 0 \\end{pmatrix}", "\\[\\boxed{\\begin{pmatrix}0&1\\\\0&1\\end{pmatrix}}\\]", False),
]

# --- prose endings of the olympiad-level development set (the human solutions of Omni-MATH-Rule and
# OlympiadBench on problems no verdict file has: testing/verdict_files.py, `olympiad_solutions`) ----

# A plain number that ends the closing sentence, or is followed only by what it counts, after a
# verb or noun that states it, is the answer; "in", "by", "to" name other numbers.
CLOSING_NUMBERS = [
    ("96", "This is the series evaluated at $x=-\\frac{1}{2}$, so the solution is 96.", True),
    ("-\\frac{1}{2}", "This is the series evaluated at $x=-\\frac{1}{2}$, so the solution is 96.", False),
    ("8", "Since $d$ is positive, $d=16$, and the circumradius is 8.", True),
    ("16", "Since $d$ is positive, $d=16$, and the circumradius is 8.", False),
    ("62", "Dividing by $58$ removes one factor $2$, making the answer 62.", True),
    ("24", "There are $6$ colorings in Case 1 and $6+6+6$ in Case 2, for a total of 24 colorings.", True),
    ("335", "The second case gives $\\binom{3}{2}+2=5$ sets. Thus there are 335 sets in total.", True),
    ("26", "In total, they dig $12+14=26$ holes in 21 days.", True),
    ("21", "In total, they dig $12+14=26$ holes in 21 days.", False),
    ("1514", "So there are $1009+505=1514$ integers for which the product is less than or equal to 0.", True),
    ("\\frac{2}{3}", "This is least when $b=c=1$, for a value of $\\frac{2}{3}$.", True),
    ("141", "Substituting gives $K=47 \\sqrt{3}$, for an answer of 141.", True),
    ("376", "There are $13 \\cdot 27$ of the first type and 25 of the latter, for a total of 376 such sequences.", True),
    ("25", "There are $13 \\cdot 27$ of the first type and 25 of the latter, for a total of 376 such sequences.", False),
]

# A derivation aligned over several rows is one chain: its last right side is the value.
ALIGNED_ROWS = [
    ("\\frac{-11-4i}{3}", "Plugging in, $$\\begin{aligned} (ab+bc+ca)^{2} & =\\frac{1}{3}\\left[(x+y+z)^{2}-2\\right] "
     "\\\\ & =\\frac{-11-4i}{3} \\end{aligned}$$", True),
    ("\\frac{1}{216}", "Now $$\\begin{aligned} f(5) & =2 f(4)-f(3) \\\\ & =\\frac{1}{6 \\cdot 36} \\\\ & =\\frac{1}{216} . "
     "\\end{aligned}$$", True),
    ("\\frac{1}{36}", "Now $$\\begin{aligned} f(5) & =2 f(4)-f(3) \\\\ & =\\frac{1}{6 \\cdot 36} \\\\ & =\\frac{1}{216} . "
     "\\end{aligned}$$", False),
]

# A bold phrase followed by a colon heads what comes after it; it is no answer.
BOLD_HEADINGS = [
    ("16", "3. **Counting the positions for \\(P\\)**:\n   By symmetry there are \\(4 \\times 4 = 16\\) of them.\n\n"
     "Thus, the number of points is:\n\\[\n16.\n\\]", True),
    ("2016", "5. **Checking the last factor**:\n   hence:\n\n\\[\nk = 2016\n\\]", True),
    ("2015", "5. **Checking the last factor**:\n   hence:\n\n\\[\nk = 2016\n\\]", False),
]

# Units in upright type after a number, bold type, a computation written out to its value, words
# that lead to the answer after "the answer is".
WRITTEN_OUT = [
    ("600", "Therefore, $600 \\mathrm{~L}$ needs to be moved from Tank A to Tank B.", True),
    ("\\frac{600}{7}", "Therefore, the trains travel at $\\frac{600}{7} \\mathrm{~km} / \\mathrm{h}$.", True),
    ("3+2i", "\\boxed{3+2\\mathrm{i}}", True),                  # an upright i is no unit
    ("3", "\\boxed{3+2\\mathrm{i}}", False),
    ("108", "Therefore, $ef=9 \\cdot 12=\\mathbf{1 0 8}$.", True),
    ("100800", "It follows that the answer is $4 \\times 5 \\times 7!=100800$.", True),
    ("3025", "The answer is thus $1+\\binom{9}{5} \\cdot 4!=3025$.", True),
    ("3024", "The answer is thus $1+\\binom{9}{5} \\cdot 4!=3025$.", False),
    ("\\frac{217}{900}", "The answer is therefore $\\frac{217}{900}$.", True),
    ("\\sqrt{291}", "By symmetry the answer is equal to $$\\sqrt{3}(x+y)=\\sqrt{291} .$$ It is easy to check both cases.", True),
]

# Values of several things in one environment are an answer in parts; a clause before "so",
# "therefore" does not qualify the value after it.
PARTS_AND_CLAUSES = [
    ("2, -1, -18", "Thus, $a=2, h=-1$, and $k=-18$.", True),
    ("-18", "Thus, $a=2, h=-1$, and $k=-18$.", False),
    ("2400, 1350, 864", "Therefore, the possible values for the area are 2400, 1350, and 864.", True),
    ("\\frac{9}{11}", "The quadratic factor has no zeroes, therefore $x=\\frac{9}{11}$ is the only solution.", True),
    ("\\frac{467}{8}", "To compute the average now, we just add it up to get $\\frac{467}{8}$.", True),
    # the phrase the other way round
    ("\\frac{7}{3}", "Solving, we get $E(1, N)=\\frac{7}{3}$, which is our answer, as James starts there having gone left 0 times.", True),
    ("0", "Solving, we get $E(1, N)=\\frac{7}{3}$, which is our answer, as James starts there having gone left 0 times.", False),
    ("18", "So $18$ is the answer.", True),
    # a bound stated as "the answer is" in the middle of the argument, then the value it closes on
    ("1009", "So the answer is at most 1009 by the count above. We now build an example with pairs. "
     "Thus, the maximum possible number of items is 1009.", True),
]

# The same rules never read a hedge, a bound or a negation as the value.
OLYMPIAD_HEDGES = [
    ("96", "This is the series at $x=2$, so the solution is maybe 96."),
    ("96", "This is the series at $x=2$, so the solution is 96 or 97."),
    ("38", "Likewise at most 19 fit on white squares, for a total of at most 38 bishops."),
    ("24", "There are $6$ colorings in Case 1, for a total of at least 24 colorings."),
    ("8", "Since $d$ is positive, $d=16$, and the circumradius is not 8."),
    ("8", "Since $d$ is positive, $d=16$, and the circumradius is 8 or 9."),
    ("100800", "It follows that the answer is perhaps $4 \\times 5 \\times 7!=100800$."),
    ("\\frac{217}{900}", "The answer is therefore maybe $\\frac{217}{900}$."),
    ("\\frac{9}{11}", "The quadratic factor has no zeroes, so maybe $x=\\frac{9}{11}$."),
    ("600", "Therefore, at least $600 \\mathrm{~L}$ needs to be moved."),
    ("\\frac{467}{8}", "We add it up to get at most $\\frac{467}{8}$."),
    ("\\frac{-11-4i}{3}", "$$\\begin{aligned} (ab+bc+ca)^{2} & \\le \\frac{-11-4i}{3} \\end{aligned}$$"),
    ("-18", "Thus, $a=2, h=-1$, and $k=-18$ or $k=18$."),
    ("1009", "So the answer is at most 1009 by the count above. Thus, the maximum is perhaps 1009."),
    ("18", "So maybe $18$ is the answer."), ("18", "I think $18$ is the answer."), ("18", "So $18$ is not the answer."),
    ("1009", "So the answer is at most 1009 by the count above. Thus, the maximum is 1009 or 1010."),
]


@pytest.mark.parametrize("gold, text", OLYMPIAD_HEDGES)
def test_olympiad_prose_rules_reject_hedges(grader, gold, text):
    assert grader.grade(gold, text).correct is False


# Answers that offer two values are hedges, whichever the gold: never right.
HEDGED_ALTERNATIVES = [
    ("3", "The answer is 3 or 4."), ("4", "The answer is 3 or 4."),
    ("2", "The answer is either 2 or 5."), ("5", "The answer is either 2 or 5."),
    ("3", "So \\boxed{3} ... or maybe \\boxed{4}"), ("4", "So \\boxed{3} ... or maybe \\boxed{4}"),
    ("3", "So the answer is $\\boxed{3}$, or maybe $\\boxed{4}$."),
    ("4", "So the answer is $\\boxed{3}$, or maybe $\\boxed{4}$."),
    ("4", "\\boxed{3}, or perhaps \\boxed{4}"), ("4", "It is \\boxed{3}. Possibly \\boxed{4}."),
    ("3", "It is $3$ or $4$."), ("4", "It is $3$ or $4$."),
    ("5", "Hence the probability that more than 2 are red is either $5$ or $6$."),
]


@pytest.mark.parametrize("gold, text", HEDGED_ALTERNATIVES)
def test_two_values_offered_are_a_hedge(grader, gold, text):
    assert grader.grade(gold, text).correct is False


def test_a_box_that_corrects_the_one_before_still_counts(grader):
    # Only a hedge between the boxes makes them alternatives; a correction keeps the last.
    assert grader.grade("18", "First \\boxed{17}. Wait, recount: \\boxed{18}").correct is True
    assert grader.grade("18", "First \\boxed{17}. Maybe I slipped; recounting gives \\boxed{18}").correct is True


# --- families of solutions with an integer parameter -------------------------------------------

FAMILY = "\\frac{\\pi}{6} + k\\pi, \\frac{5\\pi}{6} + k\\pi \\text{ for } k \\in \\mathbb{Z}"


FAMILIES = [
    (FAMILY, "\\boxed{x=\\frac{1}{6}\\pi+\\pi k, x=\\frac{5}{6}\\pi+\\pi k}", True),
    (FAMILY, "\\boxed{x=\\frac{\\pi}{6}+\\pi n, x=\\frac{5\\pi}{6}+\\pi n, n \\in \\mathbb{Z}}", True),
    (FAMILY, "The solutions are $x = \\frac{5\\pi}{6} + m\\pi$ and $x = \\frac{\\pi}{6} + m\\pi$ where $m$ is an integer.", True),
    (FAMILY, "\\boxed{\\frac{\\pi}{6} + n\\pi, \\frac{5\\pi}{6} + n\\pi}", True),
    ("\\frac{\\pi}{4} + \\frac{k\\pi}{2}, k \\in \\mathbb{Z}", "\\boxed{x = \\frac{\\pi}{4} + \\frac{\\pi n}{2} \\text{ for any integer } n}", True),
    (FAMILY, "\\boxed{x=\\frac{\\pi}{6}+2\\pi k, x=\\frac{5\\pi}{6}+2\\pi k}", False),      # half the family
    (FAMILY, "\\boxed{x=\\frac{\\pi}{6}+\\pi k}", False),                                      # one branch
    (FAMILY, "\\boxed{x=\\frac{\\pi}{3}+\\pi n, x=\\frac{5\\pi}{6}+\\pi n, n \\in \\mathbb{Z}}", False),
    ("2k\\pi, k \\in \\mathbb{Z}", "\\boxed{2\\pi n, n \\in \\mathbb{Z}}", True),
    ("2k\\pi, k \\in \\mathbb{Z}", "\\boxed{\\pi n, n \\in \\mathbb{Z}}", False),
]

# Remarks after the value that do not change it: a reason, the domain where it holds.
REMARKS = [
    ("10", "The answer is 10 (since x must be at least 3).", True),
    ("3", "The answer is 10 (since x must be at least 3).", False),
    ("10", "The answer is 10, because 3 + 7 = 10.", True),
    ("f(n)=n", "\\boxed{f(n) = n \\text{ for all } n \\ge 1}", True),
    ("f(n)=n", "\\boxed{f(n) = 2n \\text{ for all } n \\ge 1}", False),
    ("f(x)=x", "\\boxed{f(x) = x \\text{ for all real } x}", True),
    ("f(x)=x", "\\boxed{f(x) = x^2 \\text{ for all real } x}", False),
]

# Comparisons the grader makes on real answers, both directions.
BASICS = [
    ("18", "So she makes \\boxed{18} dollars.", True),
    ("18", "So she makes \\boxed{\\$18.00}.", True),
    ("18", "The answer is 19.", False),
    ("\\frac{1}{2}", "\\boxed{0.5}", True),
    ("\\frac{270}7", "\\boxed{\\frac{270}{7}}", True),
    ("-13x+3", "\\boxed{3 - 13x}", True),
    ("11", "so \\boxed{x = 11}", True),
    ("(2,\\infty)", "\\boxed{(2, \\infty)}", True),
    ("\\cot x", "\\boxed{\\frac{\\cos x}{\\sin x}}", True),
    ("10", "The answer is 10%.", True),
    ("65960", "\\boxed{\\$65,760}", False),
]


@pytest.mark.parametrize("gold, text, correct", [
    pytest.param(*case, id=f"{kind}-{i}") for kind, cases in
    (("basics", BASICS), ("parts", SEVERAL_PARTS), ("markup", MARKUP), ("family", FAMILIES),
     ("remark", REMARKS), ("prose", PROSE_ENDINGS), ("pm", PLUS_MINUS),
     ("interval", INTERVALS), ("set", BRACED_SETS),
     ("unicode", UNICODE_SIGNS), ("argument", ARGUMENT_NAMES),
     ("words", NUMBER_WORDS), ("subject", SUBJECT_OF_IS), ("derived", DERIVED_VALUES),
     ("equation", EQUATIONS), ("remark-sentence", REMARK_SENTENCES), ("twice", STATED_TWICE),
     ("closing-number", CLOSING_NUMBERS), ("aligned", ALIGNED_ROWS), ("bold-heading", BOLD_HEADINGS),
     ("written-out", WRITTEN_OUT), ("parts-clauses", PARTS_AND_CLAUSES))
    for i, case in enumerate(cases)])
def test_grade(grader, gold, text, correct):
    v = grader.grade(gold, text)
    assert v.correct is correct and v.error is None, v


def test_the_parameter_is_renamed_only_when_it_is_one():
    assert normalize_answer("x = \\frac{\\pi}{4} + \\frac{m\\pi}{2} \\text{ where } m \\text{ is an integer}") \
        == "x = \\frac{\\pi}{4} + \\frac{k\\pi}{2}"
    assert normalize_answer("n + 1") == "n + 1"                  # no π, no declaration: a variable
    assert normalize_answer("a n \\pi + m \\pi") == "a n \\pi + m \\pi"  # two candidates: left alone


# --- evidence from outside the dev files ----------------------------------------------------------

MATH_VERIFY_CASES = TEST_DATA / "math_verify" / "published_cases.jsonl"


def test_math_verify_published_cases(grader):
    # Math-Verify's own test pairs (tests/data/SOURCES.md), graded by the grader and by plain
    # math-verify (its own extraction on the whole prediction) in this run: the grader agrees with
    # the published verdicts at least as often, and accepts wrongly no more often.
    rows = [json.loads(line) for line in MATH_VERIFY_CASES.read_text().splitlines()]
    assert len(rows) >= 150
    pairs = [(r["gold"], r["prediction"]) for r in rows]
    expected = [r["expected"] for r in rows]
    ours = Agreement.of([v.correct for v in grader.grade_many(pairs)], expected)
    plain = Agreement.of([v.correct for v in grader.plain_many(pairs)], expected)
    assert ours.agree >= plain.agree, f"ours {ours}, plain math-verify {plain}"
    assert ours.false_accepts <= plain.false_accepts, f"ours {ours}, plain math-verify {plain}"


# The files the grader's first rules were written from, where it agrees with >= 99% of the verdicts.
FIRST_DEV_FILES = ("tests/data/grading/processbench-gsm8k-gold.jsonl",
                   "tests/data/grading/processbench-math-gold.jsonl", "data/gsm8k/example_model_solutions.jsonl")
# False accepts of the grader on each verdict file without the rules for prose endings (a fixed baseline),
# measured on the same files: no rule may add one.
FALSE_ACCEPTS_BEFORE = {
    "tests/data/grading/processbench-gsm8k-gold.jsonl": 2,
    "tests/data/grading/processbench-math-gold.jsonl": 1,
    "tests/data/grading/processbench-math-rest-gold.jsonl": 6,  # measured before issue #39's rules
    "tests/data/grading/processbench-olympiadbench-gold.jsonl": 2,
    "tests/data/grading/processbench-omnimath-gold.jsonl": 1,
    "data/gsm8k/example_model_solutions.jsonl": 0,
}
# The olympiad-level split's false accepts before those rules.
FALSE_ACCEPTS_BEFORE_SPLIT = {"dev": 2, "held-out": 1}


@pytest.fixture(scope="module")
def verdicts(grader):
    """Response id -> (the grader's verdict, plain math-verify's), for every response of every
    verdict file, both computed in this run."""
    rows = [row for rows in verdict_files().values() for row in rows]
    pairs = [(gold, text) for _, gold, text, _ in rows]
    ours, plain = grader.grade_many(pairs), grader.plain_many(pairs)
    return {rid: (o.correct, p.correct) for (rid, *_), o, p in zip(rows, ours, plain)}


def agreements(verdicts, rows) -> tuple[Agreement, Agreement]:
    flags = [flag for *_, flag in rows]
    return (Agreement.of([verdicts[rid][0] for rid, *_ in rows], flags),
            Agreement.of([verdicts[rid][1] for rid, *_ in rows], flags))


def test_every_verdict_file_has_a_false_accept_ceiling():
    assert set(FALSE_ACCEPTS_BEFORE) == set(verdict_files())


@pytest.mark.parametrize("name", sorted(verdict_files()))
def test_agreement_on_every_verdict_file(verdicts, name):
    # Every file in the repository with reference verdicts: the grader agrees with them at least as
    # often as plain math-verify on the same responses, computed here, and accepts wrongly no more
    # often than before the prose-ending rules; >= 99% on the first dev files.
    ours, plain = agreements(verdicts, verdict_files()[name])
    assert ours.false_accepts <= FALSE_ACCEPTS_BEFORE[name], f"{name}: ours {ours}"
    assert ours.agree >= plain.agree, f"{name}: ours {ours}, plain math-verify {plain}"
    if name in FIRST_DEV_FILES:
        assert ours.share >= 0.99, f"{name}: ours {ours}"
        assert ours.undecided == 0


@pytest.mark.parametrize("split", ["dev", "held-out"])
def test_agreement_on_the_olympiad_level_verdicts(verdicts, split):
    # Issue #29: on the olympiad-level verdicts (OlympiadBench and Omni-MATH responses by many
    # models, testing/verdict_files.py) the grader agrees with the human verdicts >= 97% of the time on
    # the held-out half, which was not looked at while the rules were written, and at least as often
    # as plain math-verify on both halves, computed here; no false accept is added. (Before the
    # rules: held-out 805/832 = 96.75%, plain math-verify 806/832.)
    ours, plain = agreements(verdicts, olympiad_split()[split])
    assert ours.agree >= plain.agree, f"{split}: ours {ours}, plain math-verify {plain}"
    assert ours.false_accepts <= FALSE_ACCEPTS_BEFORE_SPLIT[split], f"{split}: ours {ours}"
    if split == "held-out":
        assert ours.share >= 0.97, f"{split}: ours {ours}, plain math-verify {plain}"


def test_unboxed_math_solutions(grader):
    # The second development set for prose endings (testing/verdict_files.py): MATH's level-5
    # solutions without their boxes, each right against its own gold, and the same texts against
    # the next problem's gold (wrong). The grader reads the answer in more of them than plain
    # math-verify, computed here (before these rules: 1,062 of 1,324, plain math-verify 844), and
    # accepts no more of the wrong golds.
    rows = unboxed_math()
    wrong = control(rows)
    assert len(rows) >= 1300 and len(wrong) >= 1300
    for sub, floor in ((rows, 0.83), (wrong, 0.99)):
        pairs = [(gold, text) for _, gold, text, _ in sub]
        flags = [flag for *_, flag in sub]
        ours = Agreement.of([v.correct for v in grader.grade_many(pairs)], flags)
        plain = Agreement.of([v.correct for v in grader.plain_many(pairs)], flags)
        assert ours.agree >= plain.agree and ours.share >= floor, f"ours {ours}, plain math-verify {plain}"
        assert ours.false_accepts <= plain.false_accepts, f"ours {ours}, plain math-verify {plain}"


def test_olympiad_level_solutions(grader):
    # The olympiad-level development set (testing/verdict_files.py, `olympiad_solutions`): human
    # solutions of Omni-MATH-Rule and OlympiadBench, on problems no verdict file has, without their
    # boxes, each right against its own gold (many are proofs whose end states no value, so no
    # grader reads them all), and against the next problem's gold (wrong). The grader reads the
    # answer in more of them than plain math-verify, computed here (before the rules written from
    # it: 1,672 of 2,325, plain math-verify 1,663), and accepts no more of the wrong golds. (On the
    # control the grader leaves about ten comparisons undecided, "too costly" golds and answers such
    # as towers of powers that plain math-verify tries: fewer agreements there, none of them a
    # false accept.)
    # Every third row (the whole set is benchmarks/bench_grading.py's): grading all of it twice, and
    # plain math-verify twice, took six minutes of the suite.
    rows = olympiad_solutions()
    wrong = control(rows)
    assert len(rows) >= 2300 and len(wrong) >= 2300
    for sub, floor in ((rows[::3], 0.76), (wrong[::3], 0.99)):
        pairs = [(gold, text) for _, gold, text, _ in sub]
        flags = [flag for *_, flag in sub]
        ours = Agreement.of([v.correct for v in grader.grade_many(pairs)], flags)
        plain = Agreement.of([v.correct for v in grader.plain_many(pairs)], flags)
        assert ours.share >= floor, f"ours {ours}, plain math-verify {plain}"
        assert ours.false_accepts <= plain.false_accepts, f"ours {ours}, plain math-verify {plain}"
        if floor < 0.9:  # the right golds
            assert ours.agree >= plain.agree, f"ours {ours}, plain math-verify {plain}"
        else:
            assert ours.agree + ours.undecided >= plain.agree, f"ours {ours}, plain math-verify {plain}"


# Each kind of prose ending (an answer stated in a sentence) in real responses from the held-out split, picked after the
# rules were written (so not what they were written from): (id, the answer the grader reads, and
# for a right answer a gold that the text does not state). The grader's verdict is the human one.
HELD_OUT_CASES = {
    "inline math at the end of a sentence": [
        ("olympiadbench-523", "\\frac{11}{36}", "5"),       # "... is divisible by 5 when two dice are thrown is \(\frac{11}{36}\)."
        ("olympiadbench-551", "18.8^\\circ", "90"),        # "... within the range \(0^\circ < x < 90^\circ\) is approximately \(18.8^\circ\)."
        ("olympiadbench-579", "\\frac{1}{6084}", "78"),
        ("olympiadbench-820", "-\\frac{1}{1997}", "1998"),
        ("olympiadbench-247", "\\frac{21}{8}", None),      # a wrong value, read as written
    ],
    "a ± list": [
        ("olympiadbench-689", "±1, ±7", "1, 7"),           # gold 1,-1,7,-7
        ("olympiadbench-218", "\\pm 1", None),             # two of the four values
    ],
    "an inequality for an interval": [
        ("olympiadbench-619", "\\frac{1}{2} \\leq x \\leq 8", "[\\frac{1}{2}, 8)"),   # gold [1/2, 8]
        ("olympiadbench-710", "\\(k < -5\\)", "(-\\infty, -5]"),                     # gold (-infty, -5)
        ("olympiadbench-228", "(-\\sqrt{11}, -1) \\cup (\\sqrt{11}, 9)", None),
    ],
    "a solution set in braces": [
        ("olympiadbench-671", "\\{4, 8\\}", "4, 8, 12"),                              # gold 8, 4
        ("olympiadbench-703", "\\{(0, 0), (0, \\frac{5}{2}), (\\frac{1}{2}, 0), (-\\frac{1}{2}, 0), "
                              "(\\frac{3}{2}, 4), (-1, \\frac{3}{2})\\}", "(0, 0)"),
        ("olympiadbench-124", "\\left\\{ 1 \\right\\}", None),                        # gold -2, 0, 2
    ],
}


@pytest.mark.parametrize("kind", sorted(HELD_OUT_CASES))
def test_held_out_prose_endings(grader, kind):
    rows = {row[0]: row for row in olympiad_split()["held-out"]}
    for rid, read, other_gold in HELD_OUT_CASES[kind]:
        _, gold, text, human = rows[rid]
        v = grader.grade(gold, text)
        assert (v.final_answer, v.correct) == (read, human), rid
        if other_gold is not None:
            assert human and grader.grade(other_gold, text).correct is False, rid


# --- a text cut at its budget: an answer only where it closed one ------------------------------

# (cut text, the answer it closed before the cut, or None)
CUT_TEXTS = [
    ("Step 3: 4 - 1 = 3.\n\nThe", None),  # the world policy's cut completion graded right for gold 3
    ("Step 2: 10 + 1 = 11", None),  # an equation the cut may have left half written ("= 112")
    ("The answer is 1", None),  # cut before its "8"
    ("The answer is 18.", None),  # "18." may go on as "18.5"
    ("The answer is 18.5", None),
    ("Tom has 3 apples and gets 5 more.\n\nSo Tom", None),  # restated data is no result
    ("Tom has 3 apples and gets 5 more.", None),
    ("So the total is \\boxed{1", None),  # a box the cut left open
    ("So the total is \\boxed{18}", "18"),  # a whole box
    ("So \\boxed{18}.\n\nLet me check: 9 + 9 = 1", "18"),
    ("The answer is 18. Let me check", "18"),  # the answer sentence, more text after it
    ("The answer is $\\frac{1}{2}$.\n\nWait", "$\\frac{1}{2}$"),
    ("#### 18\n\nThe", "18"),
    ("**Answer: 18**\n\nCheck", "18"),
    ("The answer is at most 1", None),
]


@pytest.mark.parametrize("text,closed", CUT_TEXTS)
def test_a_cut_text_has_an_answer_only_where_it_closed_one(text, closed):
    found = extract_final_answer(text, cut=True)
    assert (found if found is None else normalize_answer(found)) == (closed if closed is None else normalize_answer(closed))


def test_a_cut_completion_counts_right_only_with_a_closed_answer_equal_to_the_gold(grader):
    cut = [("3", "Step 3: 4 - 1 = 3.\n\nThe"), ("18", "So \\boxed{18}.\n\nWait"), ("18", "The answer is 1"),
           ("18", "The answer is 18. Done"), ("18", "The answer is 18")]
    assert [v.correct for v in grader.grade_many(cut, [True] * len(cut))] == [False, True, False, True, False]
    # the same texts finished (not cut): read as before
    assert [v.correct for v in grader.grade_many(cut)] == [True, True, False, True, True]


def cut_points(text: str, start: int, end: int, n: int = 4) -> list[int]:
    step = max((end - start) // n, 1)
    return list(range(start + 1, end, step))


def test_processbench_responses_cut_inside_their_last_box_or_answer_sentence_have_no_answer_from_it():
    """On data the rule was not written from: every ProcessBench GSM8K and MATH response whose answer
    is its last box, cut inside that box, has the answer it had closed before the box (most: none),
    never a piece of the box; cut after the box closed (and more text written), the finished text's."""
    checked = 0
    for name, rows in verdict_files().items():
        if "gsm8k" not in name and "math" not in name:
            continue
        for _, _, text, _ in rows:
            boxes = [b for b in find_boxes(text) if b.closed and b.braced]
            whole = extract_final_answer(text)
            if not boxes or whole is None or whole.strip() != boxes[-1].content.strip():
                continue
            last = boxes[-1]
            before = extract_final_answer(text[:last.first], cut=True)  # what it had closed before the box
            for at in cut_points(text, last.first, last.last):
                assert extract_final_answer(text[:at], cut=True) == before, text[:at][-80:]
            assert extract_final_answer(text[:last.end] + "\n\nLet me", cut=True) == whole
            checked += 1
    assert checked > 300
