"""`timebase.window_bounds` (the columnar engine's vectorized first and last
window of each event) against `Timebase.first_window` / `last_window` (the
general engine's exact reference), for windows that are not whole seconds:
int times, floats of few decimals, floats exactly on (and a hair beside) a
window bound, huge times past the float arithmetic's exact range, and
timestamps in microseconds."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream.engine.timebase import (
    MAX_TIME_S,
    NUMERIC,
    TIMESTAMP,
    US_PER_S,
    Timebase,
    Window,
    WindowRangeError,
    max_window_time,
    window_bounds,
    window_in_unit,
)

# steps of WITHIN and SLIDE: mostly a millisecond, also finer ones the columnar engine takes (down to a microsecond)
STEPS = (Fraction(1, 1000), Fraction(1, 1000), Fraction(1, 1000), Fraction(1, 8000), Fraction(1, 5000),
         Fraction(1, 10_000), Fraction(3, 100_000), Fraction(1, 10**6), Fraction(1))


@st.composite
def windows(draw: st.DrawFn) -> tuple[Fraction, Fraction]:
    """(within, slide) in seconds, multiples of one step."""
    step = draw(st.sampled_from(STEPS))
    slide = draw(st.integers(1, 6000)) * step
    within = slide * draw(st.integers(1, 8)) + draw(st.sampled_from([0, 0, 1, 7])) * step
    return within, slide


def _bounds(within: Fraction, slide: Fraction, k: int) -> list[Fraction]:
    return [k * slide, k * slide + within]


@st.composite
def float_times(draw: st.DrawFn, within: Fraction, slide: Fraction) -> list[float]:
    """Floats: few decimals, exactly on window bounds and a hair beside them, wide and huge."""
    offset = draw(st.sampled_from([0, 0, 0, 1_700_000_000, -1_700_000_000, 10**12, 2**49]))
    few = st.tuples(st.integers(-30_000, 30_000), st.integers(0, 6)).map(lambda p: offset + p[0] / 10 ** p[1])
    base = math.floor(Fraction(offset) / slide)
    on = st.tuples(st.integers(-40, 40), st.booleans()).map(
        lambda p: float(_bounds(within, slide, base + p[0])[p[1]]))
    beside = st.tuples(on, st.sampled_from([-math.inf, math.inf])).map(lambda p: math.nextafter(*p))
    wide = st.floats(-(2.0**50) + 1, 2.0**50 - 1, allow_nan=False)
    return draw(st.lists(st.one_of(few, on, on, beside, wide), min_size=1, max_size=30))


def _check(times: list[int] | list[float], tb: Timebase, window: Window, ints: bool) -> None:
    """Times whose window indices fit int64 placed as the timebase places them; with one beyond, a
    `WindowRangeError` (the columnar engine hands such input to the general engine)."""
    limit = max_window_time(window)
    if window.den > 1 and any(abs(x) >= limit for x in times):
        with pytest.raises(WindowRangeError, match="beyond int64"):
            window_bounds(np.array(times, np.int64 if ints else np.float64), window, ints)
        times = [x for x in times if abs(x) < limit]  # type: ignore[assignment]
        if not times:
            return
    t = np.array(times, np.int64 if ints else np.float64)
    lo, hi = window_bounds(t, window, ints)
    assert lo.dtype == np.int64 and hi.dtype == np.int64
    want_lo = [tb.first_window(x) for x in times]
    want_hi = [tb.last_window(x) for x in times]
    assert lo.tolist() == want_lo
    assert hi.tolist() == want_hi


@settings(max_examples=300, deadline=None)
@given(data=st.data(), window=windows())
def test_float_times_as_the_timebase_places_them(data: st.DataObject, window: tuple[Fraction, Fraction]) -> None:
    within, slide = window
    times = data.draw(float_times(within, slide))
    _check(times, Timebase(NUMERIC, within, slide), window_in_unit(within, slide, 1), False)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), window=windows())
def test_bounds_compare_with_times_as_they_are_placed(data: st.DataObject, window: tuple[Fraction, Fraction]) -> None:
    """`Timebase.start` / `end`, the bounds the general engine and CET compare
    times with and rows show, hold a time exactly in the windows it is placed
    in, also past 15 significant digits where the float nearest a bound may lie
    on the wrong side of a time."""
    within, slide = window
    tb = Timebase(NUMERIC, within, slide)
    for t in data.draw(float_times(within, slide)) + data.draw(st.lists(st.integers(-(2**50), 2**50), max_size=5)):
        first, last = tb.first_window(t), tb.last_window(t)
        for k in (first - 1, first, last, last + 1):
            assert (tb.start(k) <= t < tb.end(k)) == (first <= k <= last), (t, k)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), window=windows())
def test_int_times_as_the_timebase_places_them(data: st.DataObject, window: tuple[Fraction, Fraction]) -> None:
    within, slide = window
    near = st.integers(-50_000, 50_000)
    huge = st.integers(-MAX_TIME_S + 1, MAX_TIME_S - 1)
    times = data.draw(st.lists(st.one_of(near, near, huge), min_size=1, max_size=30))
    _check(times, Timebase(NUMERIC, within, slide), window_in_unit(within, slide, 1), True)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), window=windows())
def test_timestamps_as_the_timebase_places_them(data: st.DataObject, window: tuple[Fraction, Fraction]) -> None:
    """Microseconds: every window the columnar engine takes is whole there."""
    within, slide = window
    spec = window_in_unit(within, slide, US_PER_S)
    assert spec.den == 1
    times = data.draw(st.lists(st.integers(-(2**60), 2**60), min_size=1, max_size=30))
    _check(times, Timebase.create(TIMESTAMP, within, slide), spec, True)


@pytest.mark.parametrize(("within", "slide", "time", "first", "last"), [
    (Fraction(3, 2), Fraction(1, 2), 5.5, 9, 11),  # 5.5 starts window 11 and ends window 8
    (Fraction(3, 10), Fraction(1, 10), 0.3, 1, 3),  # 0.3 is not 3/10 in binary, but prints as it
    (Fraction(3, 10), Fraction(1, 10), 0.7, 5, 7),
    (Fraction(1, 1000), Fraction(1, 1000), 1e-3, 1, 1),
    (Fraction(300), Fraction(11, 2), 1e15, 181818181818128, 181818181818181),  # past the float arithmetic's range
    # 2**49 + 0.25 prints as 2**49 + 0.2: in [2**49 + 0.2, 2**49 + 0.3), whose end rounds to it
    (Fraction(1, 10), Fraction(1, 10), 2.0**49 + 0.25, 10 * 2**49 + 2, 10 * 2**49 + 2),
])
def test_times_on_bounds(within: Fraction, slide: Fraction, time: float, first: int, last: int) -> None:
    tb = Timebase(NUMERIC, within, slide)
    assert (tb.first_window(time), tb.last_window(time)) == (first, last)
    assert tb.start(first) <= time < tb.end(last)
    assert time < tb.start(last + 1) and tb.end(first - 1) <= time
    _check([time], tb, window_in_unit(within, slide, 1), False)
