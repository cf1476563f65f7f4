"""Edge comparisons that mix the two events' values (`x.f * NEXT(x).v > x.v`, `NEXT(x).f / x.f < 0.9`) on
the columnar engine (`engine/columnar/pairs.py`: a program per comparison, run pair by pair in a scanned
store), against the general engine, the oracle and through micro-batches with restores, under each
strategy; and the inputs on which float64 would not give Python's values, handed to the general engine.

The values are the decimals whose products and quotients round (0.1, 0.2, 0.3, 0.7) beside ints, so a
program that computed anything other than the comparison as written would admit other pairs.
"""

from __future__ import annotations

import re

import pytest
from columnar_support import ROUNDING, assert_columnar_shapes, differential_tests, rounding_events, shape_queries
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream.engine.columnar import pairs
from greta_stream.errors import ConfigError
from greta_stream.query import parse

SHAPES = [  # (pattern, edge predicates it may take, alias it aggregates)
    ("A x+", ["(x.f + NEXT(x).v) % 2 < 1", "x.v % 3 <= NEXT(x).v % 2"], "x"),  # Python's % (sign of the divisor)
    ("A x+", ["x.f * NEXT(x).v > x.v", "NEXT(x).f / x.f < 0.9", "(x.f * NEXT(x).f >= 0.06 OR x.v < NEXT(x).v)"], "x"),
    ("A x+", ["x.v * NEXT(x).v != 2", "x.f * 3 - NEXT(x).f * x.v <= NEXT(x).v / x.f"], "x"),
    ("SEQ(A a, A x+)", ["a.v * NEXT(x).v >= 2", "x.f * x.v < NEXT(x).f + NEXT(x).v * x.f"], "x"),
    ("SEQ(A a, NOT E e, B b+)", ["b.f / NEXT(b).f > 1", "a.v * NEXT(b).v < 3"], "b"),
    ("SEQ(A a, B b{2,3}, A c)", ["b.v * NEXT(b).v > 0", "b.f / NEXT(c).f <= 2"], "b"),
    ("(SEQ(A a+, B b))+", ["a.f * NEXT(a).v > a.v", "NEXT(b).f / a.f >= 1"], "a"),
    ("SEQ(A a, B b?, A c)", ["a.v * NEXT(b).f < 1", "-(a.f * NEXT(c).f) > -0.1"], "a"),
    # divisors of both events' values (never 0 on these events: `f` is positive, `v` at least 0)
    ("A x+", ["NEXT(x).f / (x.f + NEXT(x).f) > 0.4", "x.v % (NEXT(x).f * x.f) < 0.05"], "x"),
    ("SEQ(A a, B b+)", ["NEXT(b).v / (a.f * NEXT(b).f + a.v) <= 3", "b.f * 2 > NEXT(b).f / (b.f + NEXT(b).v)"], "b"),
]
LOCALS = ["a.v > 0", "b.f < 2", "x.v < 3"]
PAIR_QUERY = shape_queries(SHAPES, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "AVG({agg}.f)"])


(test_pair_edges_equal_the_general_engine, test_pair_edges_equal_the_oracle,
 test_pair_edges_streamed_equal_the_general_engine) = differential_tests(PAIR_QUERY, rounding_events,
                                                                         examples=(300, 200, 80))


def test_every_shape_runs_on_the_columnar_engine() -> None:
    assert_columnar_shapes(SHAPES, with_edges=True)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["x.f * NEXT(x).f > 0.06", "NEXT(x).f / x.f < 0.99", "x.f * NEXT(x).g = x.g * 0.3",
                        "(x.f + NEXT(x).f) * x.g - NEXT(x).g / 3 >= 0.1", "-(x.f * NEXT(x).f) != -0.21",
                        "NEXT(x).g % x.f < 0.3", "(x.f * NEXT(x).f) % -3 >= -1", "x.g % 4 - NEXT(x).g % 3 > 0"]),
       st.lists(st.tuples(st.floats(-1e4, 1e4).filter(lambda f: abs(f) >= 1e-3) | st.sampled_from(ROUNDING),
                          st.integers(-50, 50) | st.sampled_from(ROUNDING)), min_size=1, max_size=12))
