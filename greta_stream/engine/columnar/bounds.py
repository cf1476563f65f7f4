"""Edge comparisons whose X part sits inside arithmetic with NEXT(Y)'s (`S.price - NEXT(S).price > 0.5`,
`(NEXT(S).volume + 100) * 2 < S.volume`), turned into `x >= T` or `x <= T` with T per event, exactly.

Moving the terms around (`S.price > NEXT(S).price + 0.5`) would round differently from the query as
written. Instead: every operation on the path from X's part to the comparison is monotone in it
(`+`, `-`, `*` and `/` by a constant, unary minus; each rounds monotonically in IEEE arithmetic), so
for a fixed successor the X values the comparison admits are those at or above (or at or below) one
float, T. `threshold` finds T by bisection over the floats, evaluating the comparison as written:
a predecessor's key then compares with T as any `f(X) op g(NEXT(Y))` does (`keys.edge_values`), in
the index and the scans alike. Values stay within 2**53 (ints exact as float64, as Python computes
them), so the floats give Python's results; otherwise `Unsupported` hands the run to the general
engine.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from greta_stream.engine.columnar.columns import EXACT_FLOAT, Unsupported
from greta_stream.engine.columnar.vector import COMPARE
from greta_stream.engine.columnar.vector import evaluate as vector_eval
from greta_stream.query import ast

UP, DOWN = "bound>=", "bound<="  # the op of such a comparison: x at or above T (UP), at or below (DOWN)
_ORDER = {"<", "<=", ">", ">="}
_SIGN_BIT = np.int64(-(2**63))


def bounded(e: ast.Expr) -> tuple[str, ast.Expr, ast.Expr] | None:
    """`(UP or DOWN, x, e)` for an order comparison `e` with one part `x` over X's attributes only,
    inside arithmetic with NEXT(Y)'s that is monotone in it; else None."""
    if not isinstance(e, ast.Binary) or e.op not in _ORDER or not _arith(e.left) or not _arith(e.right):
        return None
    lx, rx = _reads_x(e.left), _reads_x(e.right)
    if lx == rx or not _reads_y(e):
        return None
    path, rising = (e.left if lx else e.right), True
    while _reads_y(path):  # go down to the part with X only, minding each step's direction
        step = _step(path)
        if step is None:
            return None
        path, keeps = step
        rising = rising == keeps
    if not ast.expr_refs(path):
        return None
    if rx:  # `c op E(x)`: as `E(x) op' c`
        rising = not rising
    up = rising == (e.op in (">", ">="))
    return (UP if up else DOWN), path, e


def threshold(e: ast.Binary, x: ast.Expr, up: bool, values: Mapping[str, np.ndarray], keys: np.ndarray) -> np.ndarray:
    """T per event (its NEXT(Y) values in `values`): the least float x at which `e` holds (`up`; +inf: at
    none, -inf: at all within 2**53), or the greatest (not `up`)."""
    m = len(keys)
    fixed = _fixed(e, values, m)  # the parts without X, once: the bisection evaluates e some 60 times
    _check_magnitude(e, x, fixed, keys)
    lo = np.full(m, _ordered(-EXACT_FLOAT), np.int64)
    hi = np.full(m, _ordered(EXACT_FLOAT), np.int64)
    at_lo, at_hi = _holds(e, x, _float(lo), fixed), _holds(e, x, _float(hi), fixed)
    if up:
        out = np.where(at_lo, -np.inf, np.where(at_hi, np.nan, np.inf))
    else:
        out = np.where(at_hi, np.inf, np.where(at_lo, np.nan, -np.inf))
    todo = np.isnan(out)
    lo, hi = lo[todo], hi[todo]
    sub = {n: v[todo] for n, v in fixed.items()}
    while (lo + 1 < hi).any():  # the flip lies between lo and hi (ordered float bits; hi - lo may overflow)
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)
        held = _holds(e, x, _float(mid), sub)
        if up:
            hi, lo = np.where(held, mid, hi), np.where(held, lo, mid)
        else:
            lo, hi = np.where(held, mid, lo), np.where(held, hi, mid)
    out[todo] = _float(hi if up else lo)
    return out


def _fixed(e: ast.Expr, values: Mapping[str, np.ndarray], m: int) -> dict[ast.Expr, np.ndarray]:
    """The values per event of each largest part of `e` without X's attributes (NEXT(Y)'s, constants)."""
    if not _reads_x(e):
        return {e: np.broadcast_to(np.asarray(vector_eval(e, values), np.float64), (m,))}
    if isinstance(e, ast.Unary):
        return _fixed(e.operand, values, m)
    if isinstance(e, ast.Binary):
        return {**_fixed(e.left, values, m), **_fixed(e.right, values, m)}
    return {}


