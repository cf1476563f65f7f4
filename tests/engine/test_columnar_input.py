"""What the columnar engine reads, and how: the general engine's rows and dead
letters, or a refusal.

Inputs the columnar engine may refuse (floats of both signs, int/float
columns, tiny or huge numbers) must be answered right or refused
(ValueError; "auto" then runs the general engine). Group values spelled
several ways, non-finite aggregated values (dead letters), timestamps (ISO
text, datetimes, the vectorized ISO reader), times of both kinds, DataFrame
input (NaN is missing), one-shot iterators and other field names, strings in
local predicates.

Regression tests pin what these searches found: int64 values past 2**53
(edge predicates, MIN/MAX) are refused, not rounded; an int group value next
to floats stays an int; non-finite aggregated values are dead-lettered.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pandas as pd
import pytest
from columnar_support import (
    ANY_F_MODES,
    HUGE_INT64,
    HUGE_OUTSIDE_INT64,
    SETTINGS,
    assert_same_rows,
    check_against_general,
    describe,
    queries,
    run_both,
    same_value,
    streams,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream import compile_query

# ------------------------------------------------------ numbers: right or refused


def check_or_refused(text: str, events: list[dict]) -> None:
    """The columnar engine may refuse an input (ValueError, and "auto" runs the
    general engine), but when it answers, it answers like the general engine."""
    try:
        evaluate(text, events, engine="columnar")
    except ValueError as exc:
        assert "columnar engine cannot take this input" in str(exc), exc
        auto = evaluate(text, events)
        assert auto.engine == "general"
        assert_same_rows(text, events, evaluate(text, events, engine="general"), auto, ("general", "auto"))
        return
    check_against_general(text, events)


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_columnar_equals_general_or_refuses_any_floats(data: st.DataObject) -> None:
    """Float attributes of both signs, ints and floats mixed in one column,
    tiny/subnormal/huge floats, ints past 2**31 / 2**53 / 2**64: right or
    refused, never wrong."""
    spec = data.draw(queries())
    events = data.draw(streams(spec, 30, f_modes=ANY_F_MODES, huge_ints=HUGE_OUTSIDE_INT64))
    check_or_refused(spec.text, events)


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_numbers_as_json_encoders_write_them_run_columnar(data: st.DataObject) -> None:
    """39 beside 39.02 in one field (a whole value written as an int): the columnar engine takes it for
    every aggregate, with the general engine's rows (SUM of ints alone an int, MIN/MAX the input value)."""
    spec = data.draw(queries())
    events = data.draw(streams(spec, 30, f_modes=("json",), dirty=False))
    try:
        evaluate(spec.text, events, engine="columnar")
    except ValueError as exc:
        assert "ints beside" not in str(exc) and "mix" not in str(exc), exc
    check_or_refused(spec.text, events)


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_ints_beside_whole_floats_answer_alike(engine: str) -> None:
    """2 beside 2.0 and 2.5: which value was an int no longer shows in float64, so the columnar engine
    hands SUM/MIN/MAX over such a field to the general engine ("auto"), and says why when forced."""
    text = "RETURN COUNT(*), SUM(X.f), MIN(X.f) PATTERN A X+ WITHIN 10 s"
    events = [{"type": "A", "time": 1, "f": 2}, {"type": "A", "time": 2, "f": 2.0}, {"type": "A", "time": 3, "f": 2.5}]
    if engine == "columnar":
        with pytest.raises(ValueError, match="ints beside whole floats such as 2.0"):
            evaluate(text, events, engine="columnar")
    check_or_refused(text, events)


@settings(max_examples=100, **SETTINGS)
@given(st.data())
@example(data=None)  # the minimal case below, always run first
def test_int64_values_past_2_53_right_or_refused(data: st.DataObject | None) -> None:
    if data is None:
        text = "RETURN COUNT(*) PATTERN A X+ WHERE X.v < NEXT(X).v WITHIN 10 s"
        check_or_refused(text, [{"type": "A", "time": 0, "v": 2**53}, {"type": "A", "time": 1, "v": 2**53 + 1}])
        return
    spec = data.draw(queries())
    events = data.draw(streams(spec, 30, huge_ints=HUGE_INT64))
    check_or_refused(spec.text, events)