def test_a_program_holds_exactly_where_python_computes_the_comparison_holds(where: str, rows: list) -> None:
    """Every pair of values gives the program the truth Python's arithmetic gives (floats and ints; no
    divisor near 0, whose quotients would pass 2**53 and hand the run over)."""
    import numpy as np

    e = parse(f"RETURN COUNT(*) PATTERN A x+ WHERE {where} WITHIN 10 s").where[0].expr
    side = pairs.pair_side(e)
    assert side is not None
    cols = {"f": np.array([r[0] for r in rows], np.float64), "g": np.array([r[1] for r in rows], np.float64)}
    st_ = np.zeros(len(rows), np.int64)
    progs = pairs.programs([(side, 0, 0)], cols, st_)
    got = np.zeros(len(rows), np.int8)
    for v, (fv, gv) in enumerate(rows):
        pairs.judge(got, v, progs.values, progs.steps, progs.at[0], progs.at[1], np.arange(len(rows)))
        for u, (fu, gu) in enumerate(rows):
            want = eval(where.replace("NEXT(x).f", repr(fv)).replace("NEXT(x).g", repr(gv))  # noqa: S307
                        .replace("x.f", repr(fu)).replace("x.g", repr(gu)).replace(" = ", " == "))
            assert got[u] == want, (where, rows[u], rows[v])


def test_a_product_is_not_rearranged() -> None:
    """1.3 * 3 is 3.9000000000000004: `x.f * NEXT(x).v <= 3.9` does not hold from 1.3 to 3, where the
    rearranged `x.f <= 3.9 / NEXT(x).v` would (3.9 / 3 is 1.3); the comparison as written decides."""
    events = [{"type": "A", "time": 1, "f": 1.3, "v": 1}, {"type": "A", "time": 2, "f": 1.0, "v": 3}]
    rows = evaluate("RETURN COUNT(*) PATTERN A x+ WHERE x.f * NEXT(x).v <= 3.9 WITHIN 10 s", events,
                    engine="columnar")
    assert rows.engine == "columnar"
    assert [r["count"] for r in rows] == [2]  # each alone
    assert (1.3 * 3 <= 3.9, 1.3 <= 3.9 / 3) == (False, True)


@pytest.mark.parametrize(("where", "odd", "reason"), [
    ("NEXT(x).f / x.f < 2", 0.0, "division by zero in an edge predicate"),
    ("x.f * NEXT(x).f > 1", 2.0**30, "edge predicate values beyond 2**53"),
])
def test_input_float64_cannot_compute_as_python_does_goes_to_the_general_engine(where: str, odd: float,
                                                                                reason: str) -> None:
    """One event among 2,400 whose value would take float64 away from Python's: the run is the
    general engine's, and says why."""
    events = [{"type": "A", "time": i / 4, "f": odd if i == 1200 else 1.0 + i % 3} for i in range(2400)]
    text = f"RETURN COUNT(*) PATTERN A x+ WHERE {where} WITHIN 2 s"
    with pytest.raises(ConfigError, match=re.escape(reason)):
        evaluate(text, events, engine="columnar")
    rows = evaluate(text, events)
    assert rows.engine == "general"
    assert reason in rows.engine_reason
    assert sum(r["count"] for r in rows) > 0


TIES = [{"type": "A", "time": i / 2, "f": [0.5, 0.5, 0.7, 0.3, 0.3, 0.6][i % 6], "v": i % 3} for i in range(2400)]


@pytest.mark.parametrize("where", [
    "x.f > NEXT(x).f AND NEXT(x).f / (x.f - NEXT(x).f) > 1",  # a guard before: Python never divides by 0
    "x.v != NEXT(x).v AND NEXT(x).v % (x.v - NEXT(x).v) < 1",
    "x.f < NEXT(x).f AND x.f / (NEXT(x).f - x.f) <= 2 AND x.v < 2",
])
def test_a_divisor_of_both_events_runs_on_the_columnar_engine_where_python_never_divides_by_zero(where: str) -> None:
    """Ties make the divisor 0 for some pairs, and a comparison before it (AND, left to right) is false
    for every one of them: the general engine never evaluates the division there, and neither does the
    columnar engine's run, which stays columnar with the general engine's rows."""
    text = f"RETURN COUNT(*), SUM(x.v) PATTERN A x+ WHERE {where} WITHIN 6 s SLIDE 2 s"
    general = evaluate(text, TIES, engine="general")
    columnar = evaluate(text, TIES, engine="columnar")
    assert general.metrics.get("predicate_errors", 0) == 0
    assert sorted(map(repr, columnar)) == sorted(map(repr, general))
    assert sum(r["count"] for r in general) > 0


