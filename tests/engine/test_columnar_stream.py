"""`ColumnarStream` (the columnar engine in micro-batches) against the general
`Engine` driven the same way.

Both get the same calls: per micro-batch `expect(watermark)`, the batch's
records (shuffled, any split), `advance(watermark)`; `finish()` at the end.
The rows of every call and the dead letters (bad and late events) must be
the general engine's exactly, with snapshot/restore between batches or not.
Inputs the columnar engine does not take (timestamps, ints and floats in one
SUM column, arriving mid-stream) hand the stream over to the general engine,
with no row lost or repeated.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest
from columnar_support import (
    ANY_F_MODES,
    SETTINGS,
    STOCK,
    assert_same_rows,
    batches_and_watermarks,
    check,
    columnar,
    drive,
    general,
    queries,
    stock,
    streams,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream import compile_query
from greta_stream.engine import Engine
from greta_stream.engine.columnar.columns import frame_records
from greta_stream.engine.columnar.stream import ColumnarStream


def as_frames(plan: list[tuple[list[Any], Any]]) -> tuple[list[tuple[Any, Any]], list[tuple[list[Any], Any]]]:
    """Each batch's dict records as a DataFrame (typed input), and as the
    records that frame stands for (what the general engine gets)."""
    frames = [(pd.DataFrame.from_records([r for r in records if isinstance(r, dict)]), w) for records, w in plan]
    return frames, [(frame_records(f), w) for f, w in frames]


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_dataframe_batches_equal_their_records_on_the_general_engine(data: st.DataObject) -> None:
    """Typed input (a DataFrame per micro-batch, as a Parquet source gives
    the Spark shards): NaN and None are missing values, each column keeps
    its type; rows and dead letters are the general engine's on the records
    the frames stand for, call for call. A group's numbers are compared as
    numbers: a frame column with a missing value holds floats, so one group
    comes as 0 in one batch and 0.0 in another, and which event spells a
    group's row is not part of the contract (1 and 1.0 are one group)."""
    spec = data.draw(queries())
    events = data.draw(streams(spec, max_events=40, malformed=False))
    frames, records = as_frames(batches_and_watermarks(data.draw, events))
    want_calls, want_dead = drive(general, spec.text, records, data.draw(st.booleans()))
    got_calls, got_dead = drive(columnar, spec.text, frames, data.draw(st.booleans()))

    def numbers(rows: list[dict]) -> list[dict]:
        return [{k: float(v) if k in spec.group_by and type(v) in (int, float) else v for k, v in r.items()}
                for r in rows]

    assert len(got_calls) == len(want_calls)
    for want, got in zip(want_calls, got_calls):
        assert_same_rows(spec.text, events, numbers(want), numbers(got))
    assert got_dead == want_dead


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_micro_batches_equal_general_engine(data: st.DataObject) -> None:
    spec = data.draw(queries())
    events = data.draw(streams(spec, max_events=40))
    plan = batches_and_watermarks(data.draw, events)
    check(spec.text, events, plan, restore=data.draw(st.booleans()))


@settings(max_examples=100, **SETTINGS)
@given(st.data())
def test_any_numbers_hand_over_mid_stream_without_loss(data: st.DataObject) -> None:
    """Floats of both signs, ints and floats in one column, tiny and huge
    values: what the columnar engine refuses, it hands to the general engine."""
    spec = data.draw(queries())
    events = data.draw(streams(spec, max_events=40, f_modes=ANY_F_MODES))
    check(spec.text, events, batches_and_watermarks(data.draw, events), restore=data.draw(st.booleans()))


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_long_streams_in_many_batches_equal_batch(data: st.DataObject) -> None:
    spec = data.draw(queries(max_within=6, max_slide=3))
    events = data.draw(streams(spec, max_events=150, min_events=60, time_scale=4, dirty=False))
    plan = batches_and_watermarks(data.draw, events)
    check(spec.text, events, plan, restore=False)
    # with nothing late, the stream's rows are the batch rows
    if plan[-1][1] == -math.inf or all(w == -math.inf for _, w in plan):
        calls, _ = drive(columnar, spec.text, plan, restore=False)
        def key(r: dict) -> tuple:
            return r["window_start"], repr(r)

        rows = sorted((r for c in calls for r in c), key=key)
        batch = sorted(evaluate(spec.text, events, engine="general"), key=key)
        assert_same_rows(spec.text, events, batch, rows, ("batch", "stream"))


def test_sum_of_ints_then_floats_stays_columnar_without_loss() -> None:
    """Ints, then floats in the same field (39 beside 39.5, as JSON encoders write numbers): the columnar
    stream takes the mix, with the general engine's rows."""
    events = stock(200, 1, price=int) + stock(200, 2, t0=150, price=lambda p: p + 0.5)
    plan = [(events[i:i + 50], events[min(i + 49, len(events) - 1)]["time"] - 5) for i in range(0, len(events), 50)]
    check(STOCK, events, plan, restore=True)
    s = ColumnarStream(compile_query(STOCK))
    for records, watermark in plan:
        s.expect(watermark)
        s.add_many(records)
        s.advance(watermark)
    assert s.general is None and s.metrics.get("columnar_hand_overs", 0) == 0


