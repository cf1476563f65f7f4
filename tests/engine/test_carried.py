"""The incremental stream (`carried.py`: each event propagated once, trees
carried across micro-batches) against the general engine and the batch.

The same differential searches as tests/engine/test_columnar_stream.py, with
the carried aggregates on: any split, shuffled batches, stragglers, lower
declared watermarks (a rebuild), snapshot/restore (rebuilt from the kept
events), numbers the columnar engine refuses (hand-over). Then the paths
themselves: the carried state is really what answers, counts widen past their
first limbs, a stream over its budget falls back and says so.
"""

from __future__ import annotations

import math
import random
from typing import Any

from columnar_support import (
    ANY_F_MODES,
    SETTINGS,
    STOCK,
    batches_and_watermarks,
    queries,
    stock,
    streams,
)
from columnar_support import check as columnar_check
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream import compile_query
from greta_stream.engine.columnar import columnar_plan
from greta_stream.engine.columnar.carried import covered
from greta_stream.engine.columnar.stream import ColumnarStream


def incremental(cq: Any, sink: Any) -> ColumnarStream:
    return ColumnarStream(cq, dead_letter=sink, incremental=True)


def check(text: str, events: list[Any], plan: list[tuple[list[Any], Any]], restore: bool) -> None:
    columnar_check(text, events, plan, restore, make=incremental)


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_incremental_micro_batches_equal_general_engine(data: st.DataObject) -> None:
    spec = data.draw(queries())
    events = data.draw(streams(spec, max_events=40))
    check(spec.text, events, batches_and_watermarks(data.draw, events), restore=data.draw(st.booleans()))


@settings(max_examples=100, **SETTINGS)
@given(st.data())
def test_incremental_any_numbers_equal_general_engine(data: st.DataObject) -> None:
    spec = data.draw(queries())
    events = data.draw(streams(spec, max_events=40, f_modes=ANY_F_MODES))
    check(spec.text, events, batches_and_watermarks(data.draw, events), restore=data.draw(st.booleans()))


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_incremental_long_streams_equal_batch(data: st.DataObject) -> None:
    spec = data.draw(queries(max_within=6, max_slide=3))
    events = data.draw(streams(spec, max_events=150, min_events=60, time_scale=4, dirty=False))
    plan = batches_and_watermarks(data.draw, events)
    check(spec.text, events, plan, restore=False)


def run(text: str, events: list[dict], batch_s: float, **options: Any) -> tuple[list[dict], ColumnarStream]:
    """Events in time order, micro-batches of `batch_s` of event time (shuffled within), as a shard sees them."""
    stream = ColumnarStream(compile_query(text), **{"incremental": True, **options})
    rnd = random.Random(7)
    events = sorted(events, key=lambda e: e["time"])
    rows: list[dict] = []
    end, i = math.floor(events[0]["time"]), 0
    while i < len(events):
        end += batch_s
        j = i
        while j < len(events) and events[j]["time"] < end:
            j += 1
        part = events[i:j]
        rnd.shuffle(part)
        stream.expect(end - batch_s)
        stream.add_many(part)
        rows += stream.advance(end)
        i = j
    return rows + stream.finish(), stream


def key(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(r.values()) for r in rows)


def test_the_carried_aggregates_answer_and_equal_the_batch() -> None:
    events = stock(600, seed=3)
    assert covered(columnar_plan(compile_query(STOCK)))
    for batch_s in (0.5, 7, 20, 45):
        rows, stream = run(STOCK, events, batch_s)
        assert stream.carried is not None and stream.carried_bytes > 0  # the carried state, not the recompute, answered
        assert "incremental_fallbacks" not in stream.metrics
        assert key(rows) == key(evaluate(STOCK, events))


def test_counts_widen_past_their_first_limbs() -> None:
    """Every subset of the 300 events of a window is a trend: counts past 2**250, sums of these counts times 1e6."""
    text = "RETURN COUNT(*), SUM(S.price), AVG(S.price) PATTERN Stock S+ WITHIN 300 s SLIDE 100 s"
    events = [{"type": "Stock", "time": i * 1.0, "price": 1e6 + i * 0.001} for i in range(400)]
    rows, stream = run(text, events, 30)
    assert stream.carried is not None
    assert key(rows) == key(evaluate(text, events))
    assert max(r["count"] for r in rows) > 2**250


def test_equality_edges_and_no_edges_carry_over() -> None:
    for where in ("S.volume = NEXT(S).volume", "S.price <= NEXT(S).price"):
        text = (f"RETURN company, COUNT(*), MIN(S.price), SUM(S.volume) PATTERN Stock S+ WHERE [company] AND {where} "
                "GROUP-BY company WITHIN 40 s SLIDE 10 s")
        rnd = random.Random(1)
        events = [{"type": "Stock", "time": i * 0.5, "company": rnd.randrange(3), "price": rnd.randrange(5),
                   "volume": rnd.randrange(3)} for i in range(500)]
        rows, stream = run(text, events, 5)
        assert stream.carried is not None
        assert key(rows) == key(evaluate(text, events))


def test_a_stream_over_its_budget_falls_back_and_counts_it() -> None:
    events = stock(300, seed=5)
    rows, stream = run(STOCK, events, 10, carried_budget_bytes=1000)
    assert stream.carried is None and stream.metrics["incremental_fallbacks"] == 1
    assert key(rows) == key(evaluate(STOCK, events))


def test_a_finer_float_scale_rebuilds_the_carried_state() -> None:
    """A SUM's exact scale comes from its values: a later micro-batch with a
    finer float than any before relays the cells out (a rebuild, counted)."""
    events = stock(300, seed=6)
    for e in events[200:]:
        e["price"] /= 1024  # the same mantissas, ten more bits below the point
    rows, stream = run(STOCK, events, 10)
    assert stream.metrics["incremental_rebuilds"] >= 1 and stream.carried is not None
    assert key(rows) == key(evaluate(STOCK, events))
