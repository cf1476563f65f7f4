"""NOT over a SEQ (`SEQ(A+, NOT SEQ(C, D), B)`; leading and trailing ones too) on the columnar engine,
against the general engine, the oracle and through micro-batches with restores.

Dense streams of four types over a few seconds with equal times: a negated match needs a C and a later
D strictly between two positive events (or in the window before a trend's first event, after its last),
which sparse random streams seldom hold. Parts of one type
(`NOT SEQ(C c, C d)`), parts of a positive type, local predicates on the negated parts, edge predicates
on the loop, across the negated step and within the negated SEQ (`c.v < NEXT(d).v`: `negseqs.dominance_max`;
two AND-ed on one step: `dominance_max2`; more: `dominance_maxk`, checked against a scan too),
a NOT inside the negated SEQ (`NOT SEQ(C, NOT E, D)`), with an edge predicate across it, a Kleene plus
over a SEQ inside it (`NOT SEQ(C, (SEQ(D, E))+, F)`), GROUP-BY and equivalence attributes, every
selection strategy.
"""

from __future__ import annotations

import numpy as np
import pytest
from columnar_support import dense_events as dense
from columnar_support import dense_query, differential_tests, long_run_tests
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate

MANY = [  # three or more ranges of the dominance search on one step (`dominance.py`: divided down to two, or scanned)
    # three, four and five comparisons AND-ed on one step
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["(c.v < NEXT(d).v AND c.f > NEXT(d).f AND c.v != NEXT(d).f)"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", ["c.v <= NEXT(d).v", "c.f >= NEXT(d).f", "c.v > NEXT(d).f - 2"]),
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["(c.v < NEXT(d).v AND c.f > NEXT(d).f AND c.v != NEXT(d).f AND "
                                           "c.f != NEXT(d).v)"]),
    ("SEQ(NOT SEQ(C c, D d), A a+, B b)", ["c.v <= NEXT(d).v", "c.f >= NEXT(d).f", "c.v > NEXT(d).f - 2",
                                           "c.f < NEXT(d).v + 2", "c.v * 2 >= NEXT(d).v"]),  # leading
    # across a NOT inside the negated SEQ, whose range of times is one more: two to four comparisons
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["(c.v < NEXT(d).v AND c.f != NEXT(d).f)"]),
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["c.v < NEXT(d).v", "c.f > NEXT(d).f", "c.v <= NEXT(d).f"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, NOT E e, D d))", ["(c.v < NEXT(d).v AND c.f > NEXT(d).f AND c.v != NEXT(d).f "
                                                    "AND c.f >= NEXT(d).v)"]),  # trailing
    # six and more (five and more across a NOT): a scan of the pairs within a window's length (`window_scan`)
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["c.v <= NEXT(d).v", "c.f >= NEXT(d).f", "c.v > NEXT(d).f - 2",
                                           "c.f < NEXT(d).v + 2", "c.v * 2 >= NEXT(d).v", "c.v != NEXT(d).v + 1"]),
    ("SEQ(NOT SEQ(C c, D d), A a+, B b)", ["(c.v < NEXT(d).v AND c.f > NEXT(d).f AND c.v != NEXT(d).f AND "
                                           "c.f != NEXT(d).v AND c.v >= NEXT(d).f - 3 AND c.f <= NEXT(d).f + 1 "
                                           "AND c.v - 1 < NEXT(d).v)"]),  # leading, seven
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["c.v <= NEXT(d).v", "c.f >= NEXT(d).f", "c.v > NEXT(d).f - 2",
                                                    "c.f < NEXT(d).v + 2", "c.v * 2 >= NEXT(d).v"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", ["c.v <= NEXT(d).v", "c.f >= NEXT(d).f", "c.v > NEXT(d).f - 2",
                                           "c.f < NEXT(d).v + 2", "c.v * 2 >= NEXT(d).v", "c.f * 2 > NEXT(d).f"]),
]


def loose(x: str = "c", y: str = "d") -> str:
    """Six order comparisons of x with NEXT(y) that most pairs pass: the matches are many."""
    return (f"{x}.v <= NEXT({y}).v + 1 AND {x}.f >= NEXT({y}).f - 1 AND {x}.v != NEXT({y}).v + 5 AND "
            f"{x}.f != NEXT({y}).f + 5 AND {x}.v > NEXT({y}).v - 3 AND {x}.f < NEXT({y}).f + 3")


