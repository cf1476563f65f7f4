"""Windows of fractions of a second at times near 2**49 s, where a float64's
spacing is 0.125 s: two windows' bounds can round to the same float, and the
float nearest a bound can lie on the wrong side of an event's time.

    exact windows (WITHIN 0.1 s SLIDE 0.1 s), t = 2**49 + 0.25 (prints as 2**49 + 0.2):
      [2**49 + 0.2, 2**49 + 0.3)   holds t; both bounds round to t itself
      floats:  ... .125 (.1)  .25 (.2)  .375 (.4) ...

Both engines place events, close windows and order rows by the exact bounds;
a row shows each bound as the float nearest it."""

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
    """Windows k = 10*(T+8) - 3 and - 2 start at T+7.7 and T+7.8, which both
    round to T+7.75: the rows follow the windows (ends .1 before .2), then h."""
    text = "RETURN COUNT(*) AS n PATTERN A X+ WHERE X.v < NEXT(X).v GROUP-BY h WITHIN 0.4 s SLIDE 0.1 s"
    rows = evaluate(text, [_event(T + 8, 0), _event(T + 8, 1)], engine=engine)
    assert rows.engine == engine
    starts = [T + 7.7, T + 7.7, T + 7.8, T + 7.8, T + 7.9, T + 7.9, T + 8, T + 8]
    ends = [T + 8.1, T + 8.1, T + 8.2, T + 8.2, T + 8.3, T + 8.3, T + 8.4, T + 8.4]
    assert [(r["window_start"], r["window_end"], r["h"]) for r in rows] == list(
        zip(starts, ends, [0, 1] * 4, strict=True))
    assert starts[0] == starts[2] and ends[2] == ends[4]  # alike as floats, distinct windows


@pytest.mark.parametrize("make", [Engine, ColumnarStream])
def test_trailing_negation_window_whose_end_rounds_onto_the_event(make: Any) -> None:
    """t = T + 0.25 lies in [T + 0.2, T + 0.3), whose end rounds to t: the
    watermark t does not close that window, and it has t's trend (no F)."""
    text = "RETURN COUNT(*) PATTERN SEQ(A a+, NOT F f) WHERE a.v < NEXT(a).v WITHIN 0.1 s SLIDE 0.1 s"
    t = T + 0.25
    runner = make(compile_query(text))
    runner.expect(-math.inf)
    runner.add_many([_event(T), _event(T), _event(t)])
    assert runner.advance(t) == [{"window_start": T, "window_end": T + 0.1, "count": 2}]
    assert runner.finish() == [{"window_start": t, "window_end": t, "count": 1}]
