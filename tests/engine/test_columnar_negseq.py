"""A middle NOT over a SEQ (`SEQ(A+, NOT SEQ(C, D), B)`) on the columnar engine, against the general
engine, the oracle and through micro-batches with restores.

Dense streams of four types over a few seconds with equal times: a negated match needs a C and a later
D strictly between two positive events, which sparse random streams seldom hold. Parts of one type
(`NOT SEQ(C c, C d)`), parts of a positive type, local predicates on the negated parts, edge predicates
on the loop and across the negated step, GROUP-BY and equivalence attributes, every selection strategy.
"""

from __future__ import annotations

from columnar_support import SETTINGS, assert_same_rows, batches_and_watermarks, check, check_against_general
from columnar_support import dense_events as dense
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream.query import ast, parse
from greta_stream.testing.oracle import oracle_rows

SHAPES = [  # (pattern, edge predicates it may take)
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["a.v > NEXT(a).v", "a.v < NEXT(b).v"]),
    ("SEQ(A a, NOT SEQ(C c, C d), A b+)", ["b.v >= NEXT(b).v", "a.v != NEXT(b).v"]),
    ("SEQ(A a+, NOT SEQ(C c, D d, C e), B b+)", ["a.v <= NEXT(a).v"]),
    ("SEQ(A a, NOT SEQ(A c, D d), B b, NOT E e, A f)", ["a.v < NEXT(b).v"]),
    ("SEQ(NOT E e, A a+, NOT SEQ(C c+, D d), B b)", []),
]
LOCALS = ["c.v > 0", "d.f < 2", "a.v > 0"]


@st.composite
def negseq_query(draw) -> str:  # noqa: ANN001
    pattern, edges = draw(st.sampled_from(SHAPES))
    aliases = {w.rstrip("+,)") for w in pattern.replace("(", " ").split() if w[0].islower()}
    where = [e for e in edges if draw(st.integers(0, 2))]
    where += [p for p in LOCALS if p[0] in aliases and draw(st.integers(0, 1))]
    if draw(st.booleans()):
        where.append("[k]")
    group = draw(st.sampled_from(["", "g"]))
    items = [*([group] if group else []), "COUNT(*)", "SUM(b.v)", "MAX(a.f)", "AVG(a.v)"]
    within = draw(st.integers(3, 12))
    slide = draw(st.integers(1, within))
    return (f"RETURN {', '.join(items)} PATTERN {pattern} SEMANTICS {draw(st.sampled_from(ast.STRATEGIES))} "
            + (f"WHERE {' AND '.join(where)} " if where else "")
            + (f"GROUP-BY {group} " if group else "") + f"WITHIN {within} s SLIDE {slide} s")


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AAABBCCDDE", n_max=n_max, n_min=6, seconds=9)  # n_min: room for a match between two


@settings(max_examples=300, **SETTINGS)
@given(negseq_query(), dense_events())
def test_a_negated_seq_equals_the_general_engine(text: str, events: list[dict]) -> None:
    check_against_general(text, events)


@settings(max_examples=100, **SETTINGS)
@given(negseq_query(), dense_events(n_max=10))
def test_a_negated_seq_equals_the_oracle(text: str, events: list[dict]) -> None:
    got = evaluate(text, events, engine="columnar")
    assert got.engine == "columnar"
    assert_same_rows(text, events, oracle_rows(parse(text), events), got, ("oracle", "columnar"))


@settings(max_examples=50, **SETTINGS)
@given(st.data())
def test_a_negated_seq_streamed_equals_the_general_engine(data: st.DataObject) -> None:
    text, events = data.draw(negseq_query()), data.draw(dense_events())
    check(text, events, batches_and_watermarks(data.draw, events), restore=data.draw(st.booleans()))


def test_a_match_strictly_between_excludes_the_adjacency() -> None:
    """a1 c2 d3 b4: the match c2 d3 lies between a1 and b4 (excluded); a match starting at a's own
    time or ending at b's does not."""
    text = "RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d), B b) WITHIN 10 s"

    def count(events: list[tuple[str, float]]) -> int:
        rows = evaluate(text, [{"type": t, "time": at} for t, at in events], engine="columnar")
        assert rows.engine == "columnar"
        return sum(r["count"] for r in rows)

    assert count([("A", 1), ("C", 2), ("D", 3), ("B", 4)]) == 0
    assert count([("A", 1), ("C", 1), ("D", 3), ("B", 4)]) == 1  # c at a's time: not after it
    assert count([("A", 1), ("C", 2), ("D", 4), ("B", 4)]) == 1  # d at b's time: not before it
    assert count([("A", 1), ("D", 2), ("C", 3), ("B", 4)]) == 1  # d before c: no match
    assert count([("A", 1), ("C", 2), ("D", 2), ("B", 4)]) == 1  # c and d at one time: never adjacent