SCANNED = [  # six or more ranges on one step, in one predicate: `dominance.window_scan`
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", [f"({loose()})", "a.v > NEXT(a).v"]),
    ("SEQ(NOT SEQ(C c, D d), A a+, B b)", [f"({loose()} AND c.v - 1 < NEXT(d).v)"]),  # leading, seven
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", [f"({loose()})"]),  # trailing: walked back
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", [f"({loose()})"]),  # across a NOT: seven ranges
    ("SEQ(A a+, NOT SEQ(C c, D d, C e), B b)", [f"({loose('d', 'e')})"]),
    # `!=` as they are in the scan: eight of them with two order comparisons
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", [" AND ".join(f"c.{a} != NEXT(d).{b} + {n}" for a, b, n in [
        ("v", "v", 0), ("v", "v", 2), ("f", "f", 0), ("f", "v", 0), ("v", "f", 1), ("v", "v", -3), ("f", "f", 1),
        ("f", "f", -1)]) + " AND c.v <= NEXT(d).v + 1 AND c.f > NEXT(d).f - 2"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, NOT E e, D d))", [" AND ".join(f"c.v != NEXT(d).v + {n}" for n in range(-3, 4))]),
    # twenty on one step, and seventeen across a NOT (trailing): as many ranges as written, one scan
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", [" AND ".join(
        [*(f"c.v < NEXT(d).v + {n}" for n in range(2, 7)), *(f"c.f >= NEXT(d).f - {n}" for n in range(1, 6)),
         *(f"c.v != NEXT(d).f + {n}" for n in (4, 5, 6)), *(f"c.f <= NEXT(d).v + {n}" for n in range(3, 7)),
         "c.v > NEXT(d).v - 2", "c.f > NEXT(d).f - 2", "c.v >= NEXT(d).f - 3"])]),
    ("SEQ(A a+, B b, NOT SEQ(C c, NOT E e, D d))", [f"({loose()})", " AND ".join(
        [*(f"c.v < NEXT(d).v + {n}" for n in range(2, 8)), *(f"c.f > NEXT(d).f - {n}" for n in range(2, 7))])]),
]
SHAPES = [*MANY,  # (pattern, edge predicates it may take)
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["a.v > NEXT(a).v", "a.v < NEXT(b).v"]),
    ("SEQ(A a, NOT SEQ(C c, C d), A b+)", ["b.v >= NEXT(b).v", "a.v != NEXT(b).v"]),
    ("SEQ(A a+, NOT SEQ(C c, D d, C e), B b+)", ["a.v <= NEXT(a).v"]),
    ("SEQ(A a, NOT SEQ(A c, D d), B b, NOT E e, A f)", ["a.v < NEXT(b).v"]),
    ("SEQ(NOT E e, A a+, NOT SEQ(C c+, D d), B b)", []),
    ("SEQ(NOT SEQ(C c, D d), A a+, B b)", ["a.v > NEXT(a).v"]),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", ["a.v < NEXT(b).v"]),  # trailing
    ("SEQ(NOT SEQ(C c+, D d, C e), A a, NOT C f, B b+, NOT SEQ(D g, C h))", []),
    ("SEQ(NOT SEQ(A c, B d), A a+, NOT B e+, B b)", ["a.v <= NEXT(a).v"]),  # positive types; `NOT B+` is `NOT B`
    # edge predicates within the negated SEQ: a match is a chain whose steps they admit
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["a.v > NEXT(a).v", "c.v < NEXT(d).v"]),
    ("SEQ(A a, NOT SEQ(C c, C d), A b+)", ["c.f >= NEXT(d).f", "b.v >= NEXT(b).v"]),
    ("SEQ(A a+, NOT SEQ(C c, D d, C e), B b+)", ["c.v = NEXT(d).v", "d.f - NEXT(e).f > 0.5"]),
    ("SEQ(NOT SEQ(C c+, D d), A a+, B b)", ["c.v > NEXT(d).v"]),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", ["c.v <= NEXT(d).v * 2", "a.v < NEXT(b).v"]),  # trailing
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["(c.v < NEXT(d).v OR c.f = NEXT(d).f)"]),  # an OR: the larger start
    ("SEQ(NOT SEQ(C c, D d, C e), A a+, B b)", ["c.v != NEXT(d).v", "NOT (d.f < NEXT(e).f)"]),
    # two comparisons AND-ed on one step (`negseqs.dominance_max2`), also as two predicates; with an equality
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["(c.v < NEXT(d).v AND c.f > NEXT(d).f)", "a.v > NEXT(a).v"]),
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["(c.v != NEXT(d).v AND c.f = NEXT(d).f OR c.v > NEXT(d).v + 1)"]),
    ("SEQ(NOT SEQ(C c, D d), A a+, B b)", ["c.v >= NEXT(d).v", "c.f < NEXT(d).f"]),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d, C e))", ["(d.v > NEXT(e).v AND d.f <= NEXT(e).f)"]),  # trailing
    # a NOT inside the negated SEQ: a match has none of its events between its neighbours
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["a.v > NEXT(a).v"]),
    ("SEQ(A a+, NOT SEQ(C c, D d, NOT B e, C f), B b+)", ["c.v < NEXT(d).v"]),
    ("SEQ(NOT SEQ(C c, NOT C e, C d), A a+, B b, NOT SEQ(D f, NOT E g, D h))", []),
    # an edge predicate across that NOT: its range of times is one more rank of the dominance query
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["c.v < NEXT(d).v", "a.v > NEXT(a).v"]),
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["(c.v != NEXT(d).v AND c.f = NEXT(d).f OR c.f > NEXT(d).f)"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, NOT E e, D d))", ["c.v >= NEXT(d).v"]),  # trailing: walked back
    ("SEQ(NOT SEQ(C c, D d, NOT B e, C f), A a+, B b)", ["d.v < NEXT(f).v", "c.f < NEXT(d).f"]),  # leading
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d, NOT A g, C f), B b+)", ["c.v < NEXT(d).v", "d.v > NEXT(f).v"]),
    ("SEQ(A a, NOT SEQ(C c, NOT A e, C d), A b+)", ["c.v <= NEXT(d).v", "b.v >= NEXT(b).v"]),  # positive types
    ("SEQ(NOT SEQ(C c, NOT E e, D d), A a+, B b)", ["c.v >= NEXT(d).v", "c.f < NEXT(d).f"]),
    # a Kleene plus over a SEQ inside: one iteration stands for many (`parts.bound_groups`)
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, C e))+, D f), B b)", ["a.v > NEXT(a).v", "d.v < NEXT(e).v"]),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, NOT E x, C e))+, D f), B b)", ["c.v < NEXT(d).v"]),  # entry
    ("SEQ(A a+, NOT SEQ((SEQ(C c, D d+))+, B e), B b)", ["c.v < NEXT(d).v"]),  # a Kleene event in it: entry
    ("SEQ(A a+, NOT SEQ((SEQ(C c, D d+))+, B e), B b)", ["d.f > NEXT(e).f"]),  # exit
    ("SEQ(NOT SEQ(C c, NOT E x, (SEQ(D d, C e))+), A a+, B b)", ["c.v < NEXT(d).v"]),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, C e))+, D f))", ["c.v <= NEXT(d).v", "d.f != NEXT(e).f"]),  # trailing
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, C e))+, NOT E x, D f), B b)", ["e.v < NEXT(f).v"]),  # exit across a NOT
    # an optional part: a match with or without it, and an edge predicate from its neighbour past it
    ("SEQ(A a+, NOT SEQ(C c, D d?, E e), B b)", ["c.v < NEXT(d).v", "d.v < NEXT(e).v", "c.f > NEXT(e).f"]),
    ("SEQ(NOT SEQ(C c?, D d, E e?), A a+, B b)", ["c.v < NEXT(d).v", "d.v < NEXT(e).v"]),  # leading, only D
    ("SEQ(A a+, B b, NOT SEQ(C c, D d?, E e?, C f))", ["c.v < NEXT(f).v", "d.v >= NEXT(f).v"]),  # trailing
    ("SEQ(A a, NOT SEQ(C c, A d?, C e), B b+)", ["c.v != NEXT(e).v", "b.v >= NEXT(b).v"]),  # of a positive type
    # an optional part that loops or counts: a match without it, or with a chain of it (`D*`, `D{0,2}`, groups)
    ("SEQ(A a+, NOT SEQ(C c, D d*, E e), B b)", ["c.v < NEXT(d).v", "d.v < NEXT(e).v", "c.f > NEXT(e).f",
                                                 "d.f >= NEXT(d).f"]),
    ("SEQ(A a+, NOT SEQ(C c, D d{0,2}, E e), B b)", ["c.v < NEXT(d).v", "d.v < NEXT(e).v", "c.f > NEXT(e).f"]),
    ("SEQ(NOT SEQ(C c*, D d), A a+, B b)", ["c.v < NEXT(d).v", "c.f != NEXT(c).f"]),  # leading, first
    ("SEQ(A a+, B b, NOT SEQ(C c, D d{0,3}))", ["c.v < NEXT(d).v", "d.v > NEXT(d).v"]),  # trailing, last
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, C e))*, D f), B b)", ["c.v < NEXT(d).v", "e.v < NEXT(f).v", "c.f > NEXT(f).f"]),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e)){0,2}, D g?, C f), B b)", ["c.v < NEXT(d).v", "e.v < NEXT(g).v",
                                                                      "e.f < NEXT(f).f", "c.v > NEXT(f).v"]),
    # a Kleene event inside a group constrained at both ends: a chain of it
    ("SEQ(A a+, NOT SEQ((SEQ(C c, D d+))+, E e), B b)", ["c.v < NEXT(d).v", "d.f > NEXT(e).f", "d.v <= NEXT(d).v",
                                                         "d.v > NEXT(c).v"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, NOT B x, E e+))+, C f))", ["e.v < NEXT(f).v", "e.f != NEXT(e).f"]),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e{2}))+, C f), B b)", ["d.v < NEXT(e).v", "e.v < NEXT(f).v"]),  # counted
    ("SEQ(NOT SEQ((SEQ(C c{1,2}, D d))+, E e), A a+, B b)", ["c.v < NEXT(d).v", "c.f >= NEXT(c).f"]),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e?, C f))+, D g), B b)", ["d.v < NEXT(e).v", "d.f > NEXT(f).f",
                                                                   "f.v < NEXT(d).v"]),  # optional inside a group
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, E e*, D f))+))", ["d.v < NEXT(e).v", "e.v < NEXT(f).v",
                                                             "e.f >= NEXT(e).f"]),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e?))+, C f), B b)", ["c.v < NEXT(d).v", "e.v < NEXT(d).v", "d.v > NEXT(d).v",
                                                          "d.f < NEXT(f).f"]),  # optional at a group's end
    ("SEQ(NOT SEQ((SEQ(C c?, D d))+, E e), A a+, B b)", ["c.v < NEXT(d).v", "d.v < NEXT(d).v", "d.f > NEXT(c).f"]),
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))+, C g), B b)", ["c.v < NEXT(d).v", "f.v < NEXT(e).v",
                                                                        "f.f > NEXT(g).f"]),  # a group in a group
    # an optional part beside a group: a chain enters or leaves the group past it
    ("SEQ(A a+, NOT SEQ(C c, D d?, (SEQ(E e, C f))+, D g), B b)", ["c.v < NEXT(e).v", "d.v < NEXT(e).v",
                                                                   "f.f > NEXT(g).f"]),
    ("SEQ(A a+, B b, NOT SEQ(C c, (SEQ(D d, E e))+, D g*, C f))", ["c.v < NEXT(d).v", "e.v < NEXT(f).v"]),
    # a NOT over a Kleene plus over a SEQ: its matches hold one of a single iteration, so it is the NOT of the SEQ
    ("SEQ(A a+, NOT (SEQ(C c, D d))+, B b)", ["c.v < NEXT(d).v", "a.v > NEXT(a).v"]),
    ("SEQ(NOT (SEQ(C c, D d+))+, A a+, B b)", ["c.f >= NEXT(d).f"]),  # leading
    ("SEQ(A a+, B b, NOT (SEQ(C c, NOT E e, D d))+)", ["c.v != NEXT(d).v"]),  # trailing
]
LOCALS = ["c.v > 0", "d.f < 2", "a.v > 0"]