INT64_CASES = [
    # 2**53 < 2**53 + 1: count 3 (float64 would see them equal: 2)
    ("RETURN COUNT(*) PATTERN A X+ WHERE X.v < NEXT(X).v WITHIN 10 s", [2**53, 2**53 + 1]),
    ("RETURN COUNT(*) PATTERN A X+ WHERE X.v < NEXT(X).v WITHIN 10 s", [2**62, 2**62 + 1]),
    # not equal: count 2
    ("RETURN COUNT(*) PATTERN A X+ WHERE X.v = NEXT(X).v WITHIN 10 s", [2**53, 2**53 + 1]),
    # MIN/MAX return the input value exactly
    ("RETURN COUNT(*), MIN(X.v) PATTERN A X+ WITHIN 10 s", [2**53 + 1]),
    ("RETURN COUNT(*), MAX(X.v) PATTERN A X+ WITHIN 10 s", [-(2**53) - 1]),
]


@pytest.mark.parametrize(("text", "values"), INT64_CASES)
def test_int64_past_2_53_minimal(text: str, values: list[int]) -> None:
    """Values past 2**53: the columnar engine refuses them (auto = general)."""
    events = [{"type": "A", "time": i, "v": v} for i, v in enumerate(values)]
    check_or_refused(text, events)


def test_sum_over_int_and_float_column_keeps_int_windows_int() -> None:
    """A window whose values are all ints sums to an int even when the column
    holds floats elsewhere (the general engine's and the contract's rule)."""
    text = "RETURN COUNT(*), SUM(X.f), AVG(X.f), MIN(X.f), MAX(X.f) PATTERN A X+ WITHIN 5 s"
    events = [{"type": "A", "time": 1, "f": 2.5}, {"type": "A", "time": 6, "f": 2}, {"type": "A", "time": 7, "f": 3}]
    general = evaluate(text, events, engine="general")
    assert general[1]["sum_X_f"] == 10 and type(general[1]["sum_X_f"]) is int
    check_or_refused(text, events)
    check_or_refused(text.replace(", MIN(X.f), MAX(X.f)", ""), events)


# ------------------------------------------------------ group values


def _same_group(expected: Any, got: Any) -> bool:
    """Group values by value (1, 1.0 and True are one group); which spelling a
    row shows when a group's events mix them is not part of the contract."""
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(got, numbers):
        return expected == got
    return type(got) is type(expected) and got == expected


@settings(max_examples=80, **SETTINGS)
@given(st.data())
def test_group_values_of_every_spelling(data: st.DataObject) -> None:
    """Group values 0, 1, 1.0, True, False, 0.0, -0.0, 2.5, "1", "p": the same
    groups and rows, group values compared by value."""
    spec = data.draw(queries())
    events = data.draw(streams(spec, 30, g_kinds=("spellings",)))
    general, columnar = run_both(spec.text, events)
    groups = set(compile_query(spec.text).group_columns)
    msg = describe(spec.text, events, list(general), list(columnar), ("general", "columnar"))
    assert len(columnar) == len(general), msg
    for want, have in zip(general, columnar):
        assert list(have) == list(want), msg
        assert all(_same_group(want[k], have[k]) if k in groups else same_value(want[k], have[k]) for k in want), msg


def test_int_group_value_keeps_its_type_next_to_floats() -> None:
    text = "RETURN g, COUNT(*) PATTERN A X+ GROUP-BY g WITHIN 10 s"
    events = [{"type": "A", "time": 0, "g": 1}, {"type": "A", "time": 1, "g": 2.5}]
    general = evaluate(text, events, engine="general")
    assert list(general) == [{"window_start": 0, "window_end": 10, "g": 1, "count": 1},
                             {"window_start": 0, "window_end": 10, "g": 2.5, "count": 1}]
    check_against_general(text, events)


# ------------------------------------------------------ non-finite values


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_aggregated_values_are_dead_lettered(bad: float) -> None:
    """SUM over inf or NaN has no exact value: both engines dead-letter the
    event (wrong_type) and aggregate the rest."""
    text = "RETURN COUNT(*), SUM(X.f), AVG(X.f), MIN(X.f) PATTERN A X+ WITHIN 10 s"
    events = [{"type": "A", "time": 0, "f": 1.0}, {"type": "A", "time": 1, "f": bad}, {"type": "A", "time": 2, "f": 2.0}]
    for engine in ("general", "columnar"):
        rows = evaluate(text, events, engine=engine)
        assert rows.engine == engine
        assert list(rows) == [{"window_start": 0, "window_end": 10, "count": 3, "sum_X_f": 6.0, "avg_X_f": 1.5,
                               "min_X_f": 1.0}]
        assert [(d.reason, d.record["time"]) for d in rows.dead_letters] == [("wrong_type", 1)]


