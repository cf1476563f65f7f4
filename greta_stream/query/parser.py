"""Text -> AST: the lark LALR grammar in `grammar.lark` and a transformer.

`parse(text)` returns a `Query` with spans and raises `QueryError` (line,
column, excerpt) when the text does not parse. It checks only syntax and what
the grammar cannot say (units, literals); meaning is checked by `analyzer`.
Query text is never evaluated as code.
"""

from __future__ import annotations

import ast as pyast
import sys
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from greta_stream.errors import QueryError, QueryProblem
from greta_stream.query import aggregates, ast

_GRAMMAR = Path(__file__).with_name("grammar.lark")

# Human names for the grammar's terminals in "expected ..." messages.
_TERMINAL_NAMES = {
    "_RETURN": "RETURN", "_TRENDS": "TRENDS", "_AS": "AS", "COUNT": "COUNT",
    "_PATTERN": "PATTERN", "_SEQ": "SEQ", "_NOT": "NOT", "_WHERE": "WHERE", "GROUP_BY": "GROUP-BY",
    "_WITHIN": "WITHIN", "_SLIDE": "SLIDE", "_OR": "OR", "_AND": "AND", "_NEXT": "NEXT",
    "_TRUE": "TRUE", "_FALSE": "FALSE", "NAME": "a name", "NUMBER": "a number", "STRING": "a string",
    "COMPOP": "a comparison", "ADDOP": "+ or -", "MULOP": "* / %", "PLUS": "'+'", "STAR": "'*'",
    "QMARK": "'?'", "LBRACE": "'{'", "RBRACE": "'}'", "_SEMANTICS": "SEMANTICS", "STRATEGY": "a selection strategy",
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "DOT": "'.'", "LSQB": "'['", "RSQB": "']'", "MINUS": "'-'",
    "$END": "end of query",
}


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = _GRAMMAR.read_text().replace("%AGGREGATES%", aggregates.grammar_terminal())
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


class QuerySyntaxError(QueryError):
    """The query text does not parse."""


# Digits a number literal may have (mantissa and exponent together): Python's
# default limit for reading an exact integer (sys.int_info), lower when the
# interpreter's limit is. A literal with a fraction or an exponent must also be
# a finite 64-bit float that is not rounded to zero: that bounds the exponent,
# so no literal (nor the exact Fraction of a duration) costs more than a few
# thousand digits to read.
MAX_NUMBER_DIGITS = 4_300

# Levels of nesting a query may have: patterns, parentheses, Kleene pluses and
# operator chains (`a AND b AND c` is two levels). Every later stage walks the
# query recursively; this bound keeps it far from Python's recursion limit.
MAX_NESTING = 100


def parse(text: str) -> ast.Query:
    """Parse query text into a `Query`; raise `QueryError` with a position."""
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise QuerySyntaxError([_syntax_problem(exc, text)], text) from None
    _check_nesting(tree, text)
    try:
        return _Build().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, QueryError):
            raise QuerySyntaxError(exc.orig_exc.problems, text) from None
        raise