def negseq_query_of(shapes: list[tuple[str, list[str]]]) -> st.SearchStrategy[str]:
    @st.composite
    def query(draw) -> str:  # noqa: ANN001
        pattern, edges = draw(st.sampled_from(shapes))
        return dense_query(draw, pattern, edges, LOCALS, ["COUNT(*)", "SUM(b.v)", "MAX(a.f)", "AVG(a.v)"])
    return query()


def negseq_query() -> st.SearchStrategy[str]:
    return negseq_query_of(SHAPES)


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AAABBCCDDE", n_max=n_max, n_min=6, seconds=9)  # n_min: room for a match between two


(test_a_negated_seq_equals_the_general_engine, test_a_negated_seq_equals_the_oracle,
 test_a_negated_seq_streamed_equals_the_general_engine) = differential_tests(negseq_query(), dense_events, (300, 100, 50))

# three or more ranges of the dominance search on one step: drawn on their own too, a few of many above
(test_many_comparisons_on_a_negated_step_equal_the_general_engine,
 test_many_comparisons_on_a_negated_step_equal_the_oracle,
 test_many_comparisons_on_a_negated_step_streamed_equal_the_general_engine) = differential_tests(
    negseq_query_of(MANY), dense_events, (100, 40, 20))

(test_six_comparisons_on_a_negated_step_equal_the_general_engine,
 test_six_comparisons_on_a_negated_step_equal_the_oracle,
 test_six_comparisons_on_a_negated_step_streamed_equal_the_general_engine) = differential_tests(
    negseq_query_of(SCANNED), dense_events, (100, 40, 20))

