"""Input handling: bad and late events, time formats, exact big numbers."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pandas as pd
import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.engine import Engine

Q = "RETURN COUNT(*), SUM(A.v) PATTERN SEQ(A+, B) WHERE A.k > 0 WITHIN 100 s"


def test_bad_events_are_skipped_with_reasons() -> None:
    events = [
        {"type": "A", "time": 1, "v": 1, "k": 1},
        {"type": "A", "time": 2, "v": 2},                      # k missing: needed by a predicate
        {"type": "A", "time": 3, "v": "x", "k": 1},            # SUM over a string
        {"type": "A", "time": 4, "v": None, "k": 1},           # null counts as missing
        {"time": 5, "v": 1},                                    # no type
        {"type": "B"},                                          # no time
        {"type": "B", "time": "yesterday"},                     # unparseable time
        {"type": "B", "time": True},                            # a bool is no time
        "not an object",
        {"type": "Z", "time": 6},                               # other type: ignored, not bad
        {"type": "B", "time": 9},
    ]
    rows = evaluate(Q, events)
    assert rows == [{"window_start": 0, "window_end": 100, "count": 1, "sum_A_v": 1}]
    reasons = [d.reason for d in rows.dead_letters]
    assert reasons == ["missing_attribute", "wrong_type", "missing_attribute", "missing_type", "missing_time",
                       "bad_time", "bad_time", "malformed"]
    assert rows.metrics["events_dead_lettered"] == 8


def test_predicate_errors_are_false_and_counted() -> None:
    rows = evaluate("RETURN COUNT(*) PATTERN A+ WHERE A.v / A.d > 1 WITHIN 10 s",
                    [{"type": "A", "time": 1, "v": 4, "d": 0}, {"type": "A", "time": 2, "v": 4, "d": 2},
                     {"type": "A", "time": 3, "v": "s", "d": 1}])
    assert rows == [{"window_start": 0, "window_end": 10, "count": 1}]
    assert rows.metrics["predicate_errors"] == 2


def test_late_events_are_dead_lettered() -> None:
    dead = []
    engine = Engine("RETURN COUNT(*) PATTERN A+ WITHIN 10 s", dead_letter=dead.append)
    engine.add({"type": "A", "time": 12})
    assert engine.advance(11) == [{"window_start": 0, "window_end": 10, "count": 0}][:0]
    engine.add({"type": "A", "time": 5})
    engine.add({"type": "A", "time": 11})
    assert engine.finish() == [{"window_start": 10, "window_end": 20, "count": 3}]
    assert [d.reason for d in dead] == ["late"]


def test_iso_timestamps_give_datetime_windows() -> None:
    events = [{"type": "A", "time": "2026-01-01T00:00:01Z"}, {"type": "A", "time": "2026-01-01T00:00:59.5+00:00"},
              {"type": "A", "time": "2026-01-01T00:01:00"}]
    rows = evaluate("RETURN COUNT(*) PATTERN A+ WITHIN 1 minute", events)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    assert rows == [
        {"window_start": t0, "window_end": t0.replace(minute=1), "count": 3},
        {"window_start": t0.replace(minute=1), "window_end": t0.replace(minute=2), "count": 1},
    ]
    assert '"window_start": "2026-01-01T00:00:00Z"' in dumps(rows[0])


def test_float_times_and_fractional_windows_are_exact() -> None:
    # 0.3 lies in [0.3, 0.6) although 0.1 * 3 != 0.3 in floating point.
    rows = evaluate("RETURN COUNT(*) PATTERN A+ WITHIN 300 ms", [{"type": "A", "time": 0.3}, {"type": "A", "time": 0.5}])
    assert rows == [{"window_start": 0.3, "window_end": 0.6, "count": 3}]


def test_dataframe_input_and_output() -> None:
    df = pd.DataFrame({"type": ["A", "A", "B"], "time": [1, 2, 3], "v": [1.5, 2.5, float("nan")]})
    rows = evaluate("RETURN COUNT(*), AVG(A.v) PATTERN SEQ(A+, B) WITHIN 10 s", df)
    assert rows == [{"window_start": 0, "window_end": 10, "count": 3, "avg_A_v": 2.0}]
    assert list(rows.to_pandas().columns) == ["window_start", "window_end", "count", "avg_A_v"]


def test_counts_are_exact_past_any_fixed_width_and_survive_json() -> None:
    n = 20_000
    events = [{"type": "A", "time": i, "v": 1.0} for i in range(n)]
    (row,) = evaluate("RETURN COUNT(*), SUM(A.v), AVG(A.v) PATTERN A+ WITHIN 1 day", events)
    assert row["count"] == 2**n - 1
    assert row["count"].bit_length() == n
    assert row["avg_A_v"] == 1.0            # SUM overflows a float; AVG stays exact
    assert row["sum_A_v"] == math.inf
    assert loads(dumps(row))["count"] == 2**n - 1


@pytest.mark.parametrize("values,expected", [([1, 2, 3], int), ([1, 2.5, 3], float)])
def test_sum_is_int_only_for_int_values(values: list, expected: type) -> None:
    events = [{"type": "A", "time": i, "v": v} for i, v in enumerate(values)]
    (row,) = evaluate("RETURN SUM(A.v), MIN(A.v) PATTERN A+ WITHIN 1 min", events)
    assert type(row["sum_A_v"]) is expected and row["min_A_v"] == 1 and type(row["min_A_v"]) is int


@pytest.mark.parametrize("text", [
    '{"a": 1}', '{"a": 1.0}', '{"a": -0.0}', '{"a": 1E5}', '{"a": 5e-324}', '{"a":1,"a":2}', '[1]', '"x"', ' 1.5 ',
    '{"a": 1e400}', '{"a": NaN}', '{"a": -Infinity}', '{"a": "\\ud800"}', '{"a": "é"}',
    '{"a": 9223372036854775807}', '{"a": -9223372036854775808}', '{"a": -9223372036854775809}',
    '{"a": 18446744073709551615}', '{"a": 18446744073709551616}', '{"a": [1, {"b": 123456789012345678901234567890}]}',
    '{"a": "' + "7" * 30 + '"}',
])
def test_loads_gives_what_the_json_module_gives(text: str) -> None:
    import json

    want = json.loads(text)
    got = loads(text)
    assert repr(got) == repr(want)


@pytest.mark.parametrize("text", ["{oops", "", "[1,", '{"a": 01}', "nul"])
def test_loads_refuses_what_the_json_module_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        loads(text)
