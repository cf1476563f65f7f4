"""The oracle's own expression evaluator, and the events and windows it reads.

Shares nothing with the engine (see `greta_stream.testing.oracle`).
"""

from __future__ import annotations

import operator
from fractions import Fraction
from typing import Any, NamedTuple

from greta_stream.query.ast import AttrRef, Binary, Expr, Literal, Unary


class Event(NamedTuple):
    """An input event with its exact time."""

    eid: Any
    type: str
    time: Fraction
    data: dict


class Window(NamedTuple):
    """Window [start, end) with exact bounds."""

    start: Fraction
    end: Fraction


# ------------------------------------------------------------ expressions

_COMPARE = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ARITH = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
}


def _evaluate(expr: Expr, env: dict) -> Any:
    """Value of `expr`; env maps (alias, is_next) to the event. May raise."""
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, AttrRef):
        return env[(expr.alias, expr.next)].data[expr.attr]
    if isinstance(expr, Unary):
        value = _evaluate(expr.operand, env)
        if expr.op.upper() == "NOT":
            return not value
        if expr.op == "-":
            return -value
        raise ValueError(f"unknown unary operator {expr.op!r}")
    if isinstance(expr, Binary):
        return _evaluate_binary(expr, env)
    raise TypeError(f"not an expression: {expr!r}")


def _evaluate_binary(expr: Binary, env: dict) -> Any:
    """Value of a binary expression, AND/OR short-circuiting like Python."""
    op = expr.op.upper()
    if op == "AND":
        return bool(_evaluate(expr.left, env)) and bool(_evaluate(expr.right, env))
    if op == "OR":
        return bool(_evaluate(expr.left, env)) or bool(_evaluate(expr.right, env))
    left, right = _evaluate(expr.left, env), _evaluate(expr.right, env)
    if op in _COMPARE:
        return _COMPARE[op](left, right)
    if op in _ARITH:
        return _ARITH[op](left, right)
    raise ValueError(f"unknown binary operator {expr.op!r}")


def holds(expr: Expr, env: dict) -> bool:
    """Truth of a predicate; any evaluation error makes it false."""
    try:
        return bool(_evaluate(expr, env))
    except Exception:  # noqa: BLE001 - any failure means "false here"
        return False