# a Kleene plus over a SEQ inside the negated SEQ: matches through several of its iterations
(test_a_group_in_a_negated_seq_over_long_runs_equals_the_general_engine,
 test_a_group_in_a_negated_seq_over_long_runs_equals_the_oracle) = long_run_tests(
    negseq_query_of([s for s in SHAPES if "))+" in s[0]]), "AABCCDDE")


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


def test_a_leading_or_trailing_match_in_the_window_excludes_the_trend() -> None:
    """`SEQ(NOT SEQ(C, D), A)`: a4 is excluded in the windows holding a match c1 d2 before it, kept in
    those starting after c1; `SEQ(A, NOT SEQ(C, D))`: a1 is excluded in the windows holding c2 d3."""
    def rows(text: str, events: list[tuple[str, float]]) -> list[tuple]:
        got = evaluate(text, [{"type": t, "time": at} for t, at in events], engine="columnar")
        assert got.engine == "columnar"
        return [(r["window_start"], r["count"]) for r in got]

    lead = "RETURN COUNT(*) PATTERN SEQ(NOT SEQ(C c, D d), A a) WITHIN 4 s SLIDE 1 s"
    assert rows(lead, [("C", 1), ("D", 2), ("A", 4)]) == [(2, 1), (3, 1), (4, 1)]  # windows from 1 hold c1 d2
    assert rows(lead, [("D", 1), ("C", 2), ("A", 4)]) == [(1, 1), (2, 1), (3, 1), (4, 1)]  # d before c: no match
    trail = "RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d)) WITHIN 4 s SLIDE 1 s"
    assert rows(trail, [("A", 1), ("C", 2), ("D", 3)]) == [(-2, 1), (-1, 1)]  # windows ending after 3 hold d3
    assert rows(trail, [("A", 1), ("C", 1), ("D", 3)]) == [(-2, 1), (-1, 1), (0, 1), (1, 1)]  # c at a's time


def test_an_edge_predicate_within_the_negated_seq_admits_only_its_pairs() -> None:
    """a1 c2 d3 b4 with `c.v < NEXT(d).v`: the match c2 d3 excludes a1 -> b4 only where c's value is below
    d's; a later c beside it (c2.5 of a lower value) makes a match of its own."""
    text = "RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d), B b) WHERE c.v < NEXT(d).v WITHIN 10 s"

    def count(cv: list[tuple[float, int]], dv: int) -> int:
        events = [{"type": "A", "time": 1, "v": 0}, *({"type": "C", "time": t, "v": v} for t, v in cv),
                  {"type": "D", "time": 3, "v": dv}, {"type": "B", "time": 4, "v": 0}]
        rows = evaluate(text, events, engine="columnar")
        assert rows.engine == "columnar"
        return sum(r["count"] for r in rows)

    assert count([(2, 1)], 2) == 0  # 1 < 2: a match
    assert count([(2, 2)], 2) == 1  # 2 < 2 does not hold: no match
    assert count([(2, 5), (2.5, 1)], 2) == 0  # the later c makes one
    assert count([(2, 5), (2.5, 3)], 2) == 1


def test_a_not_inside_the_negated_seq_breaks_its_match() -> None:
    """a1 c2 e3 d4 b5: `NOT SEQ(C c, NOT E e, D d)` has no match (e3 lies between c2 and d4), so a1 -> b5
    holds; a second c after e3 makes one again."""
    text = "RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, NOT E e, D d), B b) WITHIN 10 s"

    def count(events: list[tuple[str, float]]) -> int:
        rows = evaluate(text, [{"type": t, "time": at} for t, at in events], engine="columnar")
        assert rows.engine == "columnar"
        return sum(r["count"] for r in rows)

    assert count([("A", 1), ("C", 2), ("E", 3), ("D", 4), ("B", 5)]) == 1
    assert count([("A", 1), ("C", 2), ("E", 3), ("C", 3.5), ("D", 4), ("B", 5)]) == 0
    assert count([("A", 1), ("C", 2), ("E", 2), ("D", 4), ("B", 5)]) == 0  # e at c's time: not between


