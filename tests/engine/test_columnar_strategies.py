"""Skip-till-next-match, contiguous and counted repetition (SEMANTICS section 8) on the columnar engine,
against the general engine, the oracle and through micro-batches with restores.

Dense streams of three types over a few seconds with frequent equal times: a trend's next event under the
stricter strategies depends on the events between two vertices (a candidate that takes a predecessor, an
event failing its local predicate or of a negated type that breaks contiguity), which sparse random
streams (test_strategies.py) seldom hold. Each shape is a single Kleene or a SEQ the engine covers, with
and without edge and local predicates, a middle, leading or trailing NOT, GROUP-BY and equivalence
attributes; and `X{n}`, `X{n,m}`, `X{n,}` under each of the three strategies (a lane per iteration
count: dense streams give trends of every length; counted parts inside a SEQ and counted groups:
test_columnar_counted.py).
"""

from __future__ import annotations

from columnar_support import dense_events as dense
from columnar_support import dense_query, differential_tests
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream.query import ast

STRICT = (ast.NEXT_MATCH, ast.CONTIGUOUS)
SHAPES = [  # (pattern, edge predicates it may take, aliases it aggregates)
    ("A a+", ["a.v > NEXT(a).v", "a.v <= NEXT(a).v", "a.v != NEXT(a).v", "(a.v > NEXT(a).v OR a.f < NEXT(a).f)"],
     "a"),
    ("SEQ(A a, B b+)", ["a.v < NEXT(b).v", "b.v >= NEXT(b).v"], "b"),
    ("SEQ(A a+, B b)", ["a.v > NEXT(a).v", "a.v = NEXT(b).v"], "a"),
    ("SEQ(A a+, NOT E e, B b+)", ["a.v > NEXT(a).v", "b.v < NEXT(b).v"], "b"),
    ("SEQ(NOT E e, A a+, B b)", ["a.v >= NEXT(a).v"], "a"),
    ("SEQ(A a+, B b, NOT E e)", ["a.v < NEXT(a).v"], "a"),
    ("SEQ(A a, A b+, B c)", ["b.v > NEXT(b).v", "a.v < NEXT(b).v"], "b"),
]
REPEATED = ["A a{2}", "A a{3}", "A a{2,3}", "A a{1,3}", "A a{2,}", "A a{3,}", "A a{2,5}"]
SHAPES += [(p, ["a.v > NEXT(a).v", "a.v <= NEXT(a).v", "(a.v > NEXT(a).v OR a.f < NEXT(a).f)"], "a")
           for p in REPEATED]
LOCALS = ["a.v > 0", "b.f < 2", "e.v > 1"]


@st.composite
def strict_query(draw, strategies: tuple[str, ...] = STRICT) -> str:  # noqa: ANN001
    pattern, edges, agg = draw(st.sampled_from(SHAPES))
    if "{" in pattern:  # a counted repetition runs under skip-till-any-match too
        strategies = ast.STRATEGIES
    return dense_query(draw, pattern, edges, LOCALS, ["COUNT(*)", f"SUM({agg}.v)", f"MAX({agg}.f)", f"AVG({agg}.v)"],
                       strategies)


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AAABBE", n_max=n_max)


(test_strategies_and_repetitions_equal_the_general_engine, test_strategies_and_repetitions_equal_the_oracle,
 test_strategies_and_repetitions_streamed_equal_the_general_engine) = differential_tests(strict_query(), dense_events)


def _count(text: str, events: list[dict]) -> int:
    rows = evaluate(text, events, engine="columnar")
    assert rows.engine == "columnar"
    return sum(r["count"] for r in rows)


def test_an_event_failing_its_local_predicate_breaks_contiguity() -> None:
    """a2 fails `A.v > 0`: it is in no trend, yet a1 and a3 are not adjacent (contiguous); under
    skip-till-next-match it is no candidate, so a1 -> a3."""
    events = [{"type": "A", "time": t, "v": v} for t, v in ((1, 1), (2, 0), (3, 1))]
    text = "RETURN COUNT(*) PATTERN A+ SEMANTICS {} WHERE A.v > 0 WITHIN 10 s"
    assert [_count(text.format(s), events) for s in STRICT] == [3, 2]


def test_counted_repetitions_count_trends_of_each_length() -> None:
    """a1..a5 (no predicates): 10 trends of 2 events, 10 of 3, 5 of 4, 1 of 5 under skip-till-any-match;
    one run of each length from each start under the stricter strategies (4, 3, 2, 1)."""
    events = [{"type": "A", "time": t, "v": t} for t in range(1, 6)]
    for pattern, any_match, strict in (("A{2}", 10, 4), ("A{2,3}", 20, 7), ("A{2,}", 26, 10), ("A{3,}", 16, 6)):
        assert _count(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 10 s", events) == any_match, pattern
        for s in STRICT:
            assert _count(f"RETURN COUNT(*) PATTERN {pattern} SEMANTICS {s} WITHIN 10 s", events) == strict, (pattern, s)


def test_a_negated_type_breaks_contiguity_and_a_taken_vertex_waits_no_more() -> None:
    events = [{"type": t, "time": i, "v": v} for i, (t, v) in enumerate([("A", 3), ("E", 0), ("A", 2), ("A", 1)])]
    # contiguous: e1 breaks a0 a2; a2 a3 adjacent and falling: a0, a2, a3, a2a3.
    assert _count("RETURN COUNT(*) PATTERN SEQ(A a+, NOT E e, A b) SEMANTICS contiguous "
                  "WHERE a.v > NEXT(a).v WITHIN 10 s", events) == 1
    # next-match with a falling edge: a0 takes a2 (its first lower value), so a0 -> a3 is no edge:
    # a0, a2, a3, a0a2, a2a3, a0a2a3.
    assert _count("RETURN COUNT(*) PATTERN A+ SEMANTICS skip-till-next-match WHERE A.v > NEXT(A).v WITHIN 10 s",
                  events) == 6
