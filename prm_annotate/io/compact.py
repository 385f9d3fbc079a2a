"""Numbers of every record in a few bytes, for commands that see every record of a file and must not
hold it: kept as counts of their distinct values (a median or an exact mean from them, in the
memory of the values that differ, not of the records). Ids kept compactly are io/id_keys.py's.

`Numbers` is the exact sum, mean and median of numbers seen one by one, `IntSum` the sum and mean
of integers: what `sum`, `math.fsum`, `statistics.fmean` and `statistics.median` give for the list
of them, to the last bit.
"""
from __future__ import annotations

import math
from array import array
from collections import Counter
from fractions import Fraction
from typing import Iterable


class Numbers:
    """Numbers seen one by one, kept as the count of each distinct value (at most `cap` of them;
    beyond, the counts are folded into an exact running sum, and the median is no longer asked for
    by any caller that sets a cap). Sums are exact (a Fraction of the values as floats would have
    been summed by `math.fsum`), so the mean is `fsum(values) / n` to the last bit."""

    def __init__(self, cap: int | None = None) -> None:
        self.counts: Counter = Counter()
        self.n = 0
        self.cap = cap
        self._folded = Fraction(0)
        self._folded_any = False
        self._neg_zeros = 0  # -0.0 and 0.0 are one key

    def add(self, value: int | float) -> None:
        if value == 0 and isinstance(value, float) and math.copysign(1.0, value) < 0:
            self._neg_zeros += 1
        self.counts[value] += 1
        self.n += 1
        if self.cap is not None and len(self.counts) > self.cap:
            self._fold()

    def extend(self, values: Iterable[int | float]) -> None:
        for value in values:
            self.add(value)

    def __bool__(self) -> bool:
        return self.n > 0

    def _fold(self) -> None:
        self._folded += sum((Fraction(float(v)) * c for v, c in self.counts.items()), Fraction(0))
        self._folded_any = True
        self.counts.clear()

    def total(self) -> int:
        """The exact sum of integer values (`sum(values)`)."""
        assert not self._folded_any
        return sum(v * c for v, c in self.counts.items())

    def fsum(self) -> float:
        """`math.fsum(values)`: the exactly rounded sum of the values as floats."""
        exact = self._folded + sum((Fraction(float(v)) * c for v, c in self.counts.items()), Fraction(0))
        if exact == 0:
            # the sign of a zero as this Python's fsum gives it (-0.0s alone: -0.0 from 3.12 on)
            return math.fsum([-0.0]) if self.n and self._neg_zeros == self.n else 0.0
        return float(exact)

    def fmean(self) -> float:
        """`statistics.fmean(values)`."""
        return self.fsum() / self.n

    def sorted_items(self) -> list[tuple[int | float, int]]:
        assert not self._folded_any
        return sorted(self.counts.items())

    def at(self, index: int) -> int | float:
        """The value at `index` of the values sorted."""
        seen = 0
        for value, count in self.sorted_items():
            seen += count
            if index < seen:
                return value
        raise IndexError(index)

    def median(self) -> int | float:
        """`statistics.median(values)`."""
        n = self.n
        if n % 2 == 1:
            return self.at(n // 2)
        return (self.at(n // 2 - 1) + self.at(n // 2)) / 2

    def min(self) -> int | float:
        return min(self.counts)

    def max(self) -> int | float:
        return max(self.counts)


class IntSum:
    """Integers seen one by one: their count, exact sum and `statistics.fmean` (which sums them as
    floats: each rounded to a float first, then summed exactly and rounded once)."""

    def __init__(self) -> None:
        self.n = self.total = self._as_floats = 0
        self.nonzero = 0

    def add(self, value: int) -> None:
        self.n += 1
        self.total += value
        self._as_floats += int(float(value))
        self.nonzero += bool(value)

    def __bool__(self) -> bool:
        return self.n > 0

    def fmean(self) -> float:
        return float(self._as_floats) / self.n