def holds(e: ast.Binary, x: ast.Expr, at: np.ndarray, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per event, whether `e` holds with its part `x` at `at` (the event's NEXT(Y) values in `values`)."""
    return _holds(e, x, at, _fixed(e, values, len(at)))


def _holds(e: ast.Binary, x: ast.Expr, at: np.ndarray, fixed: Mapping[ast.Expr, np.ndarray]) -> np.ndarray:
    left, right = _eval(e.left, x, at, fixed), _eval(e.right, x, at, fixed)
    if np.isnan(left).any() or np.isnan(right).any():
        raise Unsupported("an edge predicate that is not a number at some value")
    return np.asarray(COMPARE[e.op](left, right))


def _eval(e: ast.Expr, x: ast.Expr, at: np.ndarray, fixed: Mapping[ast.Expr, np.ndarray]) -> np.ndarray:
    """`e` with its part `x` at `at` and its parts without X from `fixed` (errors rise as overflow, not Python's)."""
    if e == x:
        return at
    if e in fixed:
        return fixed[e]
    with np.errstate(all="ignore"):
        if isinstance(e, ast.Unary):
            return -_eval(e.operand, x, at, fixed)
        assert isinstance(e, ast.Binary)
        a, b = _eval(e.left, x, at, fixed), _eval(e.right, x, at, fixed)
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b if e.op == "*" else a / b


def _check_magnitude(e: ast.Binary, x: ast.Expr, fixed: Mapping[ast.Expr, np.ndarray], keys: np.ndarray) -> None:
    """Every value the comparison computes for the batch's events stays within 2**53 (where float64 is
    exact for ints, as Python's int arithmetic is): a bound per part, from the largest key and values."""
    def bound(n: ast.Expr) -> float:
        if n == x:
            return float(np.abs(keys).max(initial=0.0))
        if n in fixed:
            return float(np.abs(fixed[n]).max(initial=0.0))
        if isinstance(n, ast.Unary):
            return bound(n.operand)
        assert isinstance(n, ast.Binary)
        a, b = bound(n.left), bound(n.right)
        if n.op == "/":  # by a constant (`_step`), not 0
            return a / abs(_constant(n.right) or 1.0)
        return a + b if n.op in ("+", "-") else a * b

    for side in (e.left, e.right):
        if _reads_x(side) and bound(side) > EXACT_FLOAT:
            raise Unsupported("edge predicate values beyond 2**53")


def _step(e: ast.Expr) -> tuple[ast.Expr, bool] | None:
    """(the operand holding X's part, whether `e` rises with it), if `e` is monotone in it."""
    if isinstance(e, ast.Unary) and e.op == "-":
        return e.operand, False
    if not isinstance(e, ast.Binary) or e.op not in ("+", "-", "*", "/"):
        return None
    lx, rx = _reads_x(e.left), _reads_x(e.right)
    if lx == rx:
        return None
    inner, other = (e.left, e.right) if lx else (e.right, e.left)
    if e.op == "+":
        return inner, True
    if e.op == "-":
        return inner, lx
    if ast.expr_refs(other) or (e.op == "/" and rx):
        return None  # a NEXT value as a factor (its sign may differ per event), or X's part as a divisor
    k = _constant(other)
    if k is None or (e.op == "/" and k == 0):
        return None
    return inner, k >= 0


def _constant(e: ast.Expr) -> float | None:
    try:
        v = vector_eval(e, {})
    except (Unsupported, KeyError):
        return None
    return float(v) if isinstance(v, float) else None


def _reads_x(e: ast.Expr) -> bool:
    return any(not r.next for r in ast.expr_refs(e))


def _reads_y(e: ast.Expr) -> bool:
    return any(r.next for r in ast.expr_refs(e))


def _arith(e: ast.Expr) -> bool:
    if isinstance(e, ast.Binary):
        return e.op in ("+", "-", "*", "/") and _arith(e.left) and _arith(e.right)
    if isinstance(e, ast.Unary):
        return e.op == "-" and _arith(e.operand)
    return True


def _ordered(f: float) -> int:
    """The float's place in the order of floats, as an int (-0.0 and 0.0 alike)."""
    i = int(np.float64(f).view(np.int64))
    return i if i >= 0 else -(i & (2**63 - 1))


def _float(o: np.ndarray) -> np.ndarray:
    bits = np.where(o >= 0, o, (-o) | _SIGN_BIT)
    return bits.astype(np.int64).view(np.float64)
