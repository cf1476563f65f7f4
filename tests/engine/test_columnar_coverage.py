"""What the columnar engine took over from the general engine (every shape of the language now), and
the input it does not take: engine="columnar" refuses it with a
ValueError and "auto" runs the general engine, with the general engine's
and the oracle's rows; "auto" runs the columnar engine where it covers the
query and the input is large enough.
"""

from __future__ import annotations

import pytest
from columnar_support import assert_same_rows
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream import compile_query
from greta_stream.engine.columnar import Unsupported, columnar_plan
from greta_stream.query import parse
from greta_stream.testing.oracle import oracle_rows

# Shapes the columnar engine took over from the general engine: same rows as both it and the oracle.
WIDENED = [
    "RETURN COUNT(*), SUM(c.v) PATTERN SEQ(A x, (SEQ(A a, C c{2}, B b)){2}) WITHIN 10 s",  # a count in a counted group
    "RETURN COUNT(*), MAX(c.v) PATTERN (SEQ(A a, (SEQ(B b, C c)){2})){3} WITHIN 10 s",  # ... a counted group in one
    "RETURN COUNT(*) PATTERN (SEQ(A a, (SEQ(B b, NOT E e, C c)){2})){2} WHERE e.v > 1 WITHIN 10 s",  # ... a NOT in it
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE "
    + " AND ".join(f"c.v != NEXT(d).v + {n}" for n in range(17)) + " WITHIN 10 s",  # over 16 comparisons on a step
    "RETURN COUNT(*), SUM(X.v) PATTERN A X+ WITHIN 0.0015 ms SLIDE 0.0005 ms",  # finer than whole microseconds
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e{2}))+, F f), B b) WITHIN 10 s",  # counted in a group
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e?))*, F f), B b) WHERE e.v < NEXT(d).v "
    "WITHIN 10 s",  # a group that may match nothing, with a part that may match nothing at its end
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ((SEQ(E e, F f)){2}, D d))+, G g), B b) WHERE "
    "c.v < NEXT(e).v AND d.v < NEXT(g).v WITHIN 10 s",  # a group beginning with a counted group, in a negated SEQ
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ((SEQ(E e, F f))*, D d))+, G g), B b) WHERE "
    "c.v < NEXT(d).v WITHIN 10 s",  # ... with a group that may match nothing
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))*))+, G g), B b) WHERE "
    "c.v < NEXT(d).v AND f.v < NEXT(d).v WITHIN 10 s",  # a group that may match nothing inside a group of one
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f)){2}))+, G g), B b) WHERE "
    "c.v < NEXT(d).v AND f.v < NEXT(g).v WITHIN 10 s",  # a counted group inside a group of a negated SEQ
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, (SEQ(E e, F f))+))+, G g), B b) WHERE "
    "c.v < NEXT(d).v AND f.v < NEXT(g).v WITHIN 10 s",  # a group inside a group of a negated SEQ
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e?))+, F f), B b) WHERE e.v < NEXT(d).v "
    "WITHIN 10 s",  # a part that may match nothing at the end of a group of a negated SEQ
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(D d, E e*, D f))+, F h), B b) WHERE d.v < NEXT(e).v AND "
    "e.v < NEXT(f).v WITHIN 10 s",  # a part inside a group of a negated SEQ that may match nothing and loops
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ((SEQ(C c, D d+))+, B e), B b) WHERE c.v < NEXT(d).v AND "
    "d.f > NEXT(e).f WITHIN 10 s",  # a Kleene event in a group of a negated SEQ constrained at both ends
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d*, E e), B b) WHERE c.v < NEXT(d).v AND "
    "d.v < NEXT(e).v WITHIN 10 s SLIDE 2 s",  # an optional part of a negated SEQ that loops
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d?, (SEQ(E e, F f))+, C g), B b) WHERE "
    "c.v < NEXT(e).v WITHIN 10 s",  # an optional part of a negated SEQ beside a group
    "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(A x, (SEQ(A a, (SEQ(C c, B b))*))+) WITHIN 10 s SLIDE 2 s",  # optional loop
    "RETURN COUNT(*), SUM(b.v) PATTERN (SEQ(A a, (SEQ(B b, C c))+))+ WITHIN 10 s SLIDE 2 s",  # a loop inside a loop
    "RETURN COUNT(*), SUM(b.v) PATTERN (SEQ(A a, B b{2}))+ WITHIN 10 s SLIDE 2 s",  # counted inside a loop
    "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(A x, (SEQ(A a, (SEQ(C c, B b))?))?, C y) WITHIN 10 s",  # optional in optional
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT (SEQ(C c, D d)){2}, B b) WITHIN 10 s SLIDE 2 s",  # counted NOT
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d{2,}), B b) WHERE d.v < NEXT(d).v WITHIN 10 s",
    "RETURN COUNT(*), SUM(c.v) PATTERN SEQ((SEQ(A a, B b)){2}, C c{0,2}) WITHIN 10 s SLIDE 2 s",  # optional counted
    "RETURN COUNT(*), SUM(d.v) PATTERN SEQ(A a{2}, (SEQ(B b, C c))?, D d{2}) WITHIN 10 s SLIDE 2 s",  # between two
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE c.v < NEXT(d).v AND c.f > NEXT(d).f "
    "AND c.v != NEXT(d).f AND c.f != NEXT(d).v AND c.v > NEXT(d).v - 3 AND c.f < NEXT(d).f + 3 "
    "WITHIN 10 s SLIDE 2 s",  # six order comparisons AND-ed on one step of a negated SEQ
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b) WHERE c.v < NEXT(d).v AND "
    "c.f > NEXT(d).f AND c.v <= NEXT(d).f AND c.f < NEXT(d).v AND c.v > NEXT(d).v - 3 WITHIN 10 s",  # five across a NOT
    "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE [a.k, c.k] WITHIN 10 s SLIDE 2 s",  # keyed
    "RETURN COUNT(*), SUM(c.v) PATTERN SEQ((SEQ(A a, B b)){2}, C c{2}) WITHIN 10 s",  # a counted group beside a counted event
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b) WHERE c.v < NEXT(d).v AND "
    "c.f > NEXT(d).f AND c.v <= NEXT(d).f WITHIN 10 s SLIDE 2 s",  # three order comparisons across a NOT
    "RETURN COUNT(*), MAX(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE c.v < NEXT(d).v AND c.f > NEXT(d).f "
    "AND c.v != NEXT(d).f AND c.f != NEXT(d).v WITHIN 10 s",  # four comparisons AND-ed on one step of a negated SEQ
    "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(A a+, NOT E e, B b) WHERE [a.k, e.k] WITHIN 10 s SLIDE 2 s",  # a run's NOT
    "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(NOT C c, A a, B b, C d) WHERE [a.k, d.k] WITHIN 10 s SLIDE 2 s",  # apart
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ((SEQ(A a, B b)){2}, (SEQ(C c, D d)){1,2}) WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(E e, D f))+, D d), B b) WHERE c.v < NEXT(e).v "
    "WITHIN 10 s SLIDE 2 s",  # a group inside a negated SEQ
    "RETURN COUNT(*), MAX(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE c.v < NEXT(d).v AND c.f > NEXT(d).f "
    "AND c.v != NEXT(d).f WITHIN 10 s SLIDE 2 s",  # three comparisons AND-ed on one step of a negated SEQ
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b) WHERE c.v < NEXT(d).v AND c.f > NEXT(d).f "
    "WITHIN 10 s",  # two order comparisons on a step across a NOT inside a negated SEQ
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b) WHERE c.v < NEXT(d).v "
    "WITHIN 10 s SLIDE 2 s",  # an edge predicate across a NOT inside a negated SEQ
    "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(A a, B b+) WHERE NEXT(b).v / (a.v - NEXT(b).f + 0.5) < 3 "
    "WITHIN 10 s SLIDE 2 s",  # a divisor of both events' values
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE (c.v < NEXT(d).v AND c.f > NEXT(d).f OR "
    "c.v = NEXT(d).v) WITHIN 10 s",  # an AND within a negated SEQ's step: two orders at once
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE c.v < NEXT(d).v AND c.f > NEXT(d).f "
    "WITHIN 10 s SLIDE 2 s",  # two predicates on one step of a negated SEQ
    "RETURN COUNT(*), SUM(a.v) PATTERN (SEQ(A a, B b?)){2} WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(NOT C c, A a+, B b) WHERE [a.k] WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), MAX(b.v) PATTERN SEQ(A a, B x?, (SEQ(B b, C c)){0,2}) WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), SUM(d.v) PATTERN SEQ((SEQ(A a, B b)){2}, (SEQ(C c, D d))+) WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), SUM(c.v) PATTERN SEQ(A a, (SEQ(B b, C c)){0,2}) WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), SUM(a.v) PATTERN (SEQ(A a+, NOT C c, B b))+ WHERE a.v < NEXT(a).v WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(NOT SEQ(C c, D d), A a+) WITHIN 10 s",
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, B b, NOT SEQ(C c+, D d)) WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), MAX(b.v) PATTERN SEQ(A a, B b?, C c) WHERE a.v < NEXT(c).v WITHIN 10 s",
    "RETURN COUNT(*), SUM(b.v), MIN(b.v) PATTERN SEQ(A a, B b{0,2}, C c) WHERE a.v < NEXT(c).v WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), AVG(b.v) PATTERN SEQ(A a, B b{2,}, C c) WHERE b.v <= NEXT(b).v WITHIN 10 s",
    "RETURN COUNT(*), MAX(b.v) PATTERN SEQ(NOT C c, A a, B b{2,3}, NOT D d) WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), SUM(a.v) PATTERN (SEQ(A a+, B b)){2,3} WHERE a.v < NEXT(a).v WITHIN 10 s",
    "RETURN COUNT(*), SUM(c.v) PATTERN SEQ(A a, B b{0,2}, C c{2,3}) WITHIN 10 s",
    "RETURN COUNT(*), MIN(b.v) PATTERN SEQ(A a*, B b+, C c?) WITHIN 10 s SLIDE 5 s",
    "RETURN COUNT(*) PATTERN SEQ(A a+, B b+) WHERE a.v < NEXT(a).v AND b.v < NEXT(b).v WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a+, B b) WHERE a.v < NEXT(a).v AND a.v < NEXT(b).v WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a, B b+) WHERE a.v < NEXT(b).v WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT C c, B b) WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a+, B b, NOT C c) WITHIN 10 s",
    "RETURN MAX(a.v) PATTERN SEQ(NOT C c, A a+) WITHIN 10 s",
    "RETURN COUNT(*), MIN(a.v), MAX(b.f) PATTERN SEQ(A a, A b+) WITHIN 10 s",
    "RETURN MIN(b.v), MAX(a.f) PATTERN SEQ(A a, B b+) WITHIN 10 s",
    "RETURN COUNT(*), SUM(X.v) PATTERN A X+ WHERE X.v > NEXT(X).v AND X.f < NEXT(X).f WITHIN 10 s",
    "RETURN COUNT(*) PATTERN A X+ WHERE (X.v >= NEXT(X).v AND X.f <= NEXT(X).f) WITHIN 10 s",
    "RETURN COUNT(*), MAX(a.v) PATTERN SEQ(NOT B n, A a+, NOT C c, A b, NOT D d) WITHIN 10 s SLIDE 2 s",
    "RETURN COUNT(*), SUM(a.v) PATTERN SEQ(A a+, NOT A n, B b) WHERE n.v > 4 WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT A n) WHERE a.v < 5 AND n.f > 0.5 WITHIN 10 s SLIDE 5 s",
    "RETURN COUNT(*) PATTERN A X+ WITHIN 1500 ms",
    "RETURN COUNT(*), SUM(X.v) PATTERN A X+ WITHIN 4 s SLIDE 500 ms",
    "RETURN COUNT(*) PATTERN SEQ(A a+, B b) WITHIN 2.5 s SLIDE 0.5 s",
    "RETURN COUNT(*) PATTERN A X+ WITHIN 1.5 ms SLIDE 0.125 ms",
    "RETURN COUNT(*) PATTERN A X+ WITHIN 1 ms SLIDE 0.1 ms",
    "RETURN COUNT(*), SUM(X.v) PATTERN A X+ WITHIN 0.5 ms SLIDE 0.003 ms",
    "RETURN COUNT(*) PATTERN A X+ WHERE X.v > NEXT(X).v OR X.f < NEXT(X).f WITHIN 10 s",
    "RETURN COUNT(*), SUM(a.v) PATTERN (SEQ(A a+, B b))+ WHERE a.v < NEXT(a).v WITHIN 10 s",
    "RETURN COUNT(*) PATTERN (SEQ(A, B))+ WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a, B b+) WHERE a.v * NEXT(b).v < 3 WITHIN 10 s",  # a NEXT value as a factor
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE c.v < NEXT(d).v WITHIN 10 s",
    "RETURN COUNT(*) PATTERN A X+ WHERE X.v % 2 = 0 AND X.v % 3 < NEXT(X).v % 3 WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(NOT SEQ(C c, NOT E e, D d), A a+) WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b) WITHIN 10 s",
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE [a.k, c.k] AND [b.v, d.v] WITHIN 10 s",  # two keys
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(E e, F f))+, D d), B b) WHERE c.v < NEXT(e).v "
    "AND f.v < NEXT(d).v WITHIN 10 s",  # a group inside a negated SEQ, bound at both ends
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, (SEQ(E e, F f))+, D d), B b) WHERE f.v < NEXT(e).v "
    "WITHIN 10 s",  # on the loop's step inside a negated SEQ
    "RETURN COUNT(*) PATTERN SEQ(A a+, NOT SEQ(C c, D d), B b) WHERE c.v != NEXT(d).v AND c.f != NEXT(d).f "
    "AND c.v != NEXT(d).f AND c.f != NEXT(d).v AND c.v != NEXT(d).v - 3 AND c.f != NEXT(d).f + 3 "
    "WITHIN 10 s",  # six `!=` AND-ed on one step of a negated SEQ
]


