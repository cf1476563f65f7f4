"""Windows of fractions of a second at times near 2**49 s, where a float64's
spacing is 0.125 s: the float nearest a window bound can lie on the wrong side
of an event's time, and two windows' bounds can round to the same float.

    exact windows (WITHIN 0.1 s SLIDE 0.1 s), t = 2**49 + 0.25 (prints as 2**49 + 0.2):
      [2**49 + 0.2, 2**49 + 0.3)   holds t; the float nearest either bound is t
      floats:  ... .125 (.1)  .25 (.2)  .375 (.4) ...
      the row shows [.25, .375): the first float at or after each bound

Both engines (and CET's trend totals) place events, close windows and order
rows by the exact bounds; a row shows each bound as the first float that reads
as it or more, so the events of its window are exactly those with
window_start <= time < window_end."""

from __future__ import annotations

import math
from typing import Any

import pytest
from problems_support import evaluate

from greta_stream import compile_query
from greta_stream.engine import Engine
from greta_stream.engine.columnar.stream import ColumnarStream

T = 2**49


def _event(time: int | float, h: int = 0) -> dict[str, Any]:
    return {"type": "A", "time": time, "v": 0, "h": h}


@pytest.mark.parametrize("engine", ["general", "columnar"])
def test_rows_in_window_order_when_starts_print_alike(engine: str) -> None:
    """Windows k = 10*(T+8) - 3 and - 2 start at T+7.7 and T+7.8, both shown as
    T+7.75 (prints as T+7.8): the rows follow the windows, then h."""
    text = "RETURN COUNT(*) AS n PATTERN A X+ WHERE X.v < NEXT(X).v GROUP-BY h WITHIN 0.4 s SLIDE 0.1 s"
    rows = evaluate(text, [_event(T + 8, 0), _event(T + 8, 1)], engine=engine)
    assert rows.engine == engine
    windows = [(T + 7.75, T + 8.125), (T + 7.75, T + 8.25), (T + 7.875, T + 8.375), (T + 8, T + 8.375)]
    assert [(r["window_start"], r["window_end"], r["h"]) for r in rows] == [
        (start, end, h) for start, end in windows for h in (0, 1)]


@pytest.mark.parametrize("make", [Engine, ColumnarStream])
def test_trailing_negation_window_whose_end_rounds_onto_the_event(make: Any) -> None:
    """t = T + 0.25 lies in [T + 0.2, T + 0.3), whose end rounds to t: the
    watermark t does not close that window, and it has t's trend (no F)."""
    text = "RETURN COUNT(*) PATTERN SEQ(A a+, NOT F f) WHERE a.v < NEXT(a).v WITHIN 0.1 s SLIDE 0.1 s"
    t = T + 0.25
    runner = make(compile_query(text))
    runner.expect(-math.inf)
    runner.add_many([_event(T), _event(T), _event(t)])
    assert runner.advance(t) == [{"window_start": T, "window_end": T + 0.125, "count": 2}]
    assert runner.finish() == [{"window_start": t, "window_end": T + 0.375, "count": 1}]


def test_trend_totals_of_windows_that_share_a_start() -> None:
    """CET records: [T+7.7, T+8.1) and [T+7.8, T+8.2) both start at T+7.75;
    each window's total is its own (the counter's rows are matched by both bounds)."""
    text = "RETURN TRENDS PATTERN SEQ(A a, B b+) WHERE b.v < NEXT(b).v WITHIN 0.4 s SLIDE 0.1 s"
    events = [{"type": "A", "time": T + 7.75, "v": 0}, {"type": "B", "time": T + 7.875, "v": 0},
              {"type": "B", "time": T + 8.125, "v": 1}]
    rows = evaluate(text, events, mode="cet", trends="all")
    got = [(r["window_start"], r["window_end"], r["trend"], r["total"]) for r in rows]
    assert got[1:] == [(T + 7.75, T + 8.125, [0, 1], 1), (T + 7.75, T + 8.25, [0, 1], 3),
                       (T + 7.75, T + 8.25, [0, 1, 2], 3), (T + 7.75, T + 8.25, [0, 2], 3)]
    assert "total_mismatch" not in rows.metrics