def test_an_edge_predicate_across_a_not_inside_the_negated_seq() -> None:
    """a1 c2 e3 d4 b5 with `NOT SEQ(C c, NOT E e, D d) WHERE c.v < NEXT(d).v`: a match needs a c after the
    latest e before the d whose value is below the d's; neither alone makes one."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, NOT E e, D d), B b) WHERE c.v < NEXT(d).v "
            "WITHIN 10 s")

    def count(cs: list[tuple[float, int]], e_at: float | None = 3) -> int:
        events = [{"type": "A", "time": 1, "v": 0}, *({"type": "C", "time": t, "v": v} for t, v in cs),
                  *([{"type": "E", "time": e_at, "v": 0}] if e_at is not None else []),
                  {"type": "D", "time": 4, "v": 2}, {"type": "B", "time": 5, "v": 0}]
        rows = evaluate(text, events, engine="columnar")
        assert rows.engine == "columnar"
        return sum(r["count"] for r in rows)

    assert count([(2, 1)], e_at=None) == 0  # c2 below d4: a match between a1 and b5
    assert count([(2, 1)]) == 1  # e3 between them: none
    assert count([(3.5, 5)]) == 1  # after e3, but not below d4
    assert count([(2, 1), (3.5, 5)]) == 1  # each fails one condition
    assert count([(2, 5), (3.5, 1)]) == 0  # c3.5: after e3 and below d4
    assert count([(3, 1)]) == 0  # c at e's time: e is not between c and d


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 400), st.integers(1, 400), st.integers(2, 5), st.booleans(), st.integers(0, 2**32 - 1))
def test_dominance_maxk_is_the_maximum_over_the_dominated_events(n_src: int, n_dst: int, k: int, scan: bool,
                                                                  seed: int) -> None:
    """Per dst event, the largest value over the src events of its code with a smaller order and all k
    ranks below its own: against a scan of every pair, with ties in every coordinate; divided by the
    order's bits down to two ranks (`_SCAN_PAIRS` 0) or scanned where few pairs share a code."""
    from greta_stream.engine.columnar import dominance

    rnd = np.random.default_rng(seed)
    codes = int(rnd.integers(1, 4))
    src = [rnd.integers(0, codes, n_src), rnd.integers(0, 60, n_src)] + [rnd.integers(0, 6, n_src) for _ in range(k)]
    dst = [rnd.integers(0, codes, n_dst), rnd.integers(0, 60, n_dst)] + [rnd.integers(0, 7, n_dst) for _ in range(k)]
    val = rnd.normal(size=n_src)
    before = dominance._SCAN_PAIRS
    dominance._SCAN_PAIRS = before if scan else 0
    try:
        got = dominance.dominance_maxk(src[0], src[1], src[2:], val, dst[0], dst[1], dst[2:])
    finally:
        dominance._SCAN_PAIRS = before
    ok = (src[0][None, :] == dst[0][:, None]) & (src[1][None, :] < dst[1][:, None])
    for r in range(2, 2 + k):
        ok &= src[r][None, :] < dst[r][:, None]
    want = np.where(ok, val[None, :], -np.inf).max(axis=1)
    assert np.array_equal(got, want)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300), st.integers(1, 8), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_window_scan_is_the_maximum_over_the_dominated_events_within_reach(n_src: int, n_dst: int, k: int, u: int,
                                                                            seed: int) -> None:
    """`dominance.window_scan` (six or more comparisons on a negated step): per dst event, the largest value
    over the src events of its code with an order in [reach, its own), all k ranks below its own and u
    values (`!=`) other than its own."""
    from greta_stream.engine.columnar.dominance import window_scan

    rnd = np.random.default_rng(seed)
    codes = int(rnd.integers(1, 4))
    scode, sorder = rnd.integers(0, codes, n_src), rnd.integers(0, 60, n_src)
    dcode, dorder = rnd.integers(0, codes, n_dst), rnd.integers(0, 60, n_dst)
    sr, dr = rnd.integers(0, 6, (n_src, k)), rnd.integers(0, 7, (n_dst, k))
    reach_of = np.maximum(np.arange(60) - int(rnd.integers(1, 70)), 0)  # rises with the order
    su, du = rnd.integers(0, 3, (n_src, u)), rnd.integers(0, 3, (n_dst, u))
    val = rnd.normal(size=n_src)
    so, do = np.lexsort((sorder, scode)), np.lexsort((dorder, dcode))
    got = np.full(n_dst, -np.inf)
    got[do] = window_scan(scode[so], sorder[so], sr[so], val[so], dcode[do], dorder[do], dr[do], reach_of[dorder[do]],
                          su[so], du[do])
    ok = (scode[None, :] == dcode[:, None]) & (sorder[None, :] < dorder[:, None])
    ok &= sorder[None, :] >= reach_of[dorder][:, None]
    ok &= (sr[None, :, :] < dr[:, None, :]).all(axis=2)
    ok &= (su[None, :, :] != du[:, None, :]).all(axis=2)
    assert np.array_equal(got, np.where(ok, val[None, :], -np.inf).max(axis=1))