SMALL = [
    {"type": "A", "time": 1, "v": 3, "f": 1.0},
    {"type": "B", "time": 2, "v": 1, "f": 2.0},
    {"type": "A", "time": 3, "v": 5, "f": 0.5},
    {"type": "A", "time": 4, "v": 4, "f": 0.5},
    {"type": "B", "time": 5, "v": 2, "f": 3.0},
]


@pytest.mark.parametrize("text", WIDENED)
def test_widened_shapes_run_columnar(text: str) -> None:
    columnar_plan(compile_query(text))  # covered: no Unsupported
    events = [*SMALL, {"type": "C", "time": 3.5, "v": 0, "f": 0.0}, {"type": "A", "time": 6, "v": 2, "f": 1.5},
              {"type": "A", "time": 7, "v": 1, "f": 2.5}, {"type": "D", "time": 8, "v": 1, "f": 1.0}]
    got = evaluate(text, events, engine="columnar")
    assert got.engine == "columnar"
    assert_same_rows(text, events, evaluate(text, events, engine="general"), got, ("general", "columnar"))
    assert_same_rows(text, events, oracle_rows(parse(text), events), got, ("oracle", "columnar"))


UNTAKEN_INPUTS = [
    # times whose window indices pass int64 at a window's resolution (2**49 s in microseconds)
    ("RETURN COUNT(*) PATTERN A X+ WITHIN 1 ms SLIDE 0.002 ms",
     [{"type": "A", "time": 2**49 + i / 10**4} for i in range(3)]),
    # a string in an attribute read only by the edge predicate (a predicate error, not a bad event)
    ("RETURN COUNT(*) PATTERN A X+ WHERE X.v < NEXT(X).v WITHIN 10 s",
     [{"type": "A", "time": 1, "v": 1}, {"type": "A", "time": 2, "v": "x"}, {"type": "A", "time": 3, "v": 2}]),
    # a string in an attribute read only by the second edge predicate
    ("RETURN COUNT(*) PATTERN A X+ WHERE X.v > NEXT(X).v AND X.w < NEXT(X).w WITHIN 10 s",
     [{"type": "A", "time": i, "v": i % 3, "w": "x" if i == 2 else i} for i in range(5)]),
    # an int past 2**53 there (float64 would round it)
    ("RETURN COUNT(*) PATTERN A X+ WHERE X.v > NEXT(X).v AND X.w < NEXT(X).w WITHIN 10 s",
     [{"type": "A", "time": i, "v": i % 3, "w": 2**60 + i} for i in range(5)]),
    # % by 0 in the edge predicate (Python raises: the predicate does not hold there)
    ("RETURN COUNT(*) PATTERN A X+ WHERE X.v % X.w < NEXT(X).v WITHIN 10 s",
     [{"type": "A", "time": 1, "v": 1, "w": 0}, {"type": "A", "time": 2, "v": 3, "w": 2}]),
]


