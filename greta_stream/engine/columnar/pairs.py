"""Edge comparisons that mix the two events' values past what an order of keys answers
(`S.price * NEXT(S).volume > S.volume * 100`, `NEXT(S).price / S.price < 0.99`): a scanned store
evaluates them as written with a small program per comparison, run per event over all the store's
vertices at once (`judge`, from `propagate.scan`; `propagate._admits` reads what it found).

A part of the comparison that reads X's attributes only (`S.volume * 100`), or none of them
(`NEXT(S).volume`, a constant), is computed for every event at once (`vector.evaluate`: Python's
values, exactly); the program loads those parts (X's from the predecessor, the others from the
event) and does what mixes them: `+ - * / %`, unary minus, then the comparison. float64 gives
Python's result where every value stays within 2**53 and no divisor is 0. A bound per node, from
the largest magnitude of each part over the run's events (and a divisor's least), checks that
before the kernel runs; where it fails, `Unsupported` hands the run to the general engine.

A divisor that itself mixes the two events' values (`S.volume / (S.price - NEXT(S).price)`) has no
least magnitude to check before: the program divides pair by pair, and a pair whose divisor is 0
is judged `ERROR` (Python raises there). The kernel raises `ZeroDivisionError` when it reaches a
conjunct holding an error for a pair it judges (`propagate._admits`: Python would have evaluated
that conjunct, unless an OR before stopped it), and the driver hands the run over to the general
engine, which makes that predicate false there and counts it in `predicate_errors`. A true
division's result is a float in Python, computed in float64 as here whatever its magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from greta_stream.engine.columnar.columns import EXACT_FLOAT, Unsupported
from greta_stream.engine.columnar.vector import evaluate as vector_eval
from greta_stream.query import ast

PAIR = "pair"  # the op of such a comparison in a plan's edges: (PAIR, comparison, comparison)
LOAD_X, LOAD_Y, ADD, SUB, MUL, DIV, NEG, MOD = 0, 1, 2, 3, 4, 5, 6, 7  # a program's steps (opcode, argument)
CMP = {"=": 10, "!=": 11, "<": 12, "<=": 13, ">": 14, ">=": 15}  # its last step: the comparison
FALSE, TRUE, ERROR = 0, 1, 2  # what `judge` finds for a pair (ERROR: a divisor of 0, where Python raises)
FLOAT = math.inf  # a value's bound where Python computes it as a float (`_Builder.node`)
_ARITH = {"+": ADD, "-": SUB, "*": MUL, "/": DIV, "%": MOD}


def pair_side(e: ast.Expr) -> tuple[str, ast.Expr, ast.Expr] | None:
    """`(PAIR, e, e)` for a comparison of arithmetic over X's and NEXT(Y)'s numbers that mixes them
    (both events' values on one side); None when `e` is not such a comparison."""
    if not (isinstance(e, ast.Binary) and e.op in CMP and _arith(e.left) and _arith(e.right)):
        return None
    if not (_reads(e, False) and _reads(e, True)):
        return None
    return PAIR, e, e


@dataclass(frozen=True)
class Programs:
    """The pair comparisons of a run: `values` (events, parts) float64, a part per column (an X part's
    on X's events, another's on Y's), `steps` (steps, 2) int64 of every program, comparison q's at
    `steps[at[q]:at[q + 1]]` (none for a column that is not a pair comparison)."""

    values: np.ndarray
    steps: np.ndarray
    at: np.ndarray


def programs(edges: Sequence[tuple[tuple[str, ast.Expr, ast.Expr], int, int]],
             cols: Mapping[str, np.ndarray], st: np.ndarray) -> Programs:
    """The programs of the scanned predicates `edges` ((predicate, X's state, Y's state) per column)
    over the vertices of states `st`, with the numeric columns `cols` (float64)."""
    m = len(st)
    parts: list[np.ndarray] = []
    steps: list[tuple[int, int]] = []
    at = [0]
    for (op, e, _), src, dst in edges:
        if op == PAIR:
            assert isinstance(e, ast.Binary)
            x_rows, y_rows = np.flatnonzero(st == src), np.flatnonzero(st == dst)
            build = _Builder(cols, m, x_rows, y_rows, parts, steps)
            sides = build.node(e.left)[0], build.node(e.right)[0]
            if FLOAT in sides and _inexact_int(sides):  # Python compares a float with an int exactly
                raise Unsupported("edge predicate values beyond 2**53")
            steps.append((CMP[e.op], 0))
        at.append(len(steps))
    values = np.stack(parts, axis=1) if parts else np.zeros((m, 0), np.float64)
    return Programs(values, np.array(steps, np.int64).reshape(-1, 2), np.array(at, np.int64))


class _Builder:
    """Writes one comparison's program, its parts as columns, and checks its values' magnitudes."""

    def __init__(self, cols: Mapping[str, np.ndarray], m: int, x_rows: np.ndarray, y_rows: np.ndarray,
                 parts: list[np.ndarray], steps: list[tuple[int, int]]) -> None:
        self.cols, self.m, self.x_rows, self.y_rows, self.parts, self.steps = cols, m, x_rows, y_rows, parts, steps

    def node(self, e: ast.Expr) -> tuple[float, float]:
        """Append e's steps; return the largest and least magnitude its values may take (the largest
        `FLOAT` where Python computes a float: a true division, arithmetic on one)."""
        if not _mixed(e):
            return self._part(e)
        if isinstance(e, ast.Unary):
            bound = self.node(e.operand)
            self.steps.append((NEG, 0))
            return bound
        assert isinstance(e, ast.Binary)
        (a, _), (b, b_least) = self.node(e.left), self.node(e.right)
        self.steps.append((_ARITH[e.op], 0))
        if e.op in ("/", "%") and b_least == 0 and not _mixed(e.right):  # a part of one event: 0 somewhere
            raise Unsupported("division by zero in an edge predicate")
        if a == FLOAT or b == FLOAT or e.op == "/":
            # a float in Python (a true division, or an operand a float), computed as here: each int
            # operand must be exact in float64 (Python converts it, or divides exact ints, rounding once)
            if _inexact_int((a, b)):
                raise Unsupported("edge predicate values beyond 2**53")
            return FLOAT, 0.0
        top = b if e.op == "%" else a + b if e.op in ("+", "-") else a * b  # Python's %: below the divisor
        if top > EXACT_FLOAT:
            raise Unsupported("edge predicate values beyond 2**53")
        return top, 0.0

    def _part(self, e: ast.Expr) -> tuple[float, float]:
        """A part of one event (or a constant) as a column, computed on its events only."""
        x = _reads(e, False)
        rows = self.x_rows if x else self.y_rows
        got = vector_eval(e, {a: c[rows] for a, c in self.cols.items()})
        column = np.zeros(self.m, np.float64)
        column[rows] = got
        magnitude = np.abs(column[rows])
        self.steps.append((LOAD_X if x else LOAD_Y, len(self.parts)))
        self.parts.append(column)
        return float(magnitude.max(initial=0.0)), float(magnitude.min(initial=np.inf))


@njit(cache=True, inline="always")
def judge(out, v, values, steps, a, b, preds):  # noqa: ANN001, ANN202
    """out[k]: whether the comparison of program steps a..b-1 holds for predecessor preds[k] and event
    v (`TRUE`, `FALSE`, or `ERROR` where a divisor is 0), for every k at once: each step over all of
    them (a step's branch once, not once a pair)."""
    n = preds.shape[0]
    stack = np.empty((b - a, n), np.float64)
    bad = np.zeros(n, np.bool_)
    d = 0
    for i in range(a, b):
        op, c = steps[i, 0], steps[i, 1]
        if op == LOAD_X:
            for k in range(n):
                stack[d, k] = values[preds[k], c]
            d += 1
        elif op == LOAD_Y:
            stack[d, :] = values[v, c]
            d += 1
        elif op == NEG:
            for k in range(n):
                stack[d - 1, k] = -stack[d - 1, k]
        else:
            d -= 1
            x, y = stack[d - 1], stack[d]
            if op == ADD:
                for k in range(n):
                    x[k] = x[k] + y[k]
            elif op == SUB:
                for k in range(n):
                    x[k] = x[k] - y[k]
            elif op == MUL:
                for k in range(n):
                    x[k] = x[k] * y[k]
            elif op == DIV or op == MOD:  # noqa: SIM109 - numba compiles comparisons, not a tuple
                for k in range(n):
                    if y[k] == 0:  # Python raises: the pair's judgment is ERROR
                        bad[k] = True
                        x[k] = 0.0
                    elif op == DIV:
                        x[k] = x[k] / y[k]
                    else:
                        x[k] = x[k] % y[k]  # numba's float % is Python's (the sign of the divisor)
            else:
                _compare(out, op, x, y, n)
    for k in range(n):
        if bad[k]:
            out[k] = ERROR


@njit(cache=True, inline="always")
def _compare(out, op, x, y, n):  # noqa: ANN001, ANN202
    for k in range(n):
        if op == 10:
            out[k] = x[k] == y[k]
        elif op == 11:
            out[k] = x[k] != y[k]
        elif op == 12:
            out[k] = x[k] < y[k]
        elif op == 13:
            out[k] = x[k] <= y[k]
        elif op == 14:
            out[k] = x[k] > y[k]
        else:
            out[k] = x[k] >= y[k]


def _inexact_int(bounds: tuple[float, float]) -> bool:
    """Some operand, not a float (`FLOAT`), may pass 2**53: float64 would not hold it as Python's int."""
    return any(x != FLOAT and x > EXACT_FLOAT for x in bounds)


def _reads(e: ast.Expr, nxt: bool) -> bool:
    return any(r.next == nxt for r in ast.expr_refs(e))


def _mixed(e: ast.Expr) -> bool:
    return _reads(e, False) and _reads(e, True)


def _arith(e: ast.Expr) -> bool:
    if isinstance(e, ast.Binary):
        return e.op in _ARITH and _arith(e.left) and _arith(e.right)
    if isinstance(e, ast.Unary):
        return e.op == "-" and _arith(e.operand)
    return isinstance(e, ast.AttrRef) or (isinstance(e, ast.Literal) and isinstance(e.value, (int, float))
                                          and not isinstance(e.value, bool))