def test_a_group_inside_the_negated_seq_matches_through_any_of_its_iterations() -> None:
    """a1 c2 d3 e4 d5 e6 c7 b8 with `NOT SEQ(C c, (SEQ(D d, E e))+, C f) WHERE c.v < NEXT(d).v`: the
    match c2 d5 e6 c7 goes through the group's second iteration only (c2 is not below d3); without a d
    above c2 there is none, and without the group's events none either."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, E e))+, C f), B b) WHERE c.v < NEXT(d).v "
            "WITHIN 10 s")

    def count(d5: int, group: bool = True) -> int:
        events = [("A", 1, 0), ("C", 2, 1), *([("D", 3, 0), ("E", 4, 0), ("D", 5, d5), ("E", 6, 0)] if group else []),
                  ("C", 7, 0), ("B", 8, 0)]
        rows = evaluate(text, [{"type": t, "time": at, "v": v} for t, at, v in events], engine="columnar")
        assert rows.engine == "columnar"
        return sum(r["count"] for r in rows)

    assert count(2) == 0
    assert count(0) == 1
    assert count(2, group=False) == 1


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_counted_group_matches_through_as_many_iterations_as_it_counts(engine: str) -> None:
    """Each step between neighbours in time: the chain c d e (d e)* f matches `(SEQ(D, E)){2,3}` with two or
    three iterations and not with four (nor one), and then a1 -> b is not excluded."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e)){2,3}, C f), B b) WHERE "
            "c.id + 1 = NEXT(d).id AND d.id + 1 = NEXT(e).id AND e.id + 1 = NEXT(d).id AND e.id + 1 = NEXT(f).id "
            "WITHIN 20 s")
    for iterations, count in ((1, [1]), (2, []), (3, []), (4, [1])):
        chain = "AC" + "DE" * iterations + "CB"
        events = [{"type": t, "time": i * 0.5, "id": i} for i, t in enumerate(chain)]
        rows = evaluate(text, events, engine=engine)
        assert rows.engine == engine and [r["count"] for r in rows] == count, iterations
    looped = text.replace(" AND e.id + 1 = NEXT(d).id", "")  # no constraint on the loop's step: 4 hold 2 of them
    events = [{"type": t, "time": i * 0.5, "id": i} for i, t in enumerate("AC" + "DE" * 4 + "CB")]
    assert list(evaluate(looped, events, engine=engine)) == []


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_kleene_event_constrained_at_both_ends_matches_through_a_chain(engine: str) -> None:
    """c2 d3 d4 e5: no single D is above c2 and below e5, but the chain d3 d4 is a match of D+ whose first
    D is above c2 and whose last is below e5: a1 -> b6 is excluded. Without d4 it is not."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d+, E e), B b) "
            "WHERE c.v < NEXT(d).v AND d.v < NEXT(e).v WITHIN 20 s")
    events = [{"type": t, "time": i + 1, "v": v} for i, (t, v) in enumerate([("A", 0), ("C", 1), ("D", 5), ("D", 0),
                                                                              ("E", 2), ("B", 0)])]
    rows = evaluate(text, events, engine=engine)
    assert rows.engine == engine and list(rows) == []
    assert [r["count"] for r in evaluate(text, [e for e in events if e["time"] != 4], engine=engine)] == [1]
    looped = text.replace("WITHIN", "AND d.v < NEXT(d).v WITHIN")  # d3 (5) to d4 (0) falls: no chain
    assert [r["count"] for r in evaluate(looped, events, engine=engine)] == [1]


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_group_constrained_where_it_starts_and_ends_matches_through_two_iterations(engine: str) -> None:
    """c2 d3 e4 d5 e6 c7: the match goes through two iterations (c2 admits only d3, c7 only e6, and d3
    does not pair with e6), which one iteration cannot stand for: the first and the last do, and the
    match excludes a1 -> b8."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, E e))+, C f), B b) "
            "WHERE c.v < NEXT(d).v AND d.f > NEXT(e).f AND e.v < NEXT(f).v WITHIN 20 s")
    events = [("A", 1, 0, 0), ("C", 2, 2, 0), ("D", 3, 5, 1), ("E", 4, 9, 0), ("D", 5, 0, 3), ("E", 6, 0, 2),
              ("C", 7, 5, 0), ("B", 8, 0, 0)]
    rows = evaluate(text, [{"type": t, "time": at, "v": v, "f": f} for t, at, v, f in events], engine=engine)
    assert rows.engine == engine and list(rows) == []
    without_e4 = [{"type": t, "time": at, "v": v, "f": f} for t, at, v, f in events if at != 4]
    assert [r["count"] for r in evaluate(text, without_e4, engine=engine)] == [1]  # d3 with e6 fails d.f > e.f
    three = [{"type": t, "time": at, "v": v, "f": f} for t, at, v, f in  # c2 d3 e4, d5 e6 (free), d7 e8 c9
             [("A", 1, 0, 0), ("C", 2, 2, 0), ("D", 3, 5, 1), ("E", 4, 9, 0), ("D", 5, 0, 0), ("E", 6, 0, 0),
              ("D", 7, 0, 3), ("E", 8, 0, 2), ("C", 9, 5, 0), ("B", 10, 0, 0)]]
    assert list(evaluate(text, three, engine=engine)) == []  # three iterations: the first and last are a match


def test_a_keyed_part_matches_for_the_trends_of_its_value_only() -> None:
    """`[a.k, c.k]`: the match c2 d3 excludes a1 -> b4 only where c2 carries a1's k; d is free, and so is
    b. Where every positive alias carries k, the same. With a second attribute, `[b.v, d.v]`, the match needs
    both: c2 of a1's k and d3 of b4's v."""
    def count(text: str, ks: tuple[int, int, int, int], vs: tuple[int, ...] = (0, 0, 0, 0)) -> int:
        events = [{"type": t, "time": at, "k": k, "v": v}
                  for (t, at), k, v in zip([("A", 1), ("C", 2), ("D", 3), ("B", 4)], ks, vs)]
        rows = evaluate(text, events, engine="columnar")
        assert rows.engine == "columnar"
        return sum(r["count"] for r in rows)

    some = "RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d), B b) WHERE [a.k, c.k] WITHIN 10 s"
    assert count(some, (0, 1, 0, 0)) == 1  # another value's match
    assert count(some, (0, 0, 1, 1)) == 0  # its value's match, whatever d's and b's
    assert count(some, (1.0, 1, 7, 7)) == 0  # 1 and 1.0 are one value
    every = "RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d), B b) WHERE [a.k, b.k, c.k] WITHIN 10 s"
    assert count(every, (0, 1, 0, 0)) == 1
    assert count(every, (0, 0, 1, 0)) == 0
    two = "RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d), B b) WHERE [a.k, c.k] AND [b.v, d.v] WITHIN 10 s"
    assert count(two, (0, 0, 1, 1), (5, 5, 2, 2)) == 0  # c2 of a1's k, d3 of b4's v
    assert count(two, (0, 0, 1, 1), (5, 5, 2, 3)) == 1  # d3 not of b4's v
    assert count(two, (0, 1, 1, 1), (5, 5, 2, 2)) == 1  # c2 not of a1's k
    assert count(two, (1, 1.0, 9, 9), (2.0, 7, 2, 2)) == 0  # 1 and 1.0, 2 and 2.0 are one value


