"""The columnar engine (greta_stream.engine.columnar) against the general
engine and the brute-force oracle.

Random queries of the shapes the columnar engine covers (`columnar_support.queries`)
run over random streams (`columnar_support.streams`) with engine="columnar" and
engine="general"; rows, dead letters and the input metrics must agree exactly
(ints of the same type, floats within 1e-9). Small streams are checked against
the oracle too; shuffled input gives the same rows; window bounds, counts,
AVG and MIN/MAX have their types.

The rest of the columnar engine's tests, by concern: reading input
(test_columnar_input.py), the kernel runs (test_columnar_driver.py), what it
does not cover (test_columnar_coverage.py), SEQ patterns
(test_columnar_seq.py), micro-batches (test_columnar_stream.py), its state
(test_columnar_state.py) and the incremental stream (test_carried.py).
"""

from __future__ import annotations

import random

from columnar_support import (
    SETTINGS,
    assert_same_rows,
    cases,
    check_against_general,
    oracle_input,
    queries,
    streams,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream import compile_query
from greta_stream.query import parse
from greta_stream.testing.oracle import oracle_rows

# ------------------------------------------------------ 1. vs the general engine


@settings(max_examples=400, **SETTINGS)
@given(cases())
def test_columnar_equals_general(case: tuple[str, list[dict]]) -> None:
    check_against_general(*case)


@settings(max_examples=100, **SETTINGS)
@given(st.data())
def test_columnar_equals_general_dirty(data: st.DataObject) -> None:
    """Always a few bad events: missing/None attributes, strings for numbers, missing times."""
    spec = data.draw(queries())
    events = data.draw(streams(spec, 30, dirty=True))
    check_against_general(spec.text, events)


# ------------------------------------------------------ 2. vs the oracle


@settings(max_examples=150, **SETTINGS)
@given(cases(max_events=12))
def test_columnar_equals_oracle(case: tuple[str, list[dict]]) -> None:
    text, events = case
    expected = oracle_rows(parse(text), oracle_input(text, events))
    got = evaluate(text, events, engine="columnar")
    assert got.engine == "columnar"
    assert_same_rows(text, events, expected, got, ("oracle", "columnar"))


# ------------------------------------------------------ 3. order independence


@settings(max_examples=100, **SETTINGS)
@given(cases(), st.randoms(use_true_random=False))
def test_shuffled_input_same_rows(case: tuple[str, list[dict]], rnd: random.Random) -> None:
    text, events = case
    base = evaluate(text, events, engine="columnar")
    shuffled = list(events)
    rnd.shuffle(shuffled)
    again = evaluate(text, shuffled, engine="columnar")
    assert again.engine == "columnar"
    assert_same_rows(text, shuffled, base, again, ("columnar", "columnar shuffled"))
    assert sorted(d.reason for d in again.dead_letters) == sorted(d.reason for d in base.dead_letters)


# ------------------------------------------------------ 4. types of bounds, MIN and MAX


def test_int_window_bounds_and_min_max_types() -> None:
    text = ("RETURN COUNT(*), MIN(X.v), MAX(X.v), MIN(X.f), MAX(X.f), SUM(X.v), AVG(X.v) "
            "PATTERN A X+ WITHIN 6 s SLIDE 3 s")
    for times in ([-4, 1, 2, 7], [-4.0, 1.5, 2.25, 7.0], [-4, 1.5, 2, 7.75]):
        events = [{"type": "A", "time": t, "v": v, "f": float(v) / 2} for t, v in zip(times, [3, -1, 4, 2])]
        rows = check_against_general(text, events)
        assert [(r["window_start"], r["window_end"]) for r in rows] == [
            (-9, -3), (-6, 0), (-3, 3), (0, 6), (3, 9), (6, 12)]
        for r in rows:
            assert type(r["window_start"]) is int and type(r["window_end"]) is int
            assert type(r["min_X_v"]) is int and type(r["max_X_v"]) is int
            assert type(r["min_X_f"]) is float and type(r["max_X_f"]) is float
            assert type(r["sum_X_v"]) is int and type(r["avg_X_v"]) is float
            assert type(r["count"]) is int
        assert rows[3]["min_X_v"] == -1 and rows[3]["max_X_v"] == 4 and rows[3]["count"] == 3  # [0, 6): 2 events


@settings(max_examples=60, **SETTINGS)
@given(cases())
def test_result_types(case: tuple[str, list[dict]]) -> None:
    text, events = case
    cq = compile_query(text)
    rows = evaluate(text, events, engine="columnar")
    columns = {o.column: o.func for o in cq.outputs}
    for r in rows:
        for bound in (r["window_start"], r["window_end"]):  # an int when whole (every bound of whole-second windows)
            assert type(bound) is (float if bound % 1 else int)
        for col, func in columns.items():
            if func in ("COUNT",) or col == "count":
                assert type(r[col]) is int and r[col] > 0
            elif func == "AVG":
                assert type(r[col]) is float
