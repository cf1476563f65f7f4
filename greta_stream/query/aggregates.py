"""The aggregate functions of RETURN, declared once.

Each `Function` says what the language takes (`COUNT(*)`, `COUNT(X)`,
`FUNC(X.a)`), which propagated field its value reads (GRETA propagates
per vertex a trend count, a count of an alias's events, and per attribute
an exact sum, a minimum and a maximum: the *field kinds* of `FIELD_KINDS`),
how a result row's value is made from those fields, how its column is typed
in Spark, and what the oracle computes from the trends themselves. The
grammar's keyword, the compiler's fields, the rows of both engines, Spark's
output schema and the oracle read this table: an aggregate made of the
fields the engines propagate is one entry here.

    SUM(X.a)   value field "sum" of X.a   row: the exact sum       Spark: exact text if a is integral, else double
    AVG(X.a)   value field "sum" of X.a   row: sum / COUNT(X)      Spark: double
    MIN(X.a)   value field "min" of X.a   row: the least value     Spark: a's type
    MAX(X.a)   value field "max" of X.a   row: the greatest value  Spark: a's type
    COUNT(X)   the count of X's events    row: that count          Spark: exact text (any size)
    COUNT(*)   the trend count            row: that count          Spark: exact text
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

# The fields the engines propagate along the graph's edges, and their cost
# in the shared planner's units (64-bit limbs per lane: a count is one, an
# exact sum an int and a scaled float part, a minimum or maximum half).
FIELD_KINDS: dict[str, float] = {"count": 1.0, "sum": 2.0, "min": 0.5, "max": 0.5}


@dataclass(frozen=True)
class Function:
    """One aggregate function of RETURN (see the module docstring)."""

    name: str  # as written, upper case
    value: str | None  # the field kind its value reads (None: the count alone)
    row: str  # how a row's value is made: "count", "sum", "mean" or "extreme"
    spark: str  # its Spark column: "exact" (text), "exact_if_integral", "source" or "double"
    oracle: Callable[[Sequence[Any]], Any]  # the value over the bound events' values (or events, for COUNT)


def _sum(values: Sequence[Any]) -> Any:
    total = sum((Fraction(v) for v in values), Fraction(0))
    return int(total) if all(isinstance(v, int) for v in values) else float(total)


def _mean(values: Sequence[Any]) -> Any:
    return float(sum((Fraction(v) for v in values), Fraction(0)) / len(values)) if values else None


FUNCTIONS: dict[str, Function] = {f.name: f for f in (
    Function("COUNT", None, "count", "exact", len),
    Function("SUM", "sum", "sum", "exact_if_integral", _sum),
    Function("AVG", "sum", "mean", "double", _mean),
    Function("MIN", "min", "extreme", "source", lambda values: min(values) if values else None),
    Function("MAX", "max", "extreme", "source", lambda values: max(values) if values else None),
)}


def over_attributes() -> tuple[str, ...]:
    """The functions written `FUNC(X.a)`: every one with a value field (COUNT takes `*` or an alias)."""
    return tuple(name for name, f in FUNCTIONS.items() if f.value is not None)


def function(name: str) -> Function:
    """The function of `name` (any case); `KeyError` naming the known ones otherwise."""
    try:
        return FUNCTIONS[name.upper()]
    except KeyError:
        raise KeyError(f"unknown aggregate {name!r}; known: {', '.join(FUNCTIONS)}") from None


def grammar_terminal() -> str:
    """The lark terminal of the functions over an attribute (`SUM|MIN|...`, any case)."""
    return "/(" + "|".join(name.lower() for name in over_attributes()) + r")\b/i"
