"""Exact aggregate values and the slot operations GRETA propagates.

Counts are Python ints of any size. SUM keeps three slots: the exact int sum
of int values, the exact sum of float values in units of 2**-1074 (every
finite float is an integer multiple of that), and a flag saying whether any
float was summed. All three combine with plain int operations, and the
result is rounded once, when a row is finalized (`greta_stream.engine.rows`), so huge counts times float
values neither overflow nor lose precision (docs/QUERY_LANGUAGE.md section 4).
MIN/MAX keep input values unchanged, with +-inf as the empty element.
"""

from __future__ import annotations

import math

INF = math.inf
NEG_INF = -math.inf
FLOAT_BITS = 1074  # 2**-1074 is the smallest positive float


def scaled(x: float) -> int:
    """x * 2**1074, exactly (an int for every finite float)."""
    num, den = x.as_integer_ratio()  # den is a power of two, at most 2**1074
    return num << (FLOAT_BITS - den.bit_length() + 1)


def divide(num: int, den: int) -> float:
    """Correctly rounded num/den for ints of any size; +-inf past float range."""
    try:
        return num / den
    except OverflowError:
        return INF if (num > 0) == (den > 0) else NEG_INF
