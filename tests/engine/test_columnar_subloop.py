"""A Kleene plus or a counted repetition over a SEQ as a part of a SEQ (`SEQ(A, (SEQ(B, C))+, D)`,
`SEQ(A, (SEQ(B, C+)){2,3}, D)`) on the columnar engine, against the general engine, the oracle and
through micro-batches with restores, under each strategy.

The loop runs from the group's last state back to its first (`plan.loop`: (first, last)); counted, the
loop's store moves up a lane and what the state after the group reads takes every count n..m in lane 0
(`iterations.py`). Dense streams of few types give trends through several iterations, and edge predicates
into the group (`a.v < NEXT(b).v`: into its first iteration only), inside it and out of it (`c.v >=
NEXT(d).v`: out of its last) check that each step meets the right neighbours. A plain loop may hold
optional parts (`(SEQ(B, C?))+`: its steps back start past them, `parts.loop_steps`), and a SEQ may hold
two looped groups (`plan.loops`), neither counted.
"""

from __future__ import annotations

import pytest
from columnar_support import assert_columnar_shapes, differential_tests, shape_queries
from columnar_support import dense_events as dense
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream import RunSpec

SHAPES = [  # (pattern, edge predicates it may take, alias it aggregates)
    ("SEQ(A a, (SEQ(B b, C c))+, D d)", ["a.v < NEXT(b).v", "b.v <= NEXT(c).v", "c.v >= NEXT(d).v",
                                         "c.v > NEXT(b).v"], "c"),
    ("SEQ(A a, (SEQ(B b+, C c))+)", ["b.v > NEXT(b).v", "a.f <= NEXT(b).f"], "b"),
    ("SEQ((SEQ(B b, C c))+, D d)", ["b.v != NEXT(c).v", "c.v < NEXT(d).v"], "b"),
    ("SEQ(A a, (SEQ(B b, NOT E e, C c))+, D d)", ["b.v < NEXT(c).v"], "c"),
    ("SEQ(A a, NOT E e, (SEQ(B b, C c+))+, NOT E x, D d)", ["c.v >= NEXT(c).v"], "c"),
    ("SEQ(NOT E e, (SEQ(B b, C c))+, D d, NOT E x)", ["c.f < NEXT(d).f"], "d"),
    ("SEQ(A a, (SEQ(B b, C c)){2,3}, D d)", ["a.v < NEXT(b).v", "b.v <= NEXT(c).v", "c.v >= NEXT(d).v",
                                             "c.f <= NEXT(b).f"], "c"),
    ("SEQ(A a, (SEQ(B b+, C c)){2})", ["b.v > NEXT(b).v", "b.f <= NEXT(c).f"], "b"),
    ("SEQ((SEQ(B b, C c+)){1,2}, D d)", ["c.v < NEXT(c).v", "c.v < NEXT(d).v"], "c"),
    ("SEQ(A a, (SEQ(B b, NOT E e, C c)){2,}, D d)", ["b.v < NEXT(c).v"], "b"),
    ("SEQ(A a, (SEQ(C c, B b)){3,}, NOT E e)", ["c.v >= NEXT(b).v"], "c"),
    ("SEQ(A a, (SEQ(B b, C c?))+, D d)", ["b.v < NEXT(c).v", "b.v >= NEXT(d).v", "a.v < NEXT(b).v"], "b"),
    ("SEQ(A a?, (SEQ(B b+, C c?, D d))+)", ["b.v > NEXT(b).v", "c.f <= NEXT(d).f", "b.v <= NEXT(d).v"], "b"),
    ("SEQ((SEQ(A a, B b))+, (SEQ(C c, D d+))+)", ["b.v < NEXT(c).v", "d.v > NEXT(d).v", "a.v <= NEXT(b).v"], "d"),
    ("SEQ(A a, (SEQ(B b, C c))+, D d, (SEQ(B x, C y))+)", ["c.v < NEXT(d).v", "d.f < NEXT(x).f"], "c"),
    ("SEQ(A a, (SEQ(B b, NOT SEQ(E e, D x), C c))+)", ["b.v < NEXT(c).v", "c.v >= NEXT(b).v"], "b"),
    ("SEQ(A a, (SEQ(B b+, NOT SEQ(E e, A x), C c)){1,2}, D d)", ["b.v <= NEXT(b).v"], "c"),
    ("SEQ((SEQ(A a, B b)){2}, (SEQ(C c, D d))+)", ["b.v < NEXT(c).v", "d.v >= NEXT(c).v"], "b"),
    ("SEQ((SEQ(A a, B b))+, E e, (SEQ(C c, D d)){1,2})", ["d.v >= NEXT(c).v", "b.v < NEXT(a).v"], "d"),
    ("SEQ(A a?, B x?, (SEQ(B b, C c)){2}, D d)", ["a.v < NEXT(b).v", "x.v <= NEXT(b).v"], "b"),
    ("SEQ((SEQ(B b, C c)){1,2}, D d?, E e)", ["c.v < NEXT(e).v", "c.v < NEXT(d).v"], "c"),
    ("SEQ(A a{2}, (SEQ(B b, C c))+)", ["a.v <= NEXT(a).v", "c.v >= NEXT(b).v"], "a"),
    ("SEQ((SEQ(B b, C c))+, D d{1,2}, (SEQ(A a, B x))+)", ["c.v < NEXT(d).v", "d.v > NEXT(d).v"], "d"),
    ("SEQ(A a, (SEQ(B b, C c?)){1,2}, D d)", ["b.v < NEXT(c).v", "b.v >= NEXT(d).v", "c.v < NEXT(b).v"], "b"),
    ("SEQ(D d, (SEQ(A a?, B b)){2,}, C c)", ["b.v >= NEXT(a).v", "b.v < NEXT(b).v", "d.v <= NEXT(a).v"], "b"),
    ("SEQ((SEQ(A a, B b+, C c?)){2}, D d)", ["b.v > NEXT(b).v", "b.f <= NEXT(d).f"], "b"),
    # counted groups beside a looped one and beside a counted event (a counted group of one event)
    ("SEQ((SEQ(A a, B b)){2}, (SEQ(C c, D d))+, (SEQ(B x, C y)){2})", ["b.v < NEXT(c).v"], "c"),
    ("SEQ(A a{2}, (SEQ(B b, C c)){1,2}, D d)", ["a.v <= NEXT(a).v", "c.v < NEXT(d).v"], "c"),
]
LOCALS = ["a.v > 0", "b.f < 2", "e.v > 1", "c.v < 3", "d.v != 1"]
SUBLOOP_QUERY = shape_queries(SHAPES, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "MIN(c.v)", "AVG({agg}.v)"])


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="ABBCCDE", n_max=n_max)