@pytest.mark.parametrize("pattern", ["SEQ(A a, NOT SEQ(C c, D d), B b)", "SEQ(NOT SEQ(C c, D d), A a, B b)",
                                     "SEQ(A a, B b, NOT SEQ(C c, D d))"])
def test_six_comparisons_find_a_match_spanning_most_of_the_window(pattern: str) -> None:
    """Six order comparisons on the step are scanned pair by pair within a window's length of each event
    (`dominance.window_scan`): a match whose C lies 9.4 s before its D still counts in a 10 s window."""
    six = " AND ".join(f"c.v {op} NEXT(d).v {bound}" for op, bound in
                       [("<", "+ 100"), ("<=", "+ 100"), (">", "- 100"), (">=", "- 100"), ("!=", "+ 0.5"), ("<", "+ 99")])
    text = f"RETURN COUNT(*) PATTERN {pattern} WHERE {six} WITHIN 10 s SLIDE 0.5 s"
    times = {"SEQ(A a, N": [("A", 0.5), ("C", 1), ("D", 10.4), ("B", 10.45)],  # between a and b
             "SEQ(NOT SE": [("C", 0.5), ("D", 9.9), ("A", 9.95), ("B", 10.0)],  # before a, in [0.5, 10.5) only
             "SEQ(A a, B": [("A", 0.5), ("B", 0.6), ("C", 1), ("D", 10.4)]}[pattern[:10]]  # after b, in [0.5, 10.5)
    events = [{"type": t, "time": at, "v": 1} for t, at in times]
    rows = evaluate(text, events, engine="columnar")
    assert rows.engine == "columnar"
    assert list(rows) == list(evaluate(text, events, engine="general"))
    without = [e for e in events if e["type"] != "C"]
    assert sum(r["count"] for r in evaluate(text, without)) == sum(r["count"] for r in rows) + 1  # the one excluded