# ------------------------------------------------------ timestamps and DataFrames


def _records_from_frame(df: pd.DataFrame) -> list[dict]:
    """The frame as dicts, NaN / None meaning a missing attribute."""
    return [{k: v for k, v in rec.items() if v is not None and not (isinstance(v, float) and math.isnan(v))}
            for rec in df.to_dict("records")]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _timestamp_of(draw: Any, t: Any) -> Any:
    """A numeric time as a timestamp in one of the spellings the engines read:
    ISO-8601 text with Z, +00:00, another offset, no offset (UTC) or a space,
    or a datetime; now and then text that is no time at all."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        return t
    if abs(t) > 4e9:  # past the years datetimes hold: keep the time of day
        t = math.fmod(t, 4e9)
    at = _EPOCH + timedelta(microseconds=round(t * 1_000_000))
    spelling = draw(st.sampled_from(["Z", "+00:00", "+05:30", "naive", "space", "datetime", "datetime", "bad"]))
    if spelling == "datetime":
        return at
    if spelling == "bad":
        return draw(st.sampled_from(["yesterday", "2024-02-30T00:00:00Z", ""]))
    if spelling == "+05:30":
        return at.astimezone(timezone(timedelta(hours=5, minutes=30))).isoformat()
    if spelling == "naive":
        return at.replace(tzinfo=None).isoformat()
    if spelling == "space":
        return at.isoformat(sep=" ")
    return at.isoformat().replace("+00:00", spelling)


@settings(max_examples=120, **SETTINGS)
@given(st.data())
def test_timestamps_equal_general(data: st.DataObject) -> None:
    """Times as ISO-8601 text or datetimes (microseconds since the epoch, UTC
    when no offset is given): the columnar engine gives the general engine's
    rows (window bounds as UTC datetimes) and dead letters (bad_time)."""
    spec = data.draw(queries())
    events = data.draw(streams(spec, 40))
    events = [dict(e, time=_timestamp_of(data.draw, e["time"])) if isinstance(e, dict) and "time" in e else e
              for e in events]
    check_against_general(spec.text, events)


def test_timestamp_frames_equal_records() -> None:
    """A DataFrame's datetime64 column (naive: UTC, or with a zone) and NaT."""
    rng = random.Random(3)
    text = "RETURN g, COUNT(*), SUM(X.v) PATTERN A X+ WHERE [p] AND X.v < NEXT(X).v GROUP-BY g WITHIN 10 s SLIDE 5 s"
    base = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
    events = [{"type": "A", "time": base + timedelta(milliseconds=rng.randint(0, 60_000)), "p": rng.randrange(3),
               "g": rng.randrange(2), "v": rng.randint(-5, 5)} for _ in range(3000)]
    for zone in (UTC, None):
        df = pd.DataFrame(events)
        df["time"] = pd.to_datetime(df["time"], utc=True)
        if zone is None:
            df["time"] = df["time"].dt.tz_localize(None)
        df.loc[7, "time"] = pd.NaT
        general = evaluate(text, df, engine="general")
        columnar = evaluate(text, df, engine="columnar")
        assert columnar.engine == "columnar"
        assert_same_rows(text, events, general, columnar)
        assert [d.reason for d in columnar.dead_letters] == [d.reason for d in general.dead_letters] == ["missing_time"]


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_dataframe_equals_records(data: st.DataObject) -> None:
    spec = data.draw(queries())
    events = data.draw(streams(spec, 30, malformed=False))
    # missing values become NaN (ints next to them floats); a string makes an object column
    df = pd.DataFrame(events, columns=["type", "time", "v", "f", "g", "h", "k"]
                      + (["id"] if any("id" in e for e in events) else []))
    records = _records_from_frame(df)
    from_frame = evaluate(spec.text, df, engine="columnar")
    from_records = evaluate(spec.text, records, engine="columnar")
    assert from_frame.engine == from_records.engine == "columnar"
    assert_same_rows(spec.text, records, from_records, from_frame, ("records", "DataFrame"))
    assert [d.reason for d in from_frame.dead_letters] == [d.reason for d in from_records.dead_letters]
    general = evaluate(spec.text, df, engine="general")
    assert_same_rows(spec.text, records, general, from_frame, ("general on DataFrame", "columnar on DataFrame"))
    assert [(d.reason, d.record) for d in from_frame.dead_letters] == [(d.reason, d.record) for d in general.dead_letters]


