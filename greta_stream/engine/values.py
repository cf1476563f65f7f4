"""Exact aggregate values and the field operations GRETA propagates.

Counts are Python ints of any size. SUM over int attributes stays an exact
int; over floats it is kept as an exact dyadic rational (`Dyadic`, every
float is one) and rounded once, when a row is finalized, so huge counts times
float values neither overflow nor lose precision (SEMANTICS.md section 4).
MIN/MAX keep input values unchanged, with +-inf as the empty element.
"""

from __future__ import annotations

import math

INF = math.inf
NEG_INF = -math.inf


class Dyadic:
    """The exact value `n * 2**e`; closed under + and * by an int."""

    __slots__ = ("n", "e")

    def __init__(self, n: int, e: int) -> None:
        self.n = n
        self.e = e

    @classmethod
    def from_float(cls, x: float) -> Dyadic:
        num, den = x.as_integer_ratio()  # den is a power of two
        return cls(num, -(den.bit_length() - 1))

    def __add__(self, other: object) -> Dyadic:
        if isinstance(other, int):
            other = Dyadic(other, 0)
        if not isinstance(other, Dyadic):
            return NotImplemented
        if self.e == other.e:
            return Dyadic(self.n + other.n, self.e)
        if self.e < other.e:
            return Dyadic(self.n + (other.n << (other.e - self.e)), self.e)
        return Dyadic((self.n << (self.e - other.e)) + other.n, other.e)

    __radd__ = __add__

    def __mul__(self, k: object) -> Dyadic:
        if not isinstance(k, int):
            return NotImplemented
        return Dyadic(self.n * k, self.e)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            other = Dyadic(other, 0)
        if not isinstance(other, Dyadic):
            return NotImplemented
        return (self + Dyadic(-other.n, other.e)).n == 0

    def __hash__(self) -> int:
        return hash(self.ratio())

    def ratio(self) -> tuple[int, int]:
        """(numerator, denominator) of the exact value."""
        if self.e >= 0:
            return self.n << self.e, 1
        return self.n, 1 << -self.e

    def __float__(self) -> float:
        return divide(*self.ratio())

    def __repr__(self) -> str:
        return f"Dyadic({float(self)!r})"


def divide(num: int, den: int) -> float:
    """Correctly rounded num/den for ints of any size; +-inf past float range."""
    try:
        return num / den
    except OverflowError:
        return INF if (num > 0) == (den > 0) else NEG_INF


def exact_value(x: int | float) -> int | Dyadic:
    """The summable exact form of an attribute value."""
    return x if isinstance(x, int) else Dyadic.from_float(x)


def sum_result(s: int | Dyadic) -> int | float:
    """SUM as reported: an int if every summed value was an int, else a float."""
    return float(s) if isinstance(s, Dyadic) else s


def avg_result(s: int | Dyadic, count: int) -> float:
    """AVG = SUM / COUNT(X), rounded once from the exact values."""
    if isinstance(s, Dyadic):
        num, den = s.ratio()
        return divide(num, den * count)
    return divide(s, count)
