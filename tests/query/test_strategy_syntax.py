"""The SEMANTICS clause and bounded repetition (docs/QUERY_LANGUAGE.md section 11):
what parses, its normal form, and each refusal with its position."""

from __future__ import annotations

import pytest

from greta_stream import QueryError, compile_query
from greta_stream.compiler.compiled import format_query
from greta_stream.query import ast, parse
from greta_stream.query.analyzer import parse_and_analyze


def pattern_of(text: str) -> ast.Query:
    return parse_and_analyze(f"RETURN COUNT(*) PATTERN {text} WITHIN 10 s")


@pytest.mark.parametrize(("text", "strategy"), [
    ("A+", ast.ANY_MATCH),
    ("A+ SEMANTICS skip-till-any-match", ast.ANY_MATCH),
    ("A+ semantics Skip-Till-Next-Match", ast.NEXT_MATCH),
    ("A+ SEMANTICS skip_till_next_match", ast.NEXT_MATCH),
    ("SEQ(A, B) SEMANTICS CONTIGUOUS", ast.CONTIGUOUS),
])
def test_the_clause_names_a_strategy_in_any_case(text: str, strategy: str) -> None:
    assert pattern_of(text).strategy == strategy


@pytest.mark.parametrize(("text", "node"), [
    ("A{3}", ast.Repeat(ast.EventPattern("A", "A"), 3, 3)),
    ("A{2,4}", ast.Repeat(ast.EventPattern("A", "A"), 2, 4)),
    ("A{2,}", ast.Repeat(ast.EventPattern("A", "A"), 2, None)),
    ("A{1,}", ast.Kleene(ast.EventPattern("A", "A"))),
    ("(SEQ(A, B)){2}", ast.Repeat(ast.Seq((ast.EventPattern("A", "A"), ast.EventPattern("B", "B"))), 2, 2)),
])
def test_quantifiers_parse_to_their_normal_form(text: str, node: ast.Pattern) -> None:
    assert pattern_of(text).pattern == node


@pytest.mark.parametrize("text", [
    "SEQ(A a, B b?, C c*) SEMANTICS contiguous", "SEQ(A{0,3}, B)", "(SEQ(A, B)){2,3}", "A x{2,} SEMANTICS "
    "skip-till-next-match", "SEQ(A, NOT E, B{2})",
])
def test_format_then_parse_gives_the_same_query(text: str) -> None:
    q = pattern_of(text)
    assert parse(format_query(q)) == q


@pytest.mark.parametrize(("text", "message", "column"), [
    ("A{3,2}", "{3,2} repeats at least 3 and at most 2 times", 25),
    ("A{0}", "{0} repeats nothing", 25),
    ("A{65}", "a repetition count may be at most 64, not 65", 27),
    ("A?", "only as a part of a SEQ", 25),
    ("(A*)+", "only as a part of a SEQ", 26),
    ("SEQ(A?, B*)", "every part of this SEQ may match nothing", 25),
    ("SEQ(A, NOT E, B?)", "may not stand next to a NOT", 39),
    ("SEQ(C?, NOT E, B)", "may not stand next to a NOT", 29),
    ("(A+){2}", "once per way of cutting it into iterations", 25),
    ("(A{1,2})+", "once per way of cutting it into iterations", 26),
    ("(SEQ(A, B{16})){16}", "272 states", 25),
    ("(((A{64}){64}){64}){64}", "16,777,216 states", 25),
    ("A+ SEMANTICS strict", "unknown selection strategy 'strict'", 38),
    ("SEQ(B b, A a?) WHERE [a.h]", "'h' applies only to a, which a trend may leave out", 47),
])
def test_refusals_say_what_and_where(text: str, message: str, column: int) -> None:
    with pytest.raises(QueryError) as exc:
        compile_query(f"RETURN COUNT(*) PATTERN {text} WITHIN 10 s")
    problem = exc.value.first
    assert message in problem.msg and (problem.line, problem.column) == (1, column), problem


def test_an_edge_predicate_across_an_optional_part_is_allowed_and_one_across_a_required_part_is_not() -> None:
    compile_query("RETURN COUNT(*) PATTERN SEQ(A, B?, C) WHERE A.v < NEXT(C).v WITHIN 10 s")
    with pytest.raises(QueryError, match="A is never immediately followed by C"):
        compile_query("RETURN COUNT(*) PATTERN SEQ(A, B, C) WHERE A.v < NEXT(C).v WITHIN 10 s")
