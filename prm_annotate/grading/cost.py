"""A cheap look at an answer before math-verify: would comparing it cost seconds or for ever?

math-verify hands answers to sympy, which computes `10^{10^{7}}` digit by digit, expands
`(x+1)^{1000}`, and whose LaTeX parser slows down steeply with nesting (16 nested braces: 14 s on
a 2-core machine; 20: past any deadline). Each such comparison would cost the full timeout plus a
restart of the grader's worker (seconds of sympy imports): 1,000 hostile answers would take two
hours. `too_costly` spots them in microseconds with plain string scanning and an estimate of
the size of numbers (in log10, so no big number is ever built), so the grader can record "too
costly" (undecided, `correct: null`) without starting math-verify at all. The hard timeout stays
as the bound for what gets past these checks.

The limits are measured, not guessed (math-verify 0.x on 2 cores, see benchmarks/bench_hostile.py):
`10^{10^{6}}` compares in 0.5 s and `10^{10^{7}}` never finishes; `100000!` in 0.15 s and
`(10^{6})!` in 6 s; 12 nested groups in about a second, 16 in 5-14 s; `(x+1)^{1000}` in 5 s.
"""
from __future__ import annotations

import math
import re

MAX_CHARS = 1000  # a normalised final answer, not a solution: 1,000 characters is already a lot
MAX_DEPTH = 12  # nested (), [] and {} groups
MAX_DIGITS = 1e6  # digits of any number an answer spells out (10^{10^{6}} has a million)
MAX_FACTORIAL = 1e5  # n! and binomials with n beyond this
MAX_GROUP_POWER = 100  # (a + b)^n with a symbolic group: sympy may expand it

_OPEN, _CLOSE = "([{", ")]}"
# A number, a LaTeX command, a single character: the tokens of a numeric expression.
_TOKEN = re.compile(r"\s*(\d+(?:\.\d*)?|\\[a-zA-Z]+|\S)")
_TIMES = {"*", "\\cdot", "\\times"}


class _NotNumeric(Exception):
    """The expression has a symbol in it: its size cannot be told from its digits."""


def too_costly(answer: str) -> str | None:
    """Why comparing `answer` (normalised) would cost too much, or None when it looks affordable."""
    if len(answer) > MAX_CHARS:
        return f"too costly: {len(answer)} characters"
    depth = deepest = 0
    for ch in answer:
        if ch in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif ch in _CLOSE:
            depth -= 1
    if deepest > MAX_DEPTH:
        return f"too costly: {deepest} nested groups"
    if "^" not in answer and "!" not in answer and "binom" not in answer:
        return None
    try:
        digits = _Estimate(answer).whole()
    except _NotNumeric:
        return _symbolic_powers(answer)
    if digits > MAX_DIGITS:
        return "too costly: a number too large to compute"
    return None


def _symbolic_powers(answer: str) -> str | None:
    """An answer with symbols: look at each exponent and factorial on its own."""
    for match in re.finditer(r"\^", answer):
        exponent = _group_after(answer, match.end())
        before = answer[:match.start()]
        try:
            value = 10 ** min(_Estimate(exponent).whole(), 300.0)
        except _NotNumeric:
            continue
        number = re.search(r"(\d+(?:\.\d*)?)\s*$", before)
        base_digits = math.log10(float(number.group(1))) if number and float(number.group(1)) >= 1 else 1.0
        if value * base_digits > MAX_DIGITS or (before.rstrip()[-1:] in (")", "]", "}") and value > MAX_GROUP_POWER):
            return "too costly: an exponent too large to compute"
    for arg in _factorial_args(answer):
        try:
            if _Estimate(arg).whole() > math.log10(MAX_FACTORIAL):
                return "too costly: a factorial too large to compute"
        except _NotNumeric:
            continue
    return None


def _group_after(text: str, i: int) -> str:
    """The exponent starting at `text[i]`: a braced group, or one character."""
    if i < len(text) and text[i] == "{":
        depth = 0
        for j in range(i, len(text)):
            depth += text[j] == "{"
            depth -= text[j] == "}"
            if depth == 0:
                return text[i + 1:j]
        return text[i + 1:]
    return text[i:i + 1]


def _factorial_args(text: str) -> list[str]:
    args = [m.group(1) for m in re.finditer(r"(\d+)\s*!", text)]
    for m in re.finditer(r"[)}]\s*!", text):
        close = m.start()
        opener = "(" if text[close] == ")" else "{"
        depth = 0
        for j in range(close, -1, -1):
            depth += text[j] == text[close]
            depth -= text[j] == opener
            if depth == 0:
                args.append(text[j + 1:close])
                break
    return args


class _Estimate:
    """The size of the integers sympy would handle for a numeric expression (digits, + - * / ^ !,
    groups, \\frac, \\binom, \\sqrt), in log10: 0.5^{10^{10}} costs as much as 2^{10^{10}}, since
    its denominator is that number. Raises _NotNumeric at the first symbol. Never computes it."""

    def __init__(self, text: str):
        self.tokens = [t for t in _TOKEN.findall(text) if t not in ("\\left", "\\right")]
        self.i = 0

    def whole(self) -> float:
        """The largest number met on the way (a huge denominator costs as much as a numerator)."""
        self.largest = 0.0
        value = self.sum()
        if self.i != len(self.tokens):
            raise _NotNumeric
        return max(value, self.largest)

    def _met(self, value: float) -> float:
        self.largest = max(self.largest, value)
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self) -> str:
        if self.i >= len(self.tokens):
            raise _NotNumeric
        self.i += 1
        return self.tokens[self.i - 1]

    def sum(self) -> float:
        value = self.product()
        while self._peek() in ("+", "-"):
            self._take()
            value = max(value, self.product()) + math.log10(2)
        return value

    def product(self) -> float:
        value = self.power()
        while self._peek() in _TIMES or self._peek() == "/":
            op = self._take()
            other = self.power()
            value = value + other if op != "/" else max(value, other)
        return value

    def power(self) -> float:
        if self._peek() == "-":
            self._take()
        base = self.postfix()
        if self._peek() != "^":
            return base
        self._take()
        exponent = self.power()  # right-associative: 9^9^9 is 9^(9^9)
        if base <= 0:  # 1 (or 0) to any power
            return 0.0
        return self._met(math.inf if exponent > 300 else base * 10 ** exponent)

    def postfix(self) -> float:
        value = self.atom()
        while self._peek() == "!":
            self._take()
            value = self._met(_factorial_digits(value))
        return value

    def atom(self) -> float:
        tok = self._take()
        if tok[0].isdigit():  # 0.05 is 5/100: its size is that of its digits
            return math.log10(max(float(tok.replace(".", "") or "0"), 1.0))
        if tok in "({[":
            value = self.sum()
            if self._take() not in ")}]":
                raise _NotNumeric
            return value
        if tok == "\\frac":
            return max(self.atom(), self.atom())
        if tok == "\\binom":
            # binom(n, k) <= n^k; sympy multiplies k terms, so a large k costs like a factorial
            n, k = self.atom(), self.atom()
            return self._met(math.inf if k > math.log10(MAX_FACTORIAL) / 2 else n * 10 ** k)
        if tok == "\\sqrt":
            if self._peek() == "[":
                self.atom()
            return self.atom() / 2
        raise _NotNumeric


def _factorial_digits(log_n: float) -> float:
    """log10(n!) <= n log10 n, for n given as log10 n; inf past MAX_FACTORIAL so it is refused."""
    if log_n > math.log10(MAX_FACTORIAL):
        return math.inf
    n = 10 ** log_n
    return n * max(log_n, 0.0)