def _timed(types: str, **fields: list) -> list[dict]:
    """Events of `types` at times 1, 2, ...: id = time, and each of `fields` per event."""
    return [{"type": t, "time": i + 1, "id": i + 1, **{k: v[i] for k, v in fields.items()}} for i, t in enumerate(types)]


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_part_that_may_match_nothing_and_loops_matches_with_a_chain_or_without_it(engine: str) -> None:
    """`NOT SEQ(C c, D d*, E e)`: c2 e3 is a match (no D, C next to E: c.f > e.f holds), and so is c2 d3 d4 e5
    with the f's failing (a chain: d3 above c2, d4 below e5, no single D is both). a1 -> b6 is excluded."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, D d*, E e), B b) "
            "WHERE c.v < NEXT(d).v AND d.v < NEXT(e).v AND c.f > NEXT(e).f WITHIN 20 s")
    without_d = _timed("ACEB", v=[0, 0, 0, 0], f=[0, 1, 0, 0])
    rows = evaluate(text, without_d, engine=engine)
    assert rows.engine == engine and list(rows) == []
    assert [r["count"] for r in evaluate(text.replace("c.f > ", "c.f < "), without_d, engine=engine)] == [1]
    chain = _timed("ACDDEB", v=[0, 1, 5, 0, 2, 0], f=[0, 0, 0, 0, 0, 0])
    assert list(evaluate(text, chain, engine=engine)) == []  # with D: C is not next to E, c.f > e.f not asked
    assert [r["count"] for r in evaluate(text.replace("d*", "d{0,1}"), chain, engine=engine)] == [1]
    assert list(evaluate(text.replace("d*", "d{0,2}"), chain, engine=engine)) == []


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_kleene_event_inside_a_group_matches_with_a_chain_of_it(engine: str) -> None:
    """`NOT SEQ((SEQ(C c, D d+))+, E e)`: c2 d3 d4 e5 is a match only through the chain d3 d4 (d3 above c2,
    d4 below e5); counted `D d{2}` too, `D d{3}` not."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ((SEQ(C c, D d+))+, E e), B b) "
            "WHERE c.v < NEXT(d).v AND d.v < NEXT(e).v WITHIN 20 s")
    events = _timed("ACDDEB", v=[0, 1, 5, 0, 2, 0])
    rows = evaluate(text, events, engine=engine)
    assert rows.engine == engine and list(rows) == []
    assert [r["count"] for r in evaluate(text, [e for e in events if e["time"] != 4], engine=engine)] == [1]
    assert list(evaluate(text.replace("d+", "d{2}"), events, engine=engine)) == []
    assert [r["count"] for r in evaluate(text.replace("d+", "d{3}"), events, engine=engine)] == [1]


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_second_iteration_of_a_group_may_skip_its_optional_part(engine: str) -> None:
    """`(SEQ(D d, E e*, D f))+` with each step's two events next to each other: c2 d3 e4 f5 | d6 f7 c8 is a
    match through two iterations, the second without E; neither alone is one. a1 -> b9 is excluded."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, E e*, D f))+, C g), B b) WHERE "
            + " AND ".join(f"{x}.id + 1 = NEXT({y}).id" for x, y in ["cd", "de", "ef", "df", "fg"]) + " WITHIN 20 s")
    events = _timed("ACDEDDDCB")
    rows = evaluate(text, events, engine=engine)
    assert rows.engine == engine and list(rows) == []
    no_e4 = _timed("ACDFDDDCB")  # the first iteration has no E to go through: d3 is not next to a D
    assert [r["count"] for r in evaluate(text, no_e4, engine=engine)] == [1]


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_an_iteration_of_a_group_may_end_before_its_optional_last_part(engine: str) -> None:
    """`(SEQ(D d, E e?))+` with each step's two events next to each other: c2 d3 e4 | d5 f6 is a match
    through two iterations, the first ending at E, the second at D (E skipped); none through one."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, E e?))+, C f), B b) WHERE "
            + " AND ".join(f"{x}.id + 1 = NEXT({y}).id" for x, y in ["cd", "de", "ed", "dd", "df", "ef"])
            + " WITHIN 20 s")
    rows = evaluate(text, _timed("ACDEDCB"), engine=engine)
    assert rows.engine == engine and list(rows) == []
    assert [r["count"] for r in evaluate(text, _timed("ACDEFDCB"), engine=engine)] == [1]  # e4, d3 not next to d6
    loose = text.replace(" AND d.id + 1 = NEXT(d).id", "")  # d3 d6 c7: two iterations, both ending at D
    assert list(evaluate(loose, _timed("ACDEFDCB"), engine=engine)) == []


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_group_inside_a_group_matches_through_its_own_iterations(engine: str) -> None:
    """`(SEQ(D d, (SEQ(E e, F f))+))+` with each step's two events next to each other: c2 d3 e4 f5 e6 f7 c8 is a
    match through two iterations of the inner group (none through one), c2 d3 e4 f5 d6 e7 f8 c9 through two of
    the outer one, c2 d3 e4 f5 d6 e7 f8 e9 f10 c11 through two of the outer one, the second with two inner."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))+, C g), B b) WHERE "
            + " AND ".join(f"{x}.id + 1 = NEXT({y}).id" for x, y in ["cd", "de", "ef", "fe", "fd", "fg"])
            + " WITHIN 20 s")
    rows = evaluate(text, _timed("ACDEFEFCB"), engine=engine)
    assert rows.engine == engine and list(rows) == []
    assert list(evaluate(text, _timed("ACDEFDEFCB"), engine=engine)) == []
    assert list(evaluate(text, _timed("ACDEFDEFEFCB"), engine=engine)) == []  # two inner ones in the second outer
    assert [r["count"] for r in evaluate(text, _timed("ACDEFBEFCB"), engine=engine)] == [2]  # f5 not next to e7
    counted = text.replace("(SEQ(E e, F f))+", "(SEQ(E e, F f)){2}")  # exactly two inner iterations
    assert list(evaluate(counted, _timed("ACDEFEFCB"), engine=engine)) == []
    assert [r["count"] for r in evaluate(counted, _timed("ACDEFCB"), engine=engine)] == [1]
    assert [r["count"] for r in evaluate(counted, _timed("ACDEFEFEFCB"), engine=engine)] == [1]  # three: f7 not f9


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_group_that_may_match_nothing_is_all_there_or_not_at_all(engine: str) -> None:
    """`NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))*, C g)`, each constrained step's events next to each other:
    c2 e3 f4 c5 is no match (no D: the group is not there, and c2 is not next to c5); c2 d3 e4 f5 c6 is one.
    `(SEQ(D d, E e?))*`: c2 d3 d4 c5 is a match through two iterations ending at D; c2 c3 one without it. A
    group that may match nothing inside one: c2 d3 h4 c5 without it, c2 d3 e4 f5 h6 c7 with it."""
    text = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))*, C g), B b) WHERE "
            + " AND ".join(f"{x}.id + 1 = NEXT({y}).id" for x, y in ["ef", "fe", "fg", "cg"]) + " WITHIN 20 s")
    rows = evaluate(text, _timed("ACEFCB"), engine=engine)
    assert rows.engine == engine and [r["count"] for r in rows] == [1]
    assert list(evaluate(text, _timed("ACDEFCB"), engine=engine)) == []
    inside = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))*, D h))+, C g), B b) WHERE "
              + " AND ".join(f"{x}.id + 1 = NEXT({y}).id" for x, y in ["cd", "de", "ef", "fe", "fh", "dh", "hg"])
              + " WITHIN 20 s")
    assert list(evaluate(inside, _timed("ACDDCB"), engine=engine)) == []  # the inner group not there: d3 h4
    assert list(evaluate(inside, _timed("ACDEFDCB"), engine=engine)) == []  # there: d3 e4 f5 h6
    assert [r["count"] for r in evaluate(inside, _timed("ACDEDCB"), engine=engine)] == [1]  # half there: no match
    first = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ((SEQ(E e, F f)){2}, D d))+, C g), B b) WHERE "
             + " AND ".join(f"{x}.id + 1 = NEXT({y}).id" for x, y in ["ce", "ef", "fe", "fd", "de", "dg"])
             + " WITHIN 20 s")  # a group beginning with a counted group: two E F, then D, per iteration
    assert list(evaluate(first, _timed("ACEFEFDCB"), engine=engine)) == []
    assert [r["count"] for r in evaluate(first, _timed("ACEFDCB"), engine=engine)] == [1]
    assert list(evaluate(first, _timed("ACEFEFDEFEFDCB"), engine=engine)) == []  # two iterations
    assert [r["count"] for r in evaluate(first, _timed("ACEFEFDEFDCB"), engine=engine)] == [1]
    skipped = first.replace("{2}", "*").replace("WITHIN", "AND c.id + 1 = NEXT(d).id WITHIN")
    assert list(evaluate(skipped, _timed("ACDCB"), engine=engine)) == []  # none: c2 d3 c4
    ends = ("RETURN COUNT(*) PATTERN SEQ(A a, NOT SEQ(C c, (SEQ(D d, E e?))*, C f), B b) WHERE "
            + " AND ".join(f"{x}.id + 1 = NEXT({y}).id" for x, y in ["cd", "de", "ed", "dd", "df", "ef", "cf"])
            + " WITHIN 20 s")
    assert list(evaluate(ends, _timed("ACDDCB"), engine=engine)) == []
    assert list(evaluate(ends, _timed("ACCB"), engine=engine)) == []
    assert [r["count"] for r in evaluate(ends, _timed("ACDBDCB"), engine=engine)] == [2]  # d3 not next to d5