@pytest.mark.parametrize("where", [
    "NEXT(x).f / (x.f - NEXT(x).f) > 1",  # unguarded
    "NEXT(x).f / (x.f - NEXT(x).f) > 1 AND x.f > NEXT(x).f",  # the guard after the division
    "NEXT(x).v % (x.v - NEXT(x).v) < 1",
    "(x.f > NEXT(x).f OR NEXT(x).f / (x.f - NEXT(x).f) > 1)",
])
def test_a_pair_dividing_by_zero_hands_the_run_to_the_general_engine(where: str) -> None:
    """Where Python evaluates a division by 0 (the predicate false there, counted in `predicate_errors`),
    the columnar engine cannot say which pairs Python's evaluation reached: the run is the general
    engine's, which counts them, and it says why."""
    text = f"RETURN COUNT(*), SUM(x.v) PATTERN A x+ WHERE {where} WITHIN 6 s SLIDE 2 s"
    with pytest.raises(ConfigError, match="division by zero in an edge predicate"):
        evaluate(text, TIES, engine="columnar")
    rows, general = evaluate(text, TIES), evaluate(text, TIES, engine="general")
    assert rows.engine == "general"
    assert "division by zero in an edge predicate" in rows.engine_reason
    assert sorted(map(repr, rows)) == sorted(map(repr, general))
    if "OR" not in where:
        assert general.metrics["predicate_errors"] > 0


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["skip-till-any-match", "skip-till-next-match", "contiguous"]),
       st.sampled_from(["x.f > NEXT(x).f AND NEXT(x).f / (x.f - NEXT(x).f) > 1",
                        "NEXT(x).v / (x.v - NEXT(x).v) >= 0 AND x.v > NEXT(x).v",
                        "x.v <= NEXT(x).v AND (x.f + 1) % (NEXT(x).v - x.v) < 1",
                        "(x.v < NEXT(x).v OR x.f / (x.v * NEXT(x).f - x.f) > 0.5)"]),
       st.lists(st.fixed_dictionaries({"type": st.just("A"), "time": st.integers(0, 8), "v": st.integers(0, 2),
                                       "f": st.sampled_from([0.3, 0.6, 0.9])}), max_size=14))
def test_the_columnar_engine_keeps_a_run_only_where_python_divides_by_no_zero(strategy: str, where: str,
                                                                             events: list) -> None:
    """Whatever the strategy, the stream and the predicate's order: a run the columnar engine keeps
    has the general engine's rows and a general engine that counted no error; one it hands over says
    why and gives the general engine's rows and error count."""
    from greta_stream.testing.oracle import oracle_rows

    text = f"RETURN COUNT(*), SUM(x.v), MAX(x.f) PATTERN A x+ SEMANTICS {strategy} WHERE {where} WITHIN 4 s SLIDE 2 s"
    general = evaluate(text, events, engine="general")
    assert sorted(map(repr, general)) == sorted(map(repr, oracle_rows(parse(text), events)))
    try:
        columnar = evaluate(text, events, engine="columnar")
    except ConfigError as exc:
        assert "division by zero in an edge predicate" in str(exc)
        rows = evaluate(text, events)
        assert sorted(map(repr, rows)) == sorted(map(repr, general))
        assert rows.metrics.get("predicate_errors", 0) == general.metrics.get("predicate_errors", 0)
        return
    assert general.metrics.get("predicate_errors", 0) == 0
    assert sorted(map(repr, columnar)) == sorted(map(repr, general))


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_a_stream_meeting_a_zero_divisor_hands_over_with_the_general_engines_rows(data: st.DataObject) -> None:
    """Micro-batches (with restores or not): the columnar stream goes on until a batch's pairs divide by
    0 where Python evaluates them, then the general engine takes over; every batch's rows are the
    general engine's."""
    from columnar_support import batches_and_watermarks, check

    where = data.draw(st.sampled_from(["NEXT(x).v / (x.v - NEXT(x).v) >= 0 AND x.v > NEXT(x).v",
                                       "x.v <= NEXT(x).v AND (x.f + 1) % (NEXT(x).v - x.v) < 1",
                                       "x.f > NEXT(x).f AND NEXT(x).f / (x.f - NEXT(x).f) > 1"]))
    text = f"RETURN COUNT(*), SUM(x.v) PATTERN A x+ WHERE {where} WITHIN 4 s SLIDE 2 s"
    events = data.draw(st.lists(st.fixed_dictionaries({
        "type": st.just("A"), "time": st.integers(0, 12), "v": st.integers(0, 2),
        "f": st.sampled_from([0.3, 0.6, 0.9])}), max_size=24))
    check(text, events, batches_and_watermarks(data.draw, events), restore=data.draw(st.booleans()))
