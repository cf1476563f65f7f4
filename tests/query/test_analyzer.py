"""Analyzer: every semantic error is reported at once, with line and column."""

from __future__ import annotations

import pytest

from greta_stream import compile_query
from greta_stream.errors import QueryError


def problems(text: str) -> list[tuple[str, int, int]]:
    with pytest.raises(QueryError) as info:
        compile_query(text)
    return [(p.msg, p.line, p.column) for p in info.value.problems]


@pytest.mark.parametrize(
    "text,fragment,column",
    [
        ("RETURN COUNT(*) PATTERN (NOT A)+ WITHIN 1 s", "NOT is allowed only as a part of a SEQ", 26),
        ("RETURN COUNT(*) PATTERN SEQ(A, NOT B, NOT C, D) WITHIN 1 s", "side by side", 39),
        ("RETURN COUNT(*) PATTERN SEQ(NOT A, NOT B) WITHIN 1 s", "at least one positive part", 25),
        ("RETURN COUNT(*) PATTERN SEQ(SEQ(NOT C, A), B) WITHIN 1 s", "NOT can begin only the outermost SEQ", 33),
        ("RETURN COUNT(*) PATTERN (SEQ(A, NOT C))+ WITHIN 1 s", "NOT can end only the outermost SEQ", 33),
        ("RETURN COUNT(*) PATTERN SEQ(A, NOT SEQ(NOT C, D), B) WITHIN 1 s", "NOT can begin only the outermost SEQ", 40),
        ("RETURN COUNT(*) PATTERN SEQ(A, A) WITHIN 1 s", "alias 'A' is bound twice", 32),
        ("RETURN COUNT(*), SUM(X.v) PATTERN A WITHIN 1 s", "unknown alias 'X'", 18),
        ("RETURN COUNT(*), SUM(E.v) PATTERN SEQ(A, NOT E, B) WITHIN 1 s", "alias under NOT", 18),
        ("RETURN g, COUNT(*) PATTERN A WITHIN 1 s", "not a GROUP-BY attribute", 8),
        ("RETURN COUNT(*) AS n, COUNT(A) AS n PATTERN A WITHIN 1 s", "appears twice", 23),
        ("RETURN COUNT(*) PATTERN A WHERE B.x > 1 WITHIN 1 s", "unknown alias 'B'", 33),
        ("RETURN COUNT(*) PATTERN A WHERE x > 1 WITHIN 1 s", "qualify attribute 'x'", 33),
        ("RETURN COUNT(*) PATTERN SEQ(A, B) WHERE A.x > B.x WITHIN 1 s", "may not mix", 41),
        ("RETURN COUNT(*) PATTERN SEQ(A, B) WHERE B.x > NEXT(A).x WITHIN 1 s", "B is never immediately followed by A", 41),
        ("RETURN COUNT(*) PATTERN SEQ(A, NOT E, B) WHERE A.x > NEXT(E).x WITHIN 1 s", "never immediately followed", 48),
        ("RETURN COUNT(*) PATTERN A+ WHERE NEXT(A).x > 1 WITHIN 1 s", "needs both", 34),
        ("RETURN COUNT(*) PATTERN SEQ(A, NOT E, B) WHERE [E.x] WITHIN 1 s", "at least one positive alias", 49),
        ("RETURN COUNT(*) PATTERN A WHERE NOT [x] WITHIN 1 s", "must stand on its own", 33),
        ("RETURN COUNT(*) PATTERN A GROUP-BY g, g WITHIN 1 s", "GROUP-BY lists 'g' twice", 39),
        ("RETURN COUNT(*) PATTERN A WITHIN 0 s", "WITHIN must be a positive duration", 34),
        ("RETURN COUNT(*) PATTERN A WITHIN 1 s SLIDE 2 s", "SLIDE may not be longer than WITHIN", 44),
    ],
)
def test_semantic_error_position(text: str, fragment: str, column: int) -> None:
    found = problems(text)
    assert any(fragment in msg and col == column and line == 1 for msg, line, col in found), found


def test_all_errors_reported_at_once_in_text_order() -> None:
    found = problems("RETURN g, SUM(Z.v)\nPATTERN SEQ(A, B, NOT C)+\nWITHIN 5 s SLIDE 10 s")
    assert [(line, col) for _, line, col in found] == sorted((line, col) for _, line, col in found)
    assert len(found) == 4


def test_valid_edge_predicates_across_not_and_kleene() -> None:
    compile_query("RETURN COUNT(*) PATTERN SEQ(A+, NOT E, B) WHERE A.x < NEXT(B).x AND A.x < NEXT(A).x AND E.y > 1 WITHIN 1 s")
    compile_query("RETURN COUNT(*) PATTERN (SEQ(A, B))+ WHERE B.x < NEXT(A).x WITHIN 1 s")
    compile_query("RETURN COUNT(*) PATTERN SEQ(A, NOT SEQ(C+, D), B) WHERE C.x < NEXT(D).x AND C.x < NEXT(C).x WITHIN 1 s")


def test_error_message_renders_excerpt() -> None:
    with pytest.raises(QueryError) as info:
        compile_query("RETURN COUNT(*)\nPATTERN SEQ(A, B+, NOT C)+\nWITHIN 1 s")
    text = str(info.value)
    assert "line 2, column 20" in text
    assert "  PATTERN SEQ(A, B+, NOT C)+\n" in text and "^^^^^" in text