def _check_nesting(tree: Tree, text: str) -> None:
    """`QueryError` at the first part of the query nested deeper than `MAX_NESTING`
    (the parser itself is iterative; this walk is too)."""
    stack: list[tuple[Tree, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            span = _span(node.meta)
            raise QuerySyntaxError([QueryProblem(
                f"the query nests too deeply: more than {MAX_NESTING} levels of patterns, parentheses, "
                f"Kleene pluses or operators", max(span.line, 1), max(span.column, 1))], text)
        stack.extend((child, depth + 1) for child in reversed(node.children) if isinstance(child, Tree))


def _syntax_problem(exc: UnexpectedInput, text: str) -> QueryProblem:
    line, column = max(exc.line, 1), max(exc.column, 1)
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream
        ch = text[pos] if pos is not None and pos < len(text) else "?"
        return QueryProblem(f"unexpected character {ch!r}", line, column, column + 1)
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        expected = _expected(getattr(exc, "expected", ()))
        lines = text.splitlines() or [""]
        return QueryProblem(f"query ends too early; expected {expected}", len(lines), len(lines[-1]) + 1)
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    before = (getattr(exc, "token_history", None) or [None])[-1]
    if tok.type == "LPAR" and before is not None and before.type == "NAME" and "_PATTERN" in exc.expected:
        return QueryProblem(f"unknown aggregate function {str(before)!r}; the functions are "
                            f"{', '.join(aggregates.FUNCTIONS)}", before.line or line, before.column or column,
                            (before.column or column) + len(str(before)))
    end = column + max(1, len(str(tok)))
    return QueryProblem(f"unexpected {str(tok)!r}; expected {_expected(exc.expected)}", line, column, end)


def _expected(names: object) -> str:
    named = {**_TERMINAL_NAMES, "AGGFUNC": "/".join(aggregates.over_attributes())}
    shown = sorted({named.get(n, n) for n in names})  # type: ignore[attr-defined]
    return ", ".join(shown[:8]) + (", ..." if len(shown) > 8 else "") if shown else "something else"


def _span(meta: object) -> ast.Span:
    if getattr(meta, "empty", True):
        return ast.NO_SPAN
    return ast.Span(meta.line, meta.column, meta.end_line, meta.end_column)  # type: ignore[attr-defined]


def _tok_span(tok: Token) -> ast.Span:
    return ast.Span(tok.line or 0, tok.column or 0, tok.end_line or 0, tok.end_column or 0)


def _fail(msg: str, span: ast.Span) -> QueryError:
    return QueryError([QueryProblem(msg, span.line, span.column, span.end_column if span.end_line == span.line else None)])


def _checked_number(tok: Token) -> str:
    """The text of a NUMBER token, or `QueryError` at the token when it breaks
    the rules of `MAX_NUMBER_DIGITS` (where int() would raise or a float be inf)."""
    s = str(tok)
    digits = sum(c.isdigit() for c in s)
    limit = min(MAX_NUMBER_DIGITS, sys.get_int_max_str_digits() or MAX_NUMBER_DIGITS)
    shown = s if len(s) <= 24 else f"{s[:12]}...{s[-8:]}"
    if digits > limit:
        raise _fail(f"number {shown} has {digits:,} digits: at most {limit:,} are allowed", _tok_span(tok))
    if any(c in s for c in ".eE"):
        value = float(s)
        if value == float("inf"):
            raise _fail(f"number {shown} is too large for a 64-bit float (at most about 1.8e308)", _tok_span(tok))
        mantissa = s.partition("e")[0].partition("E")[0]
        if value == 0 and mantissa.strip("0.") != "":
            raise _fail(f"number {shown} is too small for a 64-bit float (it would read as 0)", _tok_span(tok))
    return s


def _number(tok: Token) -> int | float:
    s = _checked_number(tok)
    if any(c in s for c in ".eE"):
        return float(s)
    return int(s)


@v_args(meta=True)
class _Build(Transformer):  # type: ignore[type-arg]
    """Builds AST nodes bottom-up; each method is one grammar alternative."""

    # ------------------------------------------------------------- clauses
    def start(self, meta, children):  # noqa: ANN001
        ret, pattern, *rest = children
        where: tuple = ()
        group_by: tuple = ()
        group_spans: tuple = ()
        within = slide = None
        for c in rest:
            if isinstance(c, tuple) and c and c[0] == "where":
                where = c[1]
            elif isinstance(c, tuple) and c and c[0] == "group":
                group_by, group_spans = c[1], c[2]
            elif isinstance(c, tuple) and c and c[0] == "within":
                within, slide = c[1], c[2]
        trends = ret == "TRENDS"
        pattern, strategy = pattern
        return ast.Query(
            returns=() if trends else tuple(ret), pattern=pattern, where=where, group_by=group_by,
            within=within, slide=slide, trends=trends, strategy=strategy, group_spans=group_spans,
            span=_span(meta),
        )

    def return_clause(self, meta, children):  # noqa: ANN001
        if children and children[0] == "TRENDS":
            return "TRENDS"
        return list(children)

    def trends_item(self, meta, children):  # noqa: ANN001
        return "TRENDS"

    def agg_item(self, meta, children):  # noqa: ANN001
        agg: ast.Aggregate = children[0]
        name = str(children[1]) if len(children) > 1 else None
        return ast.Aggregate(agg.func, agg.alias, agg.attr, name, span=_span(meta))

    def group_item(self, meta, children):  # noqa: ANN001
        name = str(children[1]) if len(children) > 1 else None
        return ast.GroupItem(str(children[0]), name, span=_span(meta))

    def count_star(self, meta, children):  # noqa: ANN001
        return ast.Aggregate("COUNT", span=_span(meta))

    def count_alias(self, meta, children):  # noqa: ANN001
        return ast.Aggregate("COUNT", str(children[1]), span=_span(meta))

    def agg_attr(self, meta, children):  # noqa: ANN001
        func, alias, attr = children
        return ast.Aggregate(str(func).upper(), str(alias), str(attr), span=_span(meta))

    def pattern_clause(self, meta, children):  # noqa: ANN001
        return children[0], (children[1] if len(children) > 1 else ast.ANY_MATCH)

    def semantics_clause(self, meta, children):  # noqa: ANN001
        tok = children[0]
        name = str(tok).lower().replace("_", "-")
        if name not in ast.STRATEGIES:
            raise _fail(f"unknown selection strategy {str(tok)!r}; use {', '.join(ast.STRATEGIES)}", _tok_span(tok))
        return name

    def where_clause(self, meta, children):  # noqa: ANN001
        return ("where", tuple(_conjuncts(children[0])))

    def group_clause(self, meta, children):  # noqa: ANN001
        names = children[1:]
        return ("group", tuple(str(n) for n in names), tuple(_tok_span(n) for n in names))

    def within_clause(self, meta, children):  # noqa: ANN001
        return ("within", children[0], children[1] if len(children) > 1 else None)

    def duration(self, meta, children):  # noqa: ANN001
        num, unit = children
        key = str(unit).lower()
        if key not in ast.UNIT_ALIASES:
            raise _fail(f"unknown time unit {str(unit)!r}; use ms, s, min, h or d", _tok_span(unit))
        return ast.Duration(Fraction(_checked_number(num)), ast.UNIT_ALIASES[key], span=_span(meta))

    # ------------------------------------------------------------ patterns
    def event(self, meta, children):  # noqa: ANN001
        type_ = str(children[0])
        alias = str(children[1]) if len(children) > 1 else type_
        return ast.EventPattern(type_, alias, span=_span(meta))

    def kleene(self, meta, children):  # noqa: ANN001
        return ast.Kleene(children[0], span=_span(meta))

    def star(self, meta, children):  # noqa: ANN001
        return ast.Repeat(children[0], 0, None, span=_span(meta))

    def optional(self, meta, children):  # noqa: ANN001
        return ast.Repeat(children[0], 0, 1, span=_span(meta))

    def repeat_exact(self, meta, children):  # noqa: ANN001
        n = _count(children[1])
        return _repeat(children[0], n, n, _span(meta))

    def repeat_open(self, meta, children):  # noqa: ANN001
        return _repeat(children[0], _count(children[1]), None, _span(meta))

    def repeat_range(self, meta, children):  # noqa: ANN001
        return _repeat(children[0], _count(children[1]), _count(children[2]), _span(meta))

    def seq(self, meta, children):  # noqa: ANN001
        return ast.Seq(tuple(children[0]), span=_span(meta))

    def seq_parts(self, meta, children):  # noqa: ANN001
        return list(children)

    def not_pattern(self, meta, children):  # noqa: ANN001
        return ast.Not(children[0], span=_span(meta))

    # --------------------------------------------------------- expressions
    def or_(self, meta, children):  # noqa: ANN001
        return ast.Binary("OR", children[0], children[1], span=_span(meta))

    def and_(self, meta, children):  # noqa: ANN001
        return ast.Binary("AND", children[0], children[1], span=_span(meta))

    def not_(self, meta, children):  # noqa: ANN001
        return ast.Unary("NOT", children[0], span=_span(meta))

    def compare(self, meta, children):  # noqa: ANN001
        left, op, right = children
        op_s = "!=" if str(op) == "<>" else str(op)
        return ast.Binary(op_s, left, right, span=_span(meta))

    def arith(self, meta, children):  # noqa: ANN001
        left, op, right = children
        return ast.Binary(str(op), left, right, span=_span(meta))

    def neg(self, meta, children):  # noqa: ANN001
        operand = children[0]
        if isinstance(operand, ast.Literal) and isinstance(operand.value, (int, float)) and not isinstance(operand.value, bool):
            return ast.Literal(-operand.value, span=_span(meta))
        return ast.Unary("-", operand, span=_span(meta))

    def number(self, meta, children):  # noqa: ANN001
        return ast.Literal(_number(children[0]), span=_span(meta))

    def string(self, meta, children):  # noqa: ANN001
        return ast.Literal(pyast.literal_eval(str(children[0])), span=_span(meta))

    def true(self, meta, children):  # noqa: ANN001
        return ast.Literal(True, span=_span(meta))

    def false(self, meta, children):  # noqa: ANN001
        return ast.Literal(False, span=_span(meta))

    def qualified(self, meta, children):  # noqa: ANN001
        return ast.AttrRef(str(children[0]), str(children[1]), span=_span(meta))

    def next_ref(self, meta, children):  # noqa: ANN001
        return ast.AttrRef(str(children[0]), str(children[1]), next=True, span=_span(meta))

    def bare(self, meta, children):  # noqa: ANN001
        return ast.AttrRef(None, str(children[0]), span=_span(meta))

    def equivalence(self, meta, children):  # noqa: ANN001
        return ast.Equivalence(tuple(children), span=_span(meta))

    def equiv_attr(self, meta, children):  # noqa: ANN001
        if len(children) == 2:
            return ast.AttrRef(str(children[0]), str(children[1]), span=_span(meta))
        return ast.AttrRef(None, str(children[0]), span=_span(meta))


# Iterations a bounded repetition may name: each one is a state of the
# compiled pattern (an unrolled copy of the repeated part).
MAX_REPEAT = 64


def _count(tok: Token) -> int:
    s = _checked_number(tok)
    if not s.isdigit():
        raise _fail(f"a repetition count is a whole number, not {s}", _tok_span(tok))
    n = int(s)
    if n > MAX_REPEAT:
        raise _fail(f"a repetition count may be at most {MAX_REPEAT}, not {n}", _tok_span(tok))
    return n


def _repeat(inner: ast.Pattern, lo: int, hi: int | None, span: ast.Span) -> ast.Pattern:
    """`P{lo,hi}` in its normal form: `P{1,}` is `P+`, `P{1}` is P; the
    analyzer reports the bounds that make no sense (hi < lo, {0})."""
    if lo == 1 and hi is None:
        return ast.Kleene(inner, span=span)
    if lo == 1 and hi == 1:
        return inner
    return ast.Repeat(inner, lo, hi, span=span)


def _conjuncts(e: ast.Expr | ast.Equivalence) -> list[ast.Predicate]:
    """Split the WHERE expression at its top-level ANDs into predicates."""
    if isinstance(e, ast.Binary) and e.op == "AND":
        return _conjuncts(e.left) + _conjuncts(e.right)
    if isinstance(e, ast.Equivalence):
        return [e]
    return [ast.Condition(e, span=e.span)]


__all__ = ["parse", "QuerySyntaxError", "Tree"]
