"""Parser: the grammar of docs/QUERY_LANGUAGE.md section 2, spans, errors, round trip."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream.compiler import format_query
from greta_stream.errors import QueryError
from greta_stream.query import ast, parse

Q1 = """RETURN sector, COUNT(*), AVG(S.price)
PATTERN Stock S+
WHERE [company, sector] AND S.price > NEXT(S).price
GROUP-BY sector WITHIN 10 minutes SLIDE 10 seconds"""


def test_parses_the_stock_query() -> None:
    q = parse(Q1)
    assert q.returns == (ast.GroupItem("sector"), ast.Aggregate("COUNT"), ast.Aggregate("AVG", "S", "price"))
    assert q.pattern == ast.Kleene(ast.EventPattern("Stock", "S"))
    assert q.where == (
        ast.Equivalence((ast.AttrRef(None, "company"), ast.AttrRef(None, "sector"))),
        ast.Condition(ast.Binary(">", ast.AttrRef("S", "price"), ast.AttrRef("S", "price", next=True))),
    )
    assert q.group_by == ("sector",)
    assert q.within.seconds == 600 and q.slide is not None and q.slide.seconds == 10


def test_keywords_are_case_insensitive_and_comments_ignored() -> None:
    q = parse("return count(*) -- the count\npattern seq(a+, not e, b) within 2 MIN slide 500 ms")
    assert q.pattern == ast.Seq((ast.Kleene(ast.EventPattern("a", "a")), ast.Not(ast.EventPattern("e", "e")), ast.EventPattern("b", "b")))
    assert q.within.seconds == 120 and q.slide.seconds == Fraction(1, 2)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "unit,seconds",
    [("ms", Fraction(1, 1000)), ("millisecond", Fraction(1, 1000)), ("milliseconds", Fraction(1, 1000)),
     ("s", 1), ("sec", 1), ("second", 1), ("seconds", 1), ("min", 60), ("minute", 60), ("minutes", 60),
     ("h", 3600), ("hour", 3600), ("hours", 3600), ("d", 86400), ("day", 86400), ("days", 86400)],
)
def test_every_duration_unit(unit: str, seconds: Fraction) -> None:
    assert parse(f"RETURN COUNT(*) PATTERN A WITHIN 2 {unit}").within.seconds == 2 * seconds


def test_nested_negation_and_aliases() -> None:
    q = parse("RETURN COUNT(*) PATTERN (SEQ(A a+, NOT SEQ(C, NOT E, D), B))+ WITHIN 1 h")
    seq = q.pattern.inner  # type: ignore[union-attr]
    assert isinstance(seq, ast.Seq) and seq.parts[0] == ast.Kleene(ast.EventPattern("A", "a"))
    assert seq.parts[1] == ast.Not(ast.Seq((ast.EventPattern("C", "C"), ast.Not(ast.EventPattern("E", "E")), ast.EventPattern("D", "D"))))


def test_expressions_follow_precedence() -> None:
    q = parse("RETURN COUNT(*) PATTERN M+ WHERE M.load * 1.05 < NEXT(M).load OR NOT M.x = 'a' AND M.y <> -2 WITHIN 1 s")
    (cond,) = q.where
    assert isinstance(cond, ast.Condition)
    e = cond.expr
    assert isinstance(e, ast.Binary) and e.op == "OR"
    assert e.left == ast.Binary("<", ast.Binary("*", ast.AttrRef("M", "load"), ast.Literal(1.05)), ast.AttrRef("M", "load", True))
    assert e.right == ast.Binary("AND", ast.Unary("NOT", ast.Binary("=", ast.AttrRef("M", "x"), ast.Literal("a"))),
                                 ast.Binary("!=", ast.AttrRef("M", "y"), ast.Literal(-2)))


def test_return_renames_and_trends() -> None:
    q = parse("RETURN g AS grp, COUNT(*) AS n, SUM(A.v) AS total PATTERN A+ GROUP-BY g WITHIN 1 s")
    assert [i.column for i in q.returns] == ["grp", "n", "total"]
    assert parse("RETURN TRENDS PATTERN A+ WITHIN 1 s").trends


def test_spans_point_into_the_text() -> None:
    q = parse(Q1)
    assert (q.pattern.span.line, q.pattern.span.column) == (2, 9)
    assert (q.within.span.line, q.within.span.column) == (4, 24)


@pytest.mark.parametrize(
    "text,line,column,fragment",
    [
        ("RETURN COUNT(*) PATTERN SEQ(A, B WITHIN 1 s", 1, 34, "unexpected 'WITHIN'"),
        ("RETURN COUNT(*)\nPATTERN A # WITHIN 1 s", 2, 11, "unexpected character '#'"),
        ("RETURN COUNT(*) PATTERN A WITHIN 1 parsec", 1, 36, "unknown time unit 'parsec'"),
        ("RETURN COUNT(*) PATTERN A", 1, 26, "query ends too early"),
        ("RETURN COUNT(*) PATTERN A WHERE A.x > WITHIN 1 s", 1, 39, "unexpected 'WITHIN'"),
        ("PATTERN A WITHIN 1 s", 1, 1, "expected RETURN"),
    ],
)
def test_syntax_errors_have_positions(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    p = info.value.first
    assert (p.line, p.column) == (line, column)
    assert fragment in p.msg
    assert "^" in str(info.value)


HUGE = "9" * 10_000


@pytest.mark.parametrize(
    "literal,fragment",
    [
        (HUGE, "has 10,000 digits: at most 4,300"),  # int() refuses more than 4,300 digits: was a VisitError
        (HUGE + ".5", "has 10,001 digits: at most 4,300"),
        ("0." + "0" * 4299 + "1", "has 4,301 digits"),
        ("1e" + "0" * 4300, "has 4,301 digits"),
        ("1e999", "1e999 is too large for a 64-bit float"),
        ("0.5E+400", "too large for a 64-bit float"),
        ("1e-999", "1e-999 is too small for a 64-bit float"),
    ],
)
def test_number_literals_beyond_the_limits_have_positions(literal: str, fragment: str) -> None:
    for text, column in ((f"RETURN COUNT(*)\nPATTERN A+ WHERE A.x > {literal} WITHIN 1 s", 24),
                         (f"RETURN COUNT(*)\nPATTERN A+ WITHIN {literal} s", 19)):  # durations too: Fraction(1e-99999999) takes minutes
        with pytest.raises(QueryError) as info:
            parse(text)
        p = info.value.first
        assert (p.line, p.column, p.end_column) == (2, column, column + len(literal))
        assert fragment in p.msg and len(p.msg) < 120  # the literal is shortened, not repeated


def test_number_literals_within_the_limits_are_exact() -> None:
    big = "9" * 4300
    (cond,) = parse(f"RETURN COUNT(*) PATTERN A+ WHERE A.x > -{big} WITHIN 1 s").where
    assert cond.expr.right == ast.Literal(-int(big))  # type: ignore[attr-defined]
    (cond,) = parse("RETURN COUNT(*) PATTERN A+ WHERE A.x > 1.5e308 AND A.y > 0e-999 AND A.z < 1e-320 WITHIN 1 s").where[:1]
    assert cond.expr.right == ast.Literal(1.5e308)  # type: ignore[attr-defined]
    assert parse("RETURN COUNT(*) PATTERN A+ WITHIN 1e-300 s").within.seconds == Fraction(1, 10**300)


# ------------------------------------------------------------ round trip

_names = st.sampled_from(["A", "B", "C", "Stock"])


@st.composite
def patterns(draw: st.DrawFn, depth: int = 0) -> ast.Pattern:
    counter = draw(st.shared(st.just([0]), key="alias-counter"))
    if depth >= 2 or draw(st.booleans()):
        counter[0] += 1
        return ast.EventPattern(draw(_names), f"x{counter[0]}")
    if draw(st.booleans()):
        return ast.Kleene(draw(patterns(depth + 1)))
    parts = [draw(patterns(depth + 1)) for _ in range(draw(st.integers(2, 3)))]
    if draw(st.booleans()):
        parts.insert(1, ast.Not(draw(patterns(depth + 1))))
    return ast.Seq(tuple(parts))


exprs = st.recursive(
    st.one_of(
        st.integers(-5, 5).map(ast.Literal), st.sampled_from(["p", "it's"]).map(ast.Literal),
        st.floats(0.5, 9.5).map(lambda f: ast.Literal(round(f, 2))),
        st.sampled_from([ast.AttrRef("x1", "v"), ast.AttrRef("x1", "w", next=True)]),
    ),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*", "/", "%", "<", "=", "!=", ">="]), inner, inner).map(lambda t: ast.Binary(*t)),
        inner.map(lambda e: ast.Unary("NOT", e)),
    ),
    max_leaves=5,
)


@settings(max_examples=150, deadline=None)
@given(patterns(), st.lists(exprs, max_size=2), st.booleans(), st.sampled_from([None, "s", "ms"]))
def test_parse_of_format_is_identity(pattern: ast.Pattern, conds: list[ast.Expr], grouped: bool, slide: str | None) -> None:
    q = ast.Query(
        returns=(ast.Aggregate("COUNT"), ast.Aggregate("SUM", "x1", "v", name="total")),
        pattern=pattern,
        where=(ast.Equivalence((ast.AttrRef(None, "g"), ast.AttrRef("x1", "h"))), *(ast.Condition(e) for e in conds)),
        group_by=("g",) if grouped else (),
        within=ast.Duration(Fraction(5), "min"),
        slide=None if slide is None else ast.Duration(Fraction(3, 2), slide),
    )
    assert parse(format_query(q)) == q
