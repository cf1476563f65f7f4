"""Predicate expressions -> Python closures (never eval/exec of query text).

A local predicate compiles to `f(x) -> bool`, an edge predicate to
`f(x, y) -> bool`, where `x` and `y` are attribute dicts of the events bound
to `X` and `NEXT(Y)`. Arithmetic follows Python (docs/QUERY_LANGUAGE.md section 2).
An evaluation error propagates as an exception; the engine turns it into
"false" and counts it, so a bad value never stops a stream.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from greta_stream.query import ast

Getter = Callable[[Any, Any], Any]

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "%": operator.mod,
    "=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def compile_expr(e: ast.Expr) -> Getter:
    """Closure `(x, y) -> value`: plain refs read `x`, NEXT refs read `y`."""
    if isinstance(e, ast.Literal):
        value = e.value
        return lambda x, y: value
    if isinstance(e, ast.AttrRef):
        name = e.attr
        if e.next:
            return lambda x, y: y[name]
        return lambda x, y: x[name]
    if isinstance(e, ast.Unary):
        inner = compile_expr(e.operand)
        if e.op == "NOT":
            return lambda x, y: not inner(x, y)
        return lambda x, y: -inner(x, y)
    left, right = compile_expr(e.left), compile_expr(e.right)
    if e.op == "AND":
        return lambda x, y: bool(left(x, y)) and bool(right(x, y))
    if e.op == "OR":
        return lambda x, y: bool(left(x, y)) or bool(right(x, y))
    fn = _BINARY[e.op]
    return lambda x, y: fn(left(x, y), right(x, y))


def compile_local(exprs: list[ast.Expr]) -> Callable[[Any], bool] | None:
    """All local predicates of one alias as one `f(x) -> bool`, or None."""
    if not exprs:
        return None
    fns = [compile_expr(e) for e in exprs]
    if len(fns) == 1:
        only = fns[0]
        return lambda x: bool(only(x, None))
    return lambda x: all(bool(f(x, None)) for f in fns)


def compile_edge(exprs: list[ast.Expr]) -> Callable[[Any, Any], bool] | None:
    """All edge predicates of one alias pair as one `f(x, y) -> bool`, or None."""
    if not exprs:
        return None
    fns = [compile_expr(e) for e in exprs]
    if len(fns) == 1:
        only = fns[0]
        return lambda x, y: bool(only(x, y))
    return lambda x, y: all(bool(f(x, y)) for f in fns)


INDEXABLE_OPS = ("<", "<=", ">", ">=", "=")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


def edge_comparison(e: ast.Expr) -> tuple[str, Getter, Getter] | None:
    """`(op, x_side, y_side)` when `e` compares an expression of the plain
    alias with one of the NEXT alias (`X.a * 1.05 < NEXT(Y).b`), so that
    `e(x, y) == x_side(x, None) op y_side(None, y)`; else None.

    The engine indexes such a predicate (x_side as key, y_side as probe).
    Either side may be any arithmetic of one alias and constants; the sides
    are swapped (and the operator flipped) when NEXT stands on the left.
    """
    sides = edge_sides(e)
    if sides is None:
        return None
    op, x_side, y_side = sides
    return op, compile_expr(x_side), compile_expr(y_side)


def edge_sides(e: ast.Expr, unequal: bool = False) -> tuple[str, ast.Expr, ast.Expr] | None:
    """`(op, x_side, y_side)` as expressions: the shape `edge_comparison` compiles;
    with `unequal` also for `!=` (which no index answers: the columnar engine scans it)."""
    if not isinstance(e, ast.Binary) or (e.op not in INDEXABLE_OPS and not (unequal and e.op == "!=")):
        return None
    left, right = _side(e.left), _side(e.right)
    if left == "x" and right == "y":
        return e.op, e.left, e.right
    if left == "y" and right == "x":
        return _FLIP[e.op], e.right, e.left
    return None


def _side(e: ast.Expr) -> str | None:
    """"x" if e reads only plain refs, "y" if only NEXT refs, else None."""
    refs = ast.expr_refs(e)
    if not refs or any(not _arith(n) for n in _nodes(e)):
        return None
    kinds = {r.next for r in refs}
    if len(kinds) != 1:
        return None
    return "y" if kinds.pop() else "x"


def _arith(e: ast.Expr) -> bool:
    if isinstance(e, ast.Binary):
        return e.op in ("+", "-", "*", "/", "%")
    if isinstance(e, ast.Unary):
        return e.op == "-"
    return True


def _nodes(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Binary):
        return [e, *_nodes(e.left), *_nodes(e.right)]
    if isinstance(e, ast.Unary):
        return [e, *_nodes(e.operand)]
    return [e]


def format_expr(e: ast.Expr) -> str:
    """Query-language text of an expression, fully parenthesized where needed."""
    if isinstance(e, ast.Literal):
        if isinstance(e.value, bool):
            return "TRUE" if e.value else "FALSE"
        if isinstance(e.value, str):
            return "'" + e.value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return repr(e.value)
    if isinstance(e, ast.AttrRef):
        if e.alias is None:
            return e.attr
        return f"NEXT({e.alias}).{e.attr}" if e.next else f"{e.alias}.{e.attr}"
    if isinstance(e, ast.Unary):
        return f"(NOT {format_expr(e.operand)})" if e.op == "NOT" else f"-({format_expr(e.operand)})"
    return f"({format_expr(e.left)} {e.op} {format_expr(e.right)})"