(test_a_loop_inside_a_seq_equals_the_general_engine, test_a_loop_inside_a_seq_equals_the_oracle,
 test_a_loop_inside_a_seq_streamed_equals_the_general_engine) = differential_tests(SUBLOOP_QUERY, dense_events,
                                                                                   examples=(400, 250, 100))


def test_every_shape_runs_on_the_columnar_engine() -> None:
    assert_columnar_shapes(SHAPES)


@pytest.mark.parametrize("pattern", ["SEQ(A a, (SEQ(B b, C c{2}, D d)){2})", "(SEQ(A a, (SEQ(B b, C c)){2})){1,2}"])
def test_a_count_inside_a_counted_group_runs_on_the_columnar_engine(pattern: str) -> None:
    """Written out into copies of its aliases (`copies.written_out`; the rows: test_columnar_counted.py)."""
    assert RunSpec.create(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 10 s").columnar_refusal == ""


def test_counts_of_a_small_stream_by_hand() -> None:
    """a1 b2 c3 b4 c5 d6 (no predicates). SEQ(A, (SEQ(B, C))+, D): the group's matches from a1 are b2c3,
    b2c5, b4c5 and b2c3b4c5 (one iteration or two), each then d6: 4. Counted {2}: b2c3b4c5 only: 1.
    {1,2}: 4 again; {3,}: none."""
    events = [{"type": t, "time": i + 1, "v": 0} for i, t in enumerate("ABCBCD")]
    for group, want in (("+", 4), ("{2}", 1), ("{1,2}", 4), ("{3,}", 0)):
        text = f"RETURN COUNT(*) PATTERN SEQ(A a, (SEQ(B b, C c)){group}, D d) WITHIN 10 s"
        rows = evaluate(text, events, engine="columnar")
        assert rows.engine == "columnar"
        assert sum(r["count"] for r in rows) == want, group
