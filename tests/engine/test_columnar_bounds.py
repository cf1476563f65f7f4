"""Edge comparisons with X's part inside arithmetic with NEXT(Y)'s (`S.price - NEXT(S).price > 0.5`) on
the columnar engine (`engine/columnar/bounds.py`), against the general engine, the oracle and through
micro-batches with restores, under each strategy.

Such a comparison is not moved around: `x.f - NEXT(x).f > 0.1` and `x.f > NEXT(x).f + 0.1` round apart
(0.3 - 0.2 > 0.1 is false where 0.3 > 0.2 + 0.1 is false too, but 0.7 - 0.6 > 0.1 is true where 0.7 >
0.6 + 0.1 is false), so the values below are the decimals whose sums and differences round (0.1, 0.2,
0.3, 0.6, 0.7), ints beside them, and the bound each successor gets is checked against the comparison
as written.
"""

from __future__ import annotations

import numpy as np
from columnar_support import ROUNDING, assert_columnar_shapes, differential_tests, rounding_events, shape_queries
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream import RunSpec
from greta_stream.engine.columnar import bounds
from greta_stream.engine.columnar.vector import evaluate as vector_eval
from greta_stream.query import parse

SHAPES = [  # (pattern, edge predicates it may take, alias it aggregates)
    ("A x+", ["x.f - NEXT(x).f >= 0.1", "(x.v - NEXT(x).v) * 2 >= NEXT(x).f"], "x"),
    ("A x+", ["NEXT(x).f + x.f < 0.9", "-(x.f) + NEXT(x).v <= 1", "(x.f - NEXT(x).f > 0.1 OR x.v < NEXT(x).v)"], "x"),
    ("A x+", ["NEXT(x).v * 3 > x.f - NEXT(x).f", "0.3 < (x.f + NEXT(x).f) / 2"], "x"),
    ("SEQ(A a, A x+)", ["a.f + NEXT(x).f > 0.9", "x.v - NEXT(x).v >= 1", "x.f - 0.2 * NEXT(x).v < 0.5"], "x"),
    ("SEQ(A a, NOT E e, B b+)", ["b.f - NEXT(b).f < -0.1", "a.v - NEXT(b).v < 0"], "b"),
    ("SEQ(A a, B b{2,3}, A c)", ["b.v * 2 - NEXT(b).v > 0", "(b.f - NEXT(c).f) * -3 <= 0.3"], "b"),
    ("(SEQ(A a+, B b))+", ["a.f - NEXT(a).f > 0.1", "NEXT(b).f - a.f >= 0.1"], "a"),
]
LOCALS = ["a.v > 0", "b.f < 2", "x.v < 3"]
BOUND_QUERY = shape_queries(SHAPES, LOCALS, ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "AVG({agg}.f)"])


(test_bounded_edges_equal_the_general_engine, test_bounded_edges_equal_the_oracle,
 test_bounded_edges_streamed_equal_the_general_engine) = differential_tests(BOUND_QUERY, rounding_events,
                                                                            examples=(300, 200, 80))


def test_every_shape_runs_on_the_columnar_engine() -> None:
    assert_columnar_shapes(SHAPES, with_edges=True)


def test_a_product_or_quotient_of_the_two_events_values_is_a_pair_program_not_a_bound() -> None:
    """`x.f * NEXT(x).f > 1` (a NEXT value as a factor: its sign may turn the comparison around per
    event), `NEXT(x).f / x.f > 1` (X's part as a divisor), `x.f - NEXT(x).f > x.v` (X on both sides):
    no bound; `pairs.py` runs them as written (tests/engine/test_columnar_pairs.py)."""
    for where in ("x.f * NEXT(x).f > 1", "NEXT(x).f / x.f > 1", "x.f - NEXT(x).f > x.v"):
        assert bounds.bounded(parse(f"RETURN COUNT(*) PATTERN A x+ WHERE {where} WITHIN 10 s").where[0].expr) is None
        assert RunSpec.create(f"RETURN COUNT(*) PATTERN A x+ WHERE {where} WITHIN 10 s").columnar_refusal == ""


def test_a_difference_is_not_rearranged() -> None:
    """0.7 - 0.6 = 0.09999999999999998: `x.f - NEXT(x).f >= 0.1` does not hold from 0.7 to 0.6, where the
    rearranged `x.f >= NEXT(x).f + 0.1` would (0.6 + 0.1 = 0.7); from 0.7 to 0.3 it holds."""
    events = [{"type": "A", "time": 1, "f": 0.7}, {"type": "A", "time": 2, "f": 0.6}, {"type": "A", "time": 3, "f": 0.3}]
    text = "RETURN COUNT(*) PATTERN A x+ WHERE x.f - NEXT(x).f >= 0.1 WITHIN 10 s"
    rows = evaluate(text, events, engine="columnar")
    assert rows.engine == "columnar"
    assert [r["count"] for r in rows] == [3 + 2]  # three alone, 0.7 -> 0.3 and 0.6 -> 0.3
    assert (0.7 - 0.6 >= 0.1, 0.7 >= 0.6 + 0.1) == (False, True)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["x.f - NEXT(x).f > 0.1", "NEXT(x).f + x.f <= 0.9", "0.3 < (x.f + NEXT(x).f) / 2",
                        "-(x.f) * 3 + NEXT(x).f >= -1", "NEXT(x).f - x.f * 0.1 < 0.07"]),
       st.lists(st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from(ROUNDING), min_size=1, max_size=20))
def test_the_bound_admits_exactly_the_values_the_comparison_holds_for(where: str, fs: list[float]) -> None:
    """Each successor's T: a predecessor's value of X's part (key) holds iff key >= T (UP) or key <= T
    (DOWN), for every value of the stream (the comparison computed as Python does), and T is the last
    float that holds (the next one past it does not)."""
    e = parse(f"RETURN COUNT(*) PATTERN A x+ WHERE {where} WITHIN 10 s").where[0].expr
    found = bounds.bounded(e)
    assert found is not None
    op, x, _ = found
    up = op == bounds.UP
    values = np.array(fs, np.float64)
    t = bounds.threshold(e, x, up, {"f": values}, values)
    keys = np.broadcast_to(vector_eval(x, {"f": values}), values.shape)
    for b, tb in zip(fs, t.tolist()):
        for a, key in zip(fs, keys.tolist()):
            assert _holds(where, a, b) == (key >= tb if up else key <= tb), (where, a, b, tb)
        if np.isfinite(tb):
            past = np.nextafter(tb, -np.inf if up else np.inf)
            at = bounds.holds(e, x, np.array([tb, past]), {"f": np.array([b, b])}).tolist()
            assert at == [True, False], (where, b, tb)


def _holds(where: str, a: float, b: float) -> bool:
    return bool(eval(where.replace("NEXT(x).f", repr(float(b))).replace("x.f", repr(float(a)))))  # noqa: S307
