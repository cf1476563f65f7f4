"""An optional group as a part of a SEQ (`SEQ(A, (SEQ(B, C))?, D)`, `SEQ(A, (SEQ(B, C))*, D)`) on the
columnar engine, against the general engine, the oracle and through micro-batches with restores, under
each strategy.

A trend takes every state of the group or none of them (`plan.skips`): D's predecessors are C and, past
the group, A, never B; a trend may start past a leading group and end before a trailing one, never inside
one. `*` loops the group as well (`plan.loop`), and `{0,m}` counts its iterations 1..m as a counted group
inside a SEQ does (`iterations.py`) while D reads A's lane 0 past it. Edge predicates across the group
(`a.v < NEXT(d).v`) hold only where the group is left out, those into and out of it only where it is taken.
Inside a Kleene plus or a counted group, the whole pattern (`(SEQ(A, (SEQ(B, C))?)){2,3}`) or a part of
a SEQ (`SEQ(X, (SEQ(A, (SEQ(B, C))?))+, Y)`), an iteration may end past the group too, so the loop steps
back from A as well as from C (`parts.loop_steps`).
"""

from __future__ import annotations

from columnar_support import assert_columnar_shapes, differential_tests, long_run_tests, shape_queries
from columnar_support import dense_events as dense
from hypothesis import strategies as st
from problems_support import evaluate

SHAPES = [  # (pattern, edge predicates it may take, alias it aggregates)
    ("SEQ(A a, (SEQ(B b, C c))?, D d)", ["a.v < NEXT(b).v", "b.v <= NEXT(c).v", "c.v >= NEXT(d).v",
                                          "a.f < NEXT(d).f"], "d"),
    ("SEQ(A a+, (SEQ(B b, C c+))?, D d)", ["a.v > NEXT(a).v", "c.v != NEXT(c).v", "a.v <= NEXT(d).v"], "c"),
    ("SEQ((SEQ(B b, C c))?, D d+, A a)", ["d.v < NEXT(d).v", "c.v < NEXT(d).v"], "b"),
    ("SEQ(A a, (SEQ(B b, C c))?)", ["a.v < NEXT(b).v"], "c"),
    ("SEQ(A a, (SEQ(B b, NOT E e, C c))?, D d)", ["b.v < NEXT(c).v", "a.v != NEXT(d).v"], "d"),
    ("SEQ(A a, B x?, (SEQ(B b, C c))?, D d)", ["x.v < NEXT(b).v", "a.v < NEXT(d).v"], "b"),
    ("SEQ(A a, (SEQ(B b, C c))*, D d)", ["b.v <= NEXT(c).v", "a.v < NEXT(b).v", "a.f <= NEXT(d).f"], "c"),
    ("SEQ((SEQ(A a, B b+))*, (SEQ(C c, D d))?, A x)", ["b.v >= NEXT(b).v", "d.v < NEXT(x).v"], "b"),
    ("SEQ(NOT E e, A a, (SEQ(B b, C c))?, D d, NOT E x)", ["c.f < NEXT(d).f"], "a"),
    ("SEQ(A a, (SEQ(B b, NOT SEQ(E e, D x), C c))?, D d)", ["a.v < NEXT(d).v", "b.v != NEXT(c).v"], "d"),
    ("SEQ(A a, (SEQ(B b, C c)){0,2}, D d)", ["a.v < NEXT(d).v", "c.v < NEXT(b).v", "c.f >= NEXT(d).f"], "c"),
    ("SEQ(A a, (SEQ(B b+, NOT E e, C c)){0,3})", ["b.v <= NEXT(b).v", "a.v < NEXT(b).v"], "b"),
    ("SEQ(A a, (SEQ(B b, C c))?, D d, (SEQ(B x, C y)){0,2}, A z)", ["d.v < NEXT(z).v", "y.v >= NEXT(x).v"], "d"),
    ("SEQ(A a, (SEQ(B b, C c))?, (SEQ(D d, E e)){2})", ["a.v < NEXT(d).v", "c.v >= NEXT(d).v"], "d"),
    ("SEQ(A a{2}, (SEQ(B b, C c))?, D d)", ["a.v < NEXT(a).v", "a.v < NEXT(d).v"], "a"),
    ("SEQ(A a, B x?, (SEQ(B b, C c)){0,2}, D d)", ["x.v < NEXT(b).v", "a.v < NEXT(d).v"], "b"),
    # inside a Kleene plus or a counted group (the whole pattern): an iteration ends past it too (`loop_steps`)
    ("(SEQ(A a, (SEQ(B b, C c))?))+", ["a.v < NEXT(b).v", "c.v >= NEXT(a).v", "a.f <= NEXT(a).f"], "a"),
    ("(SEQ(A a, (SEQ(B b, C c+))?)){2,3}", ["a.v > NEXT(a).v", "b.v <= NEXT(c).v", "c.v != NEXT(c).v"], "a"),
    ("(SEQ(A a, (SEQ(B b, D d))?)){2}", ["a.v < NEXT(a).v", "d.v != NEXT(a).v"], "b"),
    ("(SEQ((SEQ(B b, C c))?, A a, D d)){1,2}", ["c.v < NEXT(a).v", "d.f >= NEXT(b).f"], "c"),
    ("(SEQ(A a, (SEQ(B b, NOT E e, C c))?, D d))+", ["b.v < NEXT(c).v", "d.v < NEXT(a).v"], "d"),
    ("(SEQ(A a, (SEQ(B b, C c))?, D d)){2,}", ["a.v < NEXT(b).v", "c.v < NEXT(d).v"], "c"),
    # inside a looped or counted group that is a part of a SEQ
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, A d))?))+, D y)", ["a.v < NEXT(b).v", "d.v >= NEXT(b).v", "b.f < NEXT(y).f"], "b"),
    ("SEQ(A a, (SEQ((SEQ(C c, D d))?, B b))+)", ["b.v < NEXT(b).v", "d.v <= NEXT(b).v"], "b"),
    ("SEQ(D x, (SEQ(A a, (SEQ(B b, C c))?, D d)){1,2}, C y)", ["a.v < NEXT(b).v", "d.v != NEXT(y).v"], "a"),
    ("SEQ(A a, (SEQ(B b, (SEQ(C c, A d))?))+, (SEQ(C e, D f))+)", ["e.v > NEXT(f).v"], "d"),
]
NESTED = 4  # the last shapes: an optional group inside a group that is a part of a SEQ
LOCALS = ["a.v > 0", "b.f < 2", "e.v > 1", "c.v < 3", "d.v != 1", "x.v > 0"]
GROUP_QUERY = shape_queries(SHAPES, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "MIN(a.v)", "AVG({agg}.v)"])


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AABBCCDE", n_max=n_max)


