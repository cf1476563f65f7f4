"""Arithmetic of one alias's attributes over whole columns (numpy).

Evaluates the side of an edge comparison (`X.price * 1.05`) for every event
at once, giving the values the query language would compute one event at a
time (docs/QUERY_LANGUAGE.md section 2: Python arithmetic). It only answers where
float64 gives exactly Python's result: numbers within 2**53 (ints exact),
`+ - *`, `/` (true division) and `%` (the sign of the divisor, as numpy's
remainder gives it), no division by zero, finite results.
Anything else raises `Unsupported` and the general engine runs instead.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from greta_stream.engine.columnar.columns import EXACT_FLOAT, Unsupported
from greta_stream.query import ast


def attrs_of(e: ast.Expr) -> set[str]:
    return {r.attr for r in ast.expr_refs(e)}


def evaluate(e: ast.Expr, cols: Mapping[str, np.ndarray]) -> np.ndarray | float:
    """Float64 values of `e` per row (or a constant); raise `Unsupported`."""
    out = _eval(e, cols)
    if isinstance(out, np.ndarray) and not np.isfinite(out).all():
        raise Unsupported("an edge predicate side is not finite")
    return out


def _eval(e: ast.Expr, cols: Mapping[str, np.ndarray]) -> np.ndarray | float:
    if isinstance(e, ast.Literal):
        if isinstance(e.value, bool) or not isinstance(e.value, (int, float)) or abs(e.value) > EXACT_FLOAT:
            raise Unsupported(f"literal {e.value!r} in an edge predicate")
        return float(e.value)
    if isinstance(e, ast.AttrRef):
        return cols[e.attr]
    if isinstance(e, ast.Unary) and e.op == "-":
        return -_eval(e.operand, cols)
    if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/", "%"):
        a, b = _eval(e.left, cols), _eval(e.right, cols)
        if e.op in ("/", "%"):
            if np.any(np.asarray(b) == 0):
                raise Unsupported("division by zero in an edge predicate")
            return a / b if e.op == "/" else np.remainder(a, b)  # Python's %: the sign of the divisor
        r = a + b if e.op == "+" else a - b if e.op == "-" else a * b
        if np.any(np.abs(r) > EXACT_FLOAT):
            raise Unsupported("edge predicate values beyond 2**53")
        return r
    raise Unsupported("edge predicate operator")


_SCALAR = {
    "=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
COMPARE = {
    "=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
}


def predicate(e: ast.Expr, numbers: Mapping[str, np.ndarray], raw: Callable[[str], Any], m: int) -> np.ndarray:
    """A local predicate as a boolean mask over m rows: comparisons of
    arithmetic (exact as in `evaluate`), comparisons of an attribute with a
    string literal (element by element, Python's `==`/`<`), AND, OR, NOT.
    `numbers[attr]` gives an attribute as float64 (or raises `Unsupported`),
    `raw(attr)` its values as given. Anything else raises `Unsupported`."""
    if isinstance(e, ast.Unary) and e.op == "NOT":
        return ~predicate(e.operand, numbers, raw, m)
    if isinstance(e, ast.Binary) and e.op in ("AND", "OR"):
        a, b = predicate(e.left, numbers, raw, m), predicate(e.right, numbers, raw, m)
        return a & b if e.op == "AND" else a | b
    if isinstance(e, ast.Binary) and e.op in COMPARE:
        text = _string_side(e)
        if text is not None:
            ref, lit, flipped = text
            values = raw(ref.attr)
            if e.op not in ("=", "!=") and (type(lit) is bool or not all(type(v) is str for v in values)):
                raise Unsupported("an order comparison of a string with a value that is not a string")
            op = _SCALAR[e.op]
            out = np.fromiter((bool(op(lit, v) if flipped else op(v, lit)) for v in values), bool, len(values))
            return out
        left, right = evaluate(e.left, numbers), evaluate(e.right, numbers)
        return np.broadcast_to(COMPARE[e.op](left, right), (m,)).copy()
    raise Unsupported("local predicate shape")


def _string_side(e: ast.Binary) -> tuple[ast.AttrRef, str | bool, bool] | None:
    """(attribute, literal, literal on the left) for `X.a op 'text'` or `X.a op true`: compared with the
    values as records hold them, as the general engine compares them (`1 = true` holds, as in Python)."""
    if isinstance(e.right, ast.Literal) and isinstance(e.right.value, (str, bool)):
        if isinstance(e.left, ast.AttrRef):
            return e.left, e.right.value, False
        raise Unsupported("a string or boolean compared with an expression")
    if isinstance(e.left, ast.Literal) and isinstance(e.left.value, (str, bool)):
        if isinstance(e.right, ast.AttrRef):
            return e.right, e.left.value, True
        raise Unsupported("a string or boolean compared with an expression")
    return None
