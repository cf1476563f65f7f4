"""Counted repetition beyond the whole pattern on the columnar engine (SEMANTICS section 8), against the
general engine, the oracle and through micro-batches with restores: a counted part inside a SEQ
(`SEQ(A, B{2,3}, C)`, `{0,m}`, `{n,}`), with a leading, middle or trailing NOT, several counted parts
in one SEQ, and a counted group as the whole pattern (`(SEQ(A+, B)){2,3}`), under each strategy.

A lane counts the iterations of the counted part a trend is in (`engine/columnar/iterations.py`); dense
streams of few types give trends of every count, and edge predicates across the part's ends (`a.v <
NEXT(b).v`: into its first iteration, `b.v < NEXT(c).v`: out of its last) check that a lane meets the
right neighbours.
"""

from __future__ import annotations

from columnar_support import assert_columnar_shapes, differential_tests, long_run_tests, shape_queries
from columnar_support import dense_events as dense
from hypothesis import strategies as st
from problems_support import evaluate

SHAPES = [  # (pattern, edge predicates it may take, alias it aggregates)
    ("SEQ(A a, B b{2,3}, A c)", ["b.v > NEXT(b).v", "a.v < NEXT(b).v", "b.v >= NEXT(c).v"], "b"),
    ("SEQ(A a, B b{0,2}, B c)", ["a.v <= NEXT(c).v", "b.v != NEXT(b).v", "b.f < NEXT(c).f"], "b"),
    ("SEQ(A a{2,}, NOT E e, B b)", ["a.v > NEXT(a).v", "a.f <= NEXT(b).f"], "a"),
    ("SEQ(B b, A a{1,3})", ["b.v < NEXT(a).v", "a.v <= NEXT(a).v"], "a"),
    ("SEQ(A a, B b{0,3})", ["a.v < NEXT(b).v", "b.v >= NEXT(b).v"], "b"),
    ("SEQ(A a{3,}, B b+)", ["a.v >= NEXT(a).v", "b.v < NEXT(b).v"], "b"),
    ("SEQ(A a?, B b{2,3}, A c*)", ["b.v > NEXT(b).v", "a.v < NEXT(b).v"], "c"),
    ("SEQ(NOT E e, B b{2,}, A a)", ["b.v < NEXT(b).v"], "b"),
    ("SEQ(A a, B b{1,3}, NOT E e)", ["a.v >= NEXT(b).v"], "b"),
    ("SEQ(A a, NOT SEQ(E e, B d), B b{2}, A c)", ["b.v > NEXT(b).v"], "b"),
    ("SEQ(A a{2}, B b{0,2}, A c{1,2})", ["a.v >= NEXT(a).v", "b.v < NEXT(c).v"], "c"),
    ("SEQ(B x, A a{1,2}, NOT E e, B b{1,3}, A c)", ["a.v < NEXT(b).v"], "b"),
    ("(SEQ(A a+, B b)){2,3}", ["a.v > NEXT(a).v", "a.f <= NEXT(b).f", "b.v < NEXT(a).v"], "a"),
    ("(SEQ(A a, B b?)){2}", ["a.v < NEXT(b).v", "a.v <= NEXT(a).v", "b.v > NEXT(a).v"], "a"),
    ("(SEQ(A a?, B b, C c?)){1,3}", ["b.v >= NEXT(c).v", "c.v < NEXT(b).v"], "b"),
    ("(SEQ(A a, NOT E e, B b+)){2,}", ["b.v != NEXT(b).v"], "b"),
    ("(SEQ(B b, A a, A c+)){2}", ["c.v >= NEXT(c).v"], "c"),
    # two counted groups in a SEQ: each in its lanes, lane 0 between them (`KernelPlan.counted_groups`)
    ("SEQ((SEQ(A a, B b)){2}, (SEQ(B c, A d)){1,2})", ["a.v > NEXT(b).v", "b.v < NEXT(c).v", "d.v >= NEXT(c).v"],
     "a"),
    ("SEQ(B x, (SEQ(A a, B b+)){1,2}, NOT E e, (SEQ(A c, B d)){2,}, A y)", ["b.v <= NEXT(b).v", "x.v < NEXT(a).v"],
     "b"),
    ("SEQ((SEQ(A a, B b?)){2}, (SEQ(A c, B d)){1,2})", ["a.v < NEXT(c).v", "b.v != NEXT(a).v"], "c"),
    ("SEQ((SEQ(B a, A b)){1,3}, A c, (SEQ(B d, A e)){2})", ["e.v < NEXT(d).v", "b.f >= NEXT(c).f"], "d"),
    # a counted event beside counted groups: a counted group of one event (its step back is its own loop)
    ("SEQ((SEQ(A a, B b)){2}, A c{1,2})", ["b.v < NEXT(c).v", "c.v >= NEXT(c).v"], "c"),
    ("SEQ(B x{2}, (SEQ(A a, B b)){1,2})", ["x.v <= NEXT(x).v", "x.v > NEXT(a).v"], "x"),
    # counted groups beside a Kleene plus over a SEQ (its step back a store of its own)
    ("SEQ(A x{2}, (SEQ(A a, B b)){1,2}, (SEQ(A c, B d))+)", ["b.v < NEXT(c).v", "d.v >= NEXT(c).v"], "a"),
    ("SEQ((SEQ(A a, B b)){2}, (SEQ(A c, B d))+, (SEQ(B e, A f)){1,2})", ["d.v <= NEXT(c).v"], "c"),
]
MIXED = 8  # the last shapes: several counted groups, beside counted events and looped groups
BESIDE = [  # an optional part beside two counted repetitions: `C{0,m}` beside a counted group is an optional
    # counted group of one event (a skip over its state and its own step back); an optional group beside them
    ("SEQ((SEQ(A a, B b)){2}, A c{0,2})", ["b.v < NEXT(c).v", "c.v >= NEXT(c).v"], "c"),
    ("SEQ(B x, (SEQ(A a, B b)){1,2}, A c{0,2}, B y)", ["a.v > NEXT(b).v", "b.v <= NEXT(y).v"], "a"),
    ("SEQ(B x{2}, A c{0,2}, (SEQ(A a, B b)){1,2})", ["x.v <= NEXT(x).v", "c.v < NEXT(a).v"], "c"),
    ("SEQ((SEQ(A a, B b)){1,2}, (SEQ(B c, A d))?, (SEQ(A e, B f)){2})", ["b.v <= NEXT(e).v", "d.v > NEXT(e).v"], "a"),
    ("SEQ(A a{2}, (SEQ(B b, C c))?, D d{2})", ["a.v < NEXT(d).v", "c.v >= NEXT(d).v"], "a"),
    ("SEQ(A a, (SEQ(B b, C c)){0,2}, (SEQ(B x, D d)){2})", ["a.v < NEXT(b).v", "c.v < NEXT(b).v"], "b"),
    ("SEQ((SEQ(A a, B b)){2}, C c{0,2}, (SEQ(A d, B e))+)", ["b.v < NEXT(d).v"], "c"),
    ("SEQ(A a{1,2}, (SEQ(B b, C c))*, D d{2})", ["a.v <= NEXT(b).v"], "b"),
    ("SEQ(A a{0,2}, (SEQ(B b, C c)){1,2}, D d)", ["a.v < NEXT(b).v", "c.v < NEXT(b).v", "a.v <= NEXT(a).v"], "a"),
]
LOCALS = ["a.v > 0", "b.f < 2", "e.v > 1", "c.v < 3"]
COUNTED_QUERY = shape_queries(SHAPES, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "MIN(a.v)", "AVG({agg}.v)"])


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AAABBE", n_max=n_max)