(test_an_optional_group_equals_the_general_engine, test_an_optional_group_equals_the_oracle,
 test_an_optional_group_streamed_equals_the_general_engine) = differential_tests(GROUP_QUERY, dense_events,
                                                                                 examples=(400, 250, 100))


# an optional group inside a loop: trends through several iterations, each with the group or without it
(test_an_optional_group_in_a_loop_over_long_runs_equals_the_general_engine,
 test_an_optional_group_in_a_loop_over_long_runs_equals_the_oracle) = long_run_tests(
    shape_queries(SHAPES[-6 - NESTED:], LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MIN(a.v)"]), "AABBCDE")


def test_every_shape_runs_on_the_columnar_engine() -> None:
    assert_columnar_shapes(SHAPES)


def test_counts_of_a_small_stream_by_hand() -> None:
    """a1 b2 c3 b4 c5 d6. SEQ(A, (SEQ(B, C))?, D): a1 d6, and the group's single matches b2c3, b2c5, b4c5
    between: 4 (never a1 b2 d6 nor a1 c3 d6). With `*`, b2c3b4c5 too: 5. With a.v < NEXT(d).v and a1's v
    not below d6's, only the trends through the group: 3."""
    events = [{"type": t, "time": i + 1, "v": 1} for i, t in enumerate("ABCBCD")]
    for text, want in (("SEQ(A a, (SEQ(B b, C c))?, D d)", 4), ("SEQ(A a, (SEQ(B b, C c))*, D d)", 5),
                       ("SEQ(A a, (SEQ(B b, C c))?, D d) WHERE a.v < NEXT(d).v", 3)):
        head, _, where = text.partition(" WHERE ")
        rows = evaluate(f"RETURN COUNT(*) PATTERN {head} {'WHERE ' + where if where else ''} WITHIN 10 s",
                        events, engine="columnar")
        assert rows.engine == "columnar"
        assert sum(r["count"] for r in rows) == want, text
