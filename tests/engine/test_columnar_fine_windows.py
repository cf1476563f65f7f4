"""Windows in any unit on the columnar engine (`WITHIN 0.3 ms SLIDE 0.1 ms`, `WITHIN 0.02 ms SLIDE
0.005 ms`, `WITHIN 0.0015 ms SLIDE 0.0005 ms`), against the general engine, the oracle and through
micro-batches with restores: dense streams whose times are a grid of tenths of a millisecond down to
quarters of a nanosecond, near 0 or at epoch seconds (1.7e9 s: a time in microseconds has 16 significant digits there,
past what float64 window bounds place exactly, and the few times near a bound are placed one by one), and
times past the range whose window indices fit int64 at that resolution (the run goes to the general engine
and says so).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from columnar_support import case_tests, check_against_general, dense_events, dense_query
from hypothesis import strategies as st
from problems_support import evaluate

SHAPES = [  # (pattern, edge predicates it may take, alias its aggregates read)
    ("A a+", ["a.v < NEXT(a).v"], "a"),
    ("SEQ(A a+, B b)", ["a.v < NEXT(a).v", "a.f >= NEXT(b).f"], "a"),
    ("SEQ(NOT E e, A a+, NOT C c, B b)", ["a.v >= NEXT(b).v"], "b"),
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["c.v < NEXT(d).v"], "a"),
    ("(SEQ(A a, B b))+", ["a.v <= NEXT(b).v"], "b"),
]
LOCALS = ["a.v > 0", "b.f < 2"]
# seconds per unit of `dense_events`' times and of `dense_query`'s windows: a nanosecond up to 0.3 ms
UNITS = (Fraction(1, 10**6), Fraction(1, 10**6), Fraction(1, 10**5), Fraction(1, 10**4), Fraction(3, 10**4),
         Fraction(1, 10**7), Fraction(1, 10**9))
OFFSETS = (0, 0, 1_700_000_000, -86_400)


def _ms(seconds: Fraction) -> str:
    """A duration in milliseconds, as a decimal."""
    ms = seconds * 1000
    if ms.denominator == 1:
        return str(ms.numerator)
    return f"{float(ms):.6f}".rstrip("0")


@st.composite
def cases(draw: Any, n_max: int = 30) -> tuple[str, list[dict]]:
    """A query of one of SHAPES with its window in `unit`s, and a dense stream on the same grid of `unit`s
    (whole and quarter units), shifted by an offset of whole seconds."""
    unit, offset = draw(st.sampled_from(UNITS)), draw(st.sampled_from(OFFSETS))
    pattern, edges, agg = draw(st.sampled_from(SHAPES))
    text = dense_query(draw, pattern, edges, LOCALS, ["COUNT(*)", f"SUM({agg}.v)", f"MAX({agg}.f)"])
    head, _, window = text.rpartition(" WITHIN ")
    within, _, slide = window.removesuffix(" s").partition(" s SLIDE ")
    text = f"{head} WITHIN {_ms(int(within) * unit)} ms SLIDE {_ms(int(slide) * unit)} ms"
    events = draw(dense_events(types="AABBCDE", n_max=n_max))
    for e in events:
        e["time"] = float(offset + Fraction(e["time"]) * unit)
    return text, events


(test_fine_windows_equal_the_general_engine, test_fine_windows_equal_the_oracle,
 test_fine_windows_streamed_equal_the_general_engine) = case_tests(cases, cases(n_max=10), examples=(150, 80, 50))


@pytest.mark.parametrize(("window", "step", "t0"), [
    ("WITHIN 0.3 ms SLIDE 0.1 ms", Fraction(1, 10**4), 1_764_547_200),  # every event on a bound
    ("WITHIN 0.02 ms SLIDE 0.005 ms", Fraction(1, 4 * 10**6), 1_700_000_000),  # float64 misplaces 1 in 200
    ("WITHIN 0.0015 ms SLIDE 0.0005 ms", Fraction(1, 10**7), 1_700_000_000),  # finer than float64 there
    ("WITHIN 0.0015 ms SLIDE 0.0005 ms", Fraction(1, 4 * 10**7), 0),
])
def test_epoch_times_on_fine_bounds(window: str, step: Fraction, t0: int) -> None:
    """Epoch seconds on a grid as fine as the windows' bounds, and a hair beside some: the rows of both
    engines (the general engine places each time as the decimal it prints as)."""
    events = [{"type": "A", "time": float(t0 + k * step), "v": k % 3} for k in range(400)]
    events += [{"type": "A", "time": float(t0 + k * step) + 1e-7, "v": 1} for k in range(0, 400, 7)]
    text = f"RETURN COUNT(*), SUM(X.v) PATTERN A X+ WHERE X.v <= NEXT(X).v {window}"
    got = check_against_general(text, events)
    assert len(got) > 20


@pytest.mark.parametrize("window", ["WITHIN 0.0015 ms SLIDE 0.0005 ms", "WITHIN 0.000004 ms SLIDE 0.000001 ms",
                                    "WITHIN 0.0025 ms SLIDE 0.0015 ms"])
def test_timestamps_under_windows_finer_than_a_microsecond(window: str) -> None:
    """ISO-8601 times (whole microseconds, two events at each) under windows of fractions of one: the
    general engine's rows, on the columnar engine (numeric times streamed: `cases` above)."""
    import random
    from datetime import UTC, datetime, timedelta

    rnd, t0 = random.Random(3), datetime(2026, 3, 1, tzinfo=UTC)
    events = [{"type": rnd.choice("AAB"), "time": (t0 + timedelta(microseconds=k // 2)).isoformat(),
               "v": rnd.randrange(4)} for k in range(600)]
    text = f"RETURN COUNT(*), SUM(X.v), MIN(X.v) PATTERN A X+ WHERE X.v <= NEXT(X).v {window}"
    got = check_against_general(text, events)
    assert got.engine == "columnar" and len(got) > 100


def test_times_past_the_resolution_go_to_the_general_engine() -> None:
    """Window indices of 2**49 s in steps of 2 microseconds pass int64: the run says why the general
    engine took it, and the rows are its."""
    text = "RETURN COUNT(*) PATTERN A X+ WITHIN 0.01 ms SLIDE 0.002 ms"
    events = [{"type": "A", "time": 2.0**49 + i} for i in range(3)] + [{"type": "A", "time": 5.0}]
    auto = evaluate(text, events)
    assert auto.engine == "general"
    got = evaluate(text, [*events, *({"type": "B", "time": 1} for _ in range(2000))])
    assert got.engine == "general"
    assert "beyond int64" in got.engine_reason
    assert list(got) == list(evaluate(text, events, engine="general"))