def test_dataframe_nan_is_missing() -> None:
    text = "RETURN g, COUNT(*), SUM(X.v), MIN(X.f) PATTERN A X+ WHERE X.v < NEXT(X).v GROUP-BY g WITHIN 10 s"
    events = [
        {"type": "A", "time": 1, "v": 1, "f": 0.5, "g": "p"},
        {"type": "A", "time": 2, "v": 2, "f": 1.5, "g": "p"},
        {"type": "A", "time": 3, "f": 2.5, "g": "p"},  # no v: bad
        {"type": "A", "time": 4, "v": 3, "g": "p"},  # no f: bad
        {"type": "A", "time": 5, "v": 4, "f": 0.25},  # no g: bad
        {"type": "A", "v": 5, "f": 0.25, "g": "p"},  # no time: bad
        {"type": "B", "time": 6, "v": 9, "f": 0.25, "g": "p"},
        {"type": "A", "time": 7, "v": 6, "f": 3.5, "g": "q"},
    ]
    df = pd.DataFrame(events)
    got = evaluate(text, df, engine="columnar")
    assert got.engine == "columnar"
    # v has NaN in the frame, so it is a float column there
    assert list(got) == [
        {"window_start": 0, "window_end": 10, "g": "p", "count": 3, "sum_X_v": 6.0, "min_X_f": 0.5},
        {"window_start": 0, "window_end": 10, "g": "q", "count": 1, "sum_X_v": 6.0, "min_X_f": 3.5},
    ]
    assert [d.reason for d in got.dead_letters] == ["missing_attribute"] * 3 + ["missing_time"]
    assert got.metrics["events_dead_lettered"] == 4
    assert_same_rows(text, events, evaluate(text, df, engine="general"), got)
    assert_same_rows(text, events, evaluate(text, _records_from_frame(df), engine="columnar"), got)


# ------------------------------------------------------ times of both kinds


@pytest.mark.parametrize("times", [
    ["2024-01-01T00:00:01Z", 3, "2024-01-01T00:00:02Z", "4", "2024-01-01T00:00:04Z"],
    [3, "2024-01-01T00:00:01Z", "4", 5.5, "nan", "1" + "0" * 400, 10**400, 2**50, 1e300],
])
def test_times_of_both_kinds_are_read_one_by_one(times: list) -> None:
    """Times of both kinds in one column: the first good one fixes the
    stream's kind and the others are bad times, as the general engine reads
    them (and out-of-range numbers are bad times, never an overflow)."""
    text = "RETURN COUNT(*) PATTERN A X+ WITHIN 10 s"
    events = [{"type": "A", "time": t} for t in times]
    col, gen = evaluate(text, events, engine="columnar"), evaluate(text, events, engine="general")
    assert col.engine == "columnar"
    assert list(col) == list(gen) and list(col)
    assert [(d.reason, d.detail) for d in col.dead_letters] == [(d.reason, d.detail) for d in gen.dead_letters]
    assert len(col.dead_letters) == len(times) - col.metrics["events_processed"] > 0


# ------------------------------------------------------ input forms


def test_generator_input_and_field_names() -> None:
    """Records from a one-shot iterator, custom type/time/id fields; a refused
    input under "auto" still reaches the general engine whole."""
    text = "RETURN COUNT(*), SUM(X.v) PATTERN A X+ WHERE X.w < NEXT(X).w WITHIN 10 s SLIDE 5 s"
    events = [{"kind": "A" if i % 4 else "B", "ts": i * 0.75, "v": i, "w": (i * 7) % 5, "key": f"k{i}"}
              for i in range(24)]
    names = dict(type_field="kind", time_field="ts", id_field="key")
    general = evaluate(text, events, engine="general", **names)
    columnar = evaluate(text, iter(events), engine="columnar", **names)
    assert columnar.engine == "columnar" and len(general) > 0
    assert_same_rows(text, events, general, columnar)
    refused = [*events, {"kind": "A", "ts": 3.1, "v": 1, "w": "x"}]  # a predicate error: general only
    auto = evaluate(text, (e for e in refused), **names)
    assert auto.engine == "general"
    assert_same_rows(text, refused, evaluate(text, refused, engine="general", **names), auto)


# ------------------------------------------------------ local predicates over strings


