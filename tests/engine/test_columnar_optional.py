"""Optional parts `X?` and `X*` of a SEQ (SEMANTICS section 8) on the columnar engine, against the general
engine, the oracle and through micro-batches with restores.

`SEQ(A, B?, C)` has the trends of `SEQ(A, C)` and of `SEQ(A, B, C)`: a state may be stepped over, so a
later state reads the stores of every state before it back to the first required one, a trend may start
after optional first parts and end before optional last ones, and an edge predicate between the
neighbours of an optional part applies where they are adjacent. Dense streams of three types; every
selection strategy (each step over an optional part is a transition of its own, with its own candidates).
"""

from __future__ import annotations

from columnar_support import dense_events as dense
from columnar_support import dense_query, differential_tests
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream.query import ast

SHAPES = [  # (pattern, edge predicates it may take)
    ("SEQ(A a, B b?, C c)", ["a.v < NEXT(c).v", "a.v >= NEXT(b).v", "b.v != NEXT(c).v"]),
    ("SEQ(A a+, B b*, C c)", ["a.v > NEXT(a).v", "b.v <= NEXT(b).v", "a.v < NEXT(c).v"]),
    ("SEQ(A a?, B b+)", ["b.v > NEXT(b).v", "a.v < NEXT(b).v"]),
    ("SEQ(A a, B b, C c?)", ["b.v < NEXT(c).v", "a.v != NEXT(b).v"]),
    ("SEQ(A a, B b?, C c?, A d)", ["a.v < NEXT(d).v", "b.v < NEXT(d).v", "a.v > NEXT(c).v"]),
    ("SEQ(A a?, A b*, C c)", ["a.v < NEXT(c).v", "b.v >= NEXT(b).v"]),
    ("SEQ(NOT C e, A a, B b?, C c, NOT B f)", ["a.v <= NEXT(c).v"]),
    ("SEQ(A a, B b?, C c, NOT B e, A d+)", ["d.v > NEXT(d).v"]),
]
LOCALS = ["a.v > 0", "b.f < 2", "c.v > 1"]


@st.composite
def optional_query(draw) -> str:  # noqa: ANN001
    pattern, edges = draw(st.sampled_from(SHAPES))
    items = ["COUNT(*)", "SUM(a.v)", "MAX(a.f)", "AVG(c.v)" if "C c" in pattern else "MIN(b.v)"]
    return dense_query(draw, pattern, edges, LOCALS, items)


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AABBCC", n_max=n_max)


(test_optional_parts_equal_the_general_engine, test_optional_parts_equal_the_oracle,
 test_optional_parts_streamed_equal_the_general_engine) = differential_tests(optional_query(), dense_events)


def _count(text: str, events: list[tuple[str, float]]) -> int:
    rows = evaluate(text, [{"type": t, "time": at, "v": v} for t, at, v in events], engine="columnar")
    assert rows.engine == "columnar"
    return sum(r["count"] for r in rows)


def test_an_optional_part_is_stepped_over_or_taken() -> None:
    """a1 b2 c3: `SEQ(A, B?, C)` has a1 c3 and a1 b2 c3; an edge predicate between A and C applies only
    where they are adjacent (a1 c3), one between A and B only on a1 b2 c3."""
    events = [("A", 1, 1), ("B", 2, 5), ("C", 3, 0)]
    base = "RETURN COUNT(*) PATTERN SEQ(A a, B b?, C c) {} WITHIN 10 s"
    assert _count(base.format(""), events) == 2
    assert _count(base.format("WHERE a.v < NEXT(c).v"), events) == 1  # a1 c3 fails; a1 b2 c3 does not read it
    assert _count(base.format("WHERE a.v < NEXT(b).v"), events) == 2
    assert _count(base.format("WHERE a.v > NEXT(b).v"), events) == 1  # only the step over b2
    star = "RETURN COUNT(*) PATTERN SEQ(A a, B b*, C c) WITHIN 10 s"
    assert _count(star, [("A", 1, 0), ("B", 2, 0), ("B", 3, 0), ("C", 4, 0)]) == 4  # no b, b2, b3, b2 b3
    first = "RETURN COUNT(*) PATTERN SEQ(A a?, B b) WITHIN 10 s"
    assert _count(first, [("A", 1, 0), ("B", 2, 0), ("B", 3, 0)]) == 4  # b2, b3, a1 b2, a1 b3


def test_optional_parts_run_on_the_columnar_engine_under_every_strategy() -> None:
    from greta_stream import RunSpec

    for strategy in ast.STRATEGIES:
        for pattern, _ in SHAPES:
            text = f"RETURN COUNT(*) PATTERN {pattern} SEMANTICS {strategy} WITHIN 10 s"
            assert RunSpec.create(text).columnar_refusal == "", text
    assert RunSpec.create("RETURN COUNT(*) PATTERN SEQ(A a, B b{0,2}, C c) WITHIN 10 s").columnar_refusal == ""
    assert RunSpec.create("RETURN COUNT(*) PATTERN SEQ(A a, B b{0,2}, C c{2}) WITHIN 10 s").columnar_refusal == ""
    assert RunSpec.create("RETURN COUNT(*) PATTERN (SEQ(A a, B b?, C c)){2} WITHIN 10 s").columnar_refusal == ""
    assert RunSpec.create("RETURN COUNT(*) PATTERN SEQ(A a, (SEQ(B b, C c?))?, D d) WITHIN 10 s").columnar_refusal == ""