COUNT_STOCK = ("RETURN sector, COUNT(*) PATTERN Stock S+ "
               "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN 60 s SLIDE 20 s")


@pytest.mark.parametrize("restore", [False, True])
def test_batches_typed_apart_join_the_kept_events_or_type_again(restore: bool) -> None:
    """Each batch's typed columns join the kept events' when their types
    agree; ints then floats (prices, times) type the kept events again, as
    one batch would, and the stream stays columnar."""
    ints = stock(150, 6, price=int)
    floats = [{**e, "time": e["time"] + 0.25} for e in stock(150, 7, t0=ints[-1]["time"] - 30, price=float)]
    int_times = [{**e, "time": int(e["time"]) + 200} for e in stock(120, 8, t0=ints[-1]["time"], price=int)]
    events = ints + floats + int_times
    order = sorted(events, key=lambda e: e["time"])
    plan = [(order[i:i + 35], order[min(i + 34, len(order) - 1)]["time"] - 4) for i in range(0, len(order), 35)]
    plan += [([], order[-1]["time"] - 1), ([], order[-1]["time"] + 0.5)]  # windows close without input, then more
    check(COUNT_STOCK, events, plan, restore=restore)
    s = ColumnarStream(compile_query(COUNT_STOCK))
    for records, watermark in plan:
        s.expect(watermark)
        s.add_many(records)
        s.advance(watermark)
    assert s.general is None


def test_timestamps_stay_columnar_and_give_the_general_engines_rows() -> None:
    """Datetimes and ISO-8601 text are microseconds since the epoch, as in the
    general engine; a watermark declared in seconds before the unit is known
    is declared again in microseconds from the event after the first on, as
    `Engine.add_many(records, watermark_of)` does for the general engine."""
    def ts(x: float) -> datetime:
        return datetime.fromtimestamp(1_700_000_000 + x, tz=UTC)

    events = [{**e, "time": ts(e["time"])} for e in stock(120, 3)]
    events += [{**e, "time": ts(e["time"] + 1000).isoformat()} for e in stock(60, 5)]  # after the watermark
    s = ColumnarStream(compile_query(STOCK))
    s.add_many(events[:60])
    assert s.general is None and s.validator.time_kind == "timestamp"
    rows = s.advance(1_700_000_000_000_000 + 40_000_000)
    s.add_many(events[60:])
    rows += s.finish()
    assert s.general is None
    assert rows == list(evaluate(STOCK, events, engine="general"))

    # Spark declares its watermark before a shard's first events fix the unit: seconds, then
    # again in microseconds from the event after the first one on (`Front.add_many`)
    def watermark_of(kind: str | None) -> int:
        return 1_700_000_030_000_000 if kind == "timestamp" else 1_700_000_030

    got_dead: list = []
    late = ColumnarStream(compile_query(STOCK), dead_letter=got_dead.append)
    late.expect(watermark_of(None))
    late.add_many(events[:60], watermark_of)
    want_dead: list = []
    general = Engine(compile_query(STOCK), dead_letter=want_dead.append)
    general.expect(watermark_of(None))
    general.add_many(events[:60], watermark_of)
    assert late.general is None
    assert [(d.reason, d.record) for d in got_dead] == [(d.reason, d.record) for d in want_dead]
    assert any(d.reason == "late" for d in got_dead)
    assert late.finish() == general.finish()


def test_late_events_are_dead_lettered_like_the_general_engine() -> None:
    events = stock(100, 5)
    plan = [(events[:50], 30), (events[10:20] + events[50:], 60)]  # events[10:20] are late the second time
    check(STOCK, events, plan, restore=False)


def test_other_field_names() -> None:
    from greta_stream.engine import FieldNames

    fields = FieldNames(type="kind", time="ts", id="key")
    events = [{"kind": e["type"], "ts": e["time"], "key": i, **{k: e[k] for k in ("company", "sector", "price")}}
              for i, e in enumerate(stock(300, 7))]
    cq = compile_query(STOCK)
    want, got = Engine(cq, fields=fields), ColumnarStream(cq, fields=fields)
    rows_want, rows_got = [], []
    for i in range(0, 300, 60):
        for runner, rows in ((want, rows_want), (got, rows_got)):
            runner.expect(events[i]["ts"] - 10)
            runner.add_many(events[i:i + 60])
            rows += runner.advance(events[i]["ts"] - 10)
    rows_want += want.finish()
    rows_got += got.finish()
    assert got.general is None and rows_got == rows_want and rows_got
