"""Arithmetic of one alias's attributes over whole columns (numpy).

Evaluates the side of an edge comparison (`X.price * 1.05`) for every event
at once, giving the values the query language would compute one event at a
time (SEMANTICS.md section 2: Python arithmetic). It only answers where
float64 gives exactly Python's result: numbers within 2**53 (ints exact),
`+ - *` and `/` (true division), no division by zero, finite results.
Anything else raises `Unsupported` and the general engine runs instead.
"""

from __future__ import annotations

from collections.abc import Mapping

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
    if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/"):
        a, b = _eval(e.left, cols), _eval(e.right, cols)
        if e.op == "/":
            if np.any(np.asarray(b) == 0):
                raise Unsupported("division by zero in an edge predicate")
            return a / b
        r = a + b if e.op == "+" else a - b if e.op == "-" else a * b
        if np.any(np.abs(r) > EXACT_FLOAT):
            raise Unsupported("edge predicate values beyond 2**53")
        return r
    raise Unsupported("edge predicate operator")