(test_counted_parts_equal_the_general_engine, test_counted_parts_equal_the_oracle,
 test_counted_parts_streamed_equal_the_general_engine) = differential_tests(COUNTED_QUERY, dense_events,
                                                                            examples=(400, 250, 100))


# two counted groups need long trends (six events and more at distinct times): streams of about two events a second
(test_two_counted_groups_over_long_runs_equal_the_general_engine,
 test_two_counted_groups_over_long_runs_equal_the_oracle) = long_run_tests(
    shape_queries(SHAPES[-MIXED:], LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MIN(a.v)"]), "AABBE")


def beside_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AABBCDE", n_max=n_max)


BESIDE_QUERY = shape_queries(BESIDE, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MIN(a.v)", "AVG({agg}.v)"])
(test_an_optional_part_beside_counted_ones_equals_the_general_engine,
 test_an_optional_part_beside_counted_ones_equals_the_oracle,
 test_an_optional_part_beside_counted_ones_streamed_equals_the_general_engine) = differential_tests(
    BESIDE_QUERY, beside_events, examples=(200, 100, 40))
(test_an_optional_part_beside_counted_ones_over_long_runs_equals_the_general_engine,
 test_an_optional_part_beside_counted_ones_over_long_runs_equals_the_oracle) = long_run_tests(BESIDE_QUERY, "AABBCD")


def test_every_shape_runs_on_the_columnar_engine() -> None:
    """(A group counted inside a SEQ: test_columnar_subloop.py; `{0,m}`: test_columnar_optional_group.py.)"""
    assert_columnar_shapes(SHAPES + BESIDE)


def test_counts_of_a_small_stream_by_hand() -> None:
    """a1 b2 b3 b4 a5 (no predicates). SEQ(A, B{2,3}, A): from a1, b-runs of 2 or 3 of b2 b3 b4 (3 + 1),
    then a5: 4. SEQ(A, B{0,2}, A): a1 a5 with no b, one b (3) or two (3): 7. (SEQ(A, B)){2}: none, a
    second A comes only after the last B. SEQ(A, B{2}, B{1,2}): from a1, two b then one or two more: b2b3
    b4 only (a second part after the first): 1."""
    events = [{"type": t, "time": i + 1, "v": 0} for i, t in enumerate("ABBBA")]
    for pattern, want in (("SEQ(A a, B{2,3}, A c)", 4), ("SEQ(A a, B{0,2}, A c)", 7), ("(SEQ(A, B)){2}", 0),
                          ("SEQ(A, B b{2}, B c{1,2})", 1)):
        rows = evaluate(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 10 s", events, engine="columnar")
        assert rows.engine == "columnar"
        assert sum(r["count"] for r in rows) == want, pattern


# a counted repetition inside a counted group: written out into copies of its aliases (`copies.written_out`),
# the group's lanes count its own iterations; edge predicates meet the copies too (`b.v > NEXT(b).v` from b to
# its copy, `b.v >= NEXT(a).v` from the last copy back to the group's start)
IN_COUNTED = [
    ("(SEQ(A a, B b{2})){2}", ["b.v > NEXT(b).v", "a.v < NEXT(b).v", "b.v >= NEXT(a).v"], "b"),
    ("SEQ(B x, (SEQ(A a, B b{1,2})){2})", ["x.v < NEXT(a).v", "b.v <= NEXT(b).v", "b.f != NEXT(a).f", "[b.g]",
                                           "[x.g, b.g]"], "b"),  # an equivalence of some aliases: b's and its copies
    ("(SEQ(A a, (SEQ(B b, A c)){2})){1,2}", ["c.v < NEXT(b).v", "a.v >= NEXT(b).v", "c.v != NEXT(a).v"], "c"),
    ("(SEQ(A a, B b{2,})){2}", ["b.v != NEXT(b).v", "a.f <= NEXT(b).f"], "b"),
    ("SEQ((SEQ(A a{2}, B b)){1,2}, A c)", ["a.v <= NEXT(a).v", "b.v < NEXT(c).v", "b.v > NEXT(a).v"], "a"),
    ("SEQ(A x, (SEQ(A a, B c{2}, A b)){2})", ["c.v < NEXT(c).v", "x.v <= NEXT(a).v"], "c"),
    ("(SEQ(A a, NOT E e, B b{1,2})){2}", ["a.v <= NEXT(b).v", "b.v > NEXT(b).v"], "b"),  # a NOT beside the count
    # a NOT inside the count: copied with it (`e#1`, its local predicates and partitions e's)
    ("(SEQ(A a, (SEQ(B b, NOT E e, A c)){2})){1,2}", ["a.v < NEXT(b).v", "c.v >= NEXT(b).v", "[b.g, e.g]"], "c"),
    ("SEQ(B x, (SEQ(A a, NOT SEQ(E d, E f), B c{2})){1,2})", ["x.v < NEXT(a).v", "d.v <= NEXT(f).v"], "c"),
    # an optional counted group holding a counted group
    ("SEQ(A a, (SEQ(B b, (SEQ(A c, B d)){2})){0,2}, E e)", ["a.v < NEXT(b).v", "d.v >= NEXT(e).v", "a.v < NEXT(e).v"],
     "d"),
]
IN_COUNTED_QUERY = shape_queries(IN_COUNTED, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "MIN(a.v)",
                                                      "AVG({agg}.v)", "COUNT({agg})"])


def in_counted_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    """Long trends need many events in one window: 12 and more (as many as the oracle takes) over 8 s."""
    return dense(types="AAABBE", n_max=n_max, n_min=min(12, n_max), seconds=8)


(test_a_count_inside_a_counted_group_equals_the_general_engine,
 test_a_count_inside_a_counted_group_equals_the_oracle,
 test_a_count_inside_a_counted_group_streamed_equals_the_general_engine) = differential_tests(
    IN_COUNTED_QUERY, in_counted_events, examples=(200, 100, 40))
(test_a_count_inside_a_counted_group_over_long_runs_equals_the_general_engine,
 test_a_count_inside_a_counted_group_over_long_runs_equals_the_oracle) = long_run_tests(IN_COUNTED_QUERY, "AABBE")


def test_a_count_inside_a_counted_group_runs_on_the_columnar_engine() -> None:
    assert_columnar_shapes(IN_COUNTED, with_edges=True)


def test_a_count_inside_a_counted_group_by_hand() -> None:
    """a1 b2 b3 a4 b5 b6 b7 (no predicates). (SEQ(A, B{2})){2}: a first iteration a1 and two of b2 b3 (1),
    a second a4 and two of b5 b6 b7 (3): 3 trends, each of 6 events, 4 of them b; COUNT(B) sums 4 per trend.
    With `b.v < NEXT(b).v` over v = 0 1 _ 0 1 2: the second iteration's pairs b5 b6, b5 b7, b6 b7 all rise: 3;
    with v of b7 0 instead, b5 b6 only: 1."""
    events = [{"type": t, "time": i + 1, "v": v} for i, (t, v) in enumerate(zip("ABBABBB", (0, 0, 1, 0, 0, 1, 2)))]
    text = "RETURN COUNT(*), COUNT(b), SUM(b.v) PATTERN (SEQ(A a, B b{2})){2} WHERE_ WITHIN 10 s"
    for where, evs, want in (("", events, (3, 12, 3 * 1 + 1 + 2 + 3)),
                             ("WHERE b.v < NEXT(b).v", events, (3, 12, 3 * 1 + 1 + 2 + 3)),
                             ("WHERE b.v < NEXT(b).v", events[:-1] + [{**events[-1], "v": 0}], (1, 4, 1 + 1))):
        rows = evaluate(text.replace("WHERE_", where), evs, engine="columnar")
        assert rows.engine == "columnar"
        assert [(r["count"], r["count_b"], r["sum_b_v"]) for r in rows] == [want], where