@pytest.mark.parametrize(("text", "events"), UNTAKEN_INPUTS)
def test_untaken_input_raises_and_auto_falls_back(text: str, events: list[dict]) -> None:
    with pytest.raises(ValueError, match="columnar"):
        evaluate(text, events, engine="columnar")
    auto = evaluate(text, events)
    assert auto.engine == "general"
    assert_same_rows(text, events, evaluate(text, events, engine="general"), auto, ("general", "auto"))


def test_auto_uses_columnar_where_covered() -> None:
    """auto: the general engine below COLUMNAR_MIN_EVENTS events (the kernels'
    start-up costs more), the columnar engine from there on; same rows."""
    from greta_stream.runtime import COLUMNAR_MIN_EVENTS

    text = "RETURN COUNT(*) PATTERN A X+ WHERE X.v < NEXT(X).v WITHIN 10 s"
    auto = evaluate(text, SMALL)
    assert auto.engine == "general"
    assert list(auto) == [{"window_start": 0, "window_end": 10, "count": 5}]  # a1 a3 a4, a1 a3, a1 a4
    many = SMALL + [{"type": "B", "time": 5}] * (COLUMNAR_MIN_EVENTS - len(SMALL))
    auto = evaluate(text, many)
    assert auto.engine == "columnar"
    assert list(auto) == [{"window_start": 0, "window_end": 10, "count": 5}]


def test_only_columnar_queries() -> None:
    with pytest.raises(Unsupported):
        columnar_plan(compile_query("RETURN TRENDS PATTERN A X+ WITHIN 10 s"))  # the trends themselves: CET