def test_local_predicates_compare_strings_like_python() -> None:
    """`X.s = 'x'` compares element by element with Python's == (an int is
    never equal to a string); an order comparison of a string with a value
    that is not one is a predicate error in the general engine, so the
    columnar engine refuses it and auto gives the general engine's rows."""
    rng = random.Random(11)
    events = [{"type": "A", "time": rng.randint(0, 40), "s": rng.choice(["x", "y", "xy", 1, 2.5]),
               "v": rng.randint(-3, 3)} for _ in range(300)]
    strings = [dict(e, s=str(e["s"])) for e in events]
    for text in ("RETURN COUNT(*), SUM(X.v) PATTERN A X+ WHERE X.s = 'x' AND X.v < NEXT(X).v WITHIN 10 s",
                 "RETURN COUNT(*) PATTERN A X+ WHERE 'y' != X.s OR X.v = 0 WITHIN 10 s SLIDE 5 s"):
        check_against_general(text, events)
    text = "RETURN COUNT(*) PATTERN A X+ WHERE X.s < 'y' WITHIN 10 s"
    check_against_general(text, strings)
    with pytest.raises(ValueError, match="columnar"):
        evaluate(text, events, engine="columnar")
    assert list(evaluate(text, events)) == list(evaluate(text, events, engine="general"))


# ------------------------------------------------------ times as text and past floats


@settings(max_examples=300, **SETTINGS)
@given(st.lists(st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(
        lambda d: d.isoformat(timespec=["seconds", "milliseconds", "microseconds"][d.microsecond % 3])),
    st.tuples(st.integers(1, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25), st.integers(0, 61),
              st.integers(0, 61), st.sampled_from(["", ".5", ".123456", ".1234567", "Z", "+00:00", "+01:00", "z"])
              ).map(lambda p: "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}{}".format(*p)),
    st.text(max_size=12),
), min_size=1, max_size=20))
def test_vectorized_iso_text_reads_as_parse_time(texts: list[str]) -> None:
    """The Arrow fast path for ISO-8601 text in UTC gives parse_time's
    microseconds wherever it says ok, and leaves every other text (offsets,
    February 30, second 60, seven decimals, no time at all) to parse_time."""
    import numpy as np

    from greta_stream.engine.columnar.times import _iso_utc
    from greta_stream.engine.timebase import TimeError, parse_time

    us, ok = _iso_utc(np.array(texts, dtype=object))
    for text, value, fast in zip(texts, us.tolist(), ok.tolist()):
        if fast:
            assert parse_time(text) == ("timestamp", value), text
    canonical = ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.5+00:00", "1969-12-31T23:59:59.999999", "2024-02-29T00:00:00Z"]
    us, ok = _iso_utc(np.array(canonical, dtype=object))
    assert ok.all() and us.tolist() == [parse_time(t)[1] for t in canonical]
    _, ok = _iso_utc(np.array(["2023-02-29T00:00:00Z", "2024-01-01T00:00:60Z", "2024-01-01T00:00:00+01:00"], dtype=object))
    assert not ok.any()
    with pytest.raises(TimeError):
        parse_time("2023-02-29T00:00:00Z")


@pytest.mark.parametrize("poison", [10**400, -(10**30), 2**53 + 1])
def test_an_integer_time_past_floats_gives_the_general_engines_rows(poison: int) -> None:
    """An int time float() cannot hold (or hold exactly) among thousands of events: no OverflowError,
    the rows and dead letters the general engine gives."""
    text = "RETURN COUNT(*) PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price WITHIN 50 s SLIDE 10 s"
    events = [{"type": "Stock", "time": i, "company": i % 3, "price": (i * 7) % 11} for i in range(2500)]
    events.insert(1200, {"type": "Stock", "time": poison, "company": 1, "price": 3})
    got = evaluate(text, events)  # auto: the columnar engine from 2,000 events on, handing over
    want = evaluate(text, events, engine="general")
    assert list(got) == list(want)
    assert [d.reason for d in got.dead_letters] == [d.reason for d in want.dead_letters]


@pytest.mark.parametrize("predicate", ["X.flag = true", "X.flag != false", "true = X.flag", "X.weather = 'rain'"])
def test_booleans_and_strings_read_by_equality_run_columnar(predicate: str) -> None:
    """A boolean or string field read only by equality (as a real record's `cancelled: true` or
    `weather: "rain"`): columnar, with the general engine's rows (1 = true holds, as in Python)."""
    events = [{"type": "A", "time": i, "flag": [True, False, 1, 0, "x", None][i % 6],
               "weather": ["rain", "sun", 3][i % 3], "f": i % 5 + 0.5} for i in range(60)]
    check_against_general(f"RETURN COUNT(*), MAX(X.f) PATTERN A X+ WHERE {predicate} AND X.f > NEXT(X).f "
                          "WITHIN 10 s", events)
