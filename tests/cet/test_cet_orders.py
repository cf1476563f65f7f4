"""The order-comparison graph (orders.py, orderview.py, orderkernels.py) against the edge graph.

`ExtractionPlan.indexing = False` gives the event-to-event graph (graph.py,
windows.py), itself checked against the oracle in test_cet_differential.py.
On random streams (ties in time and in key, NaN and None, ints, floats and
bools, two attributes or one) both must report the same records in the same
order under every cap, and equal the oracle.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest
from cet_support import SETTINGS, extract, keyed, stream
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cet_ranges import edge_graph

from greta_stream.cet import CetConfig, TrendExtractor, orderview
from greta_stream.cet.graph import TrendGraph
from greta_stream.cet.orders import OrderGraph
from greta_stream.query import parse
from greta_stream.testing.oracle import complete_trends, enumerate_trends

OPS = ("<", "<=", ">", ">=")
WINDOWS = ("WITHIN 10 s", "WITHIN 10 s SLIDE 5 s", "WITHIN 6 s SLIDE 2 s")
VALUES = (1, 2, 2.0, 3, 4.5, -1, True, math.nan, None)


def rising(op: str, window: str, two: bool) -> str:
    right = "hi" if two else "lo"
    return f"RETURN TRENDS PATTERN Stock S+ WHERE S.lo {op} NEXT(S).{right} {window}"


def quotes(n: int, seed: int, values: tuple = VALUES, span: int = 20) -> list[dict]:
    rnd = random.Random(seed)
    return [{"type": "Stock", "time": rnd.randrange(span), "id": i, "lo": rnd.choice(values),
             "hi": rnd.choice(values)} for i in range(n)]


@pytest.fixture(autouse=True)
def small_slices() -> Iterator[None]:
    """Split the walk over threads even for a handful of trends."""
    old = orderview.MIN_SLICE_TRENDS
    orderview.MIN_SLICE_TRENDS = 1
    try:
        yield
    finally:
        orderview.MIN_SLICE_TRENDS = old


def graphs(text: str, events: list[dict]) -> list[object]:
    ex = TrendExtractor(text)
    ex.add_many(events)
    ex.advance(max((e["time"] for e in events), default=0))
    return [g for p in ex.partitions.values() for g in p.runs.values()]


query = st.tuples(st.sampled_from(OPS), st.sampled_from(WINDOWS), st.booleans())


@settings(max_examples=200, **SETTINGS)
@given(query, st.integers(0, 10**6), st.integers(1, 16), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 1, 3, 7]), st.sampled_from([1, 2]))
def test_same_records_as_edge_graph(q: tuple, seed: int, n: int, trends: str, cap: int | None, threads: int) -> None:
    text = rising(*q)
    events = quotes(n, seed)
    new = extract(text, events, trends=trends, max_trends=cap, threads=threads)
    with edge_graph():
        old = extract(text, events, trends=trends, max_trends=cap)
    assert new == old


@settings(max_examples=80, **SETTINGS)
@given(query, st.integers(0, 10**6), st.integers(1, 12), st.sampled_from(["all", "complete"]))
def test_equals_oracle(q: tuple, seed: int, n: int, trends: str) -> None:
    text = rising(*q)
    events = quotes(n, seed, values=(1, 2, 2.0, 3, -1, math.nan))
    got = keyed(text, extract(text, events, trends=trends))
    oracle = complete_trends if trends == "complete" else enumerate_trends
    expected = oracle(parse(text), events)
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}


@settings(max_examples=30, **SETTINGS)
@given(query, st.integers(0, 10**6), st.integers(17, 60), st.sampled_from(["all", "complete"]),
       st.sampled_from([5, 200]))
def test_longer_streams_same_records_as_edge_graph(q: tuple, seed: int, n: int, trends: str, cap: int) -> None:
    """Longer trends and many bypasses: the reduction on the graph equals the edge graph's."""
    text = rising(*q)
    events = quotes(n, seed, values=(1, 2, 3, 4, 5, 6, 2.5, 4.0, math.nan), span=15)
    new = extract(text, events, trends=trends, max_trends=cap, threads=2)
    with edge_graph():
        old = extract(text, events, trends=trends, max_trends=cap)
    assert new == old


@settings(max_examples=40, **SETTINGS)
@given(query, st.integers(0, 10**6), st.integers(20, 80), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 5, 40]))
def test_threads_do_not_change_the_records(q: tuple, seed: int, n: int, trends: str, cap: int | None) -> None:
    text = rising(*q)
    events = quotes(n, seed, values=(1, 2, 3, 4, 5, 6, 7, 8, 2.5), span=12)
    if cap is None and (trends == "all" or n > 40):
        cap = 2000  # every path of 80 rising quotes is too many to list, and their complete trends can be too
    one = extract(text, events, trends=trends, max_trends=cap)
    assert extract(text, events, trends=trends, max_trends=cap, threads=2) == one
    assert extract(text, events, trends=trends, max_trends=cap, threads=3) == one


@settings(max_examples=40, **SETTINGS)
@given(query, st.integers(0, 10**6), st.integers(1, 40), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 1, 4]))
def test_streaming_equals_batch(q: tuple, seed: int, n: int, trends: str, cap: int | None) -> None:
    """Shuffled micro-batches, watermarks, a snapshot + restore after each batch."""
    text = rising(*q)
    events = quotes(n, seed, values=(1, 2, 2.0, 3, 4.5, math.nan))
    if trends == "all" and cap is None:
        cap = 500
    options = dict(trends=trends, max_trends=cap, with_events=False)
    assert stream(text, events, seed, **options) == extract(text, events, **options)


@pytest.mark.parametrize("trends", ["all", "complete"])
def test_restored_graph_closes_windows_without_new_events(trends: str) -> None:
    text = rising("<", "WITHIN 10 s SLIDE 5 s", False)
    events = quotes(40, 3, values=(1, 2, 3, 4.5, math.nan), span=30)
    cfg = CetConfig(trends=trends, max_trends=30)
    ex = TrendExtractor(text, config=cfg)
    ex.add_many(events)
    out = ex.advance(30)  # every event processed, later windows still open
    out += TrendExtractor.restore(text, ex.snapshot(), config=cfg).finish()
    assert out == extract(text, events, trends=trends, max_trends=30, with_events=False)


def test_rising_prices_use_order_edges() -> None:
    text = rising("<", "WITHIN 10 s SLIDE 5 s", False)
    events = quotes(200, 1, values=(1, 2, 3, 4.5, math.nan), span=40)
    gs = graphs(text, events)
    assert gs and all(isinstance(g, OrderGraph) and g.fallback is None for g in gs)
    assert all(not v.pred and not v.succ for g in gs for v in g.verts)  # no edge lists
    with edge_graph():
        old = extract(text, events, max_trends=50)
    assert extract(text, events, max_trends=50) == old


@pytest.mark.parametrize("trends", ["all", "complete"])
def test_unsafe_keys_hand_the_run_to_the_edge_graph(trends: str) -> None:
    """A string price is not comparable without the full predicate: same records, same errors."""
    text = rising("<", "WITHIN 10 s SLIDE 5 s", True)
    events = quotes(30, 4, values=(1, 2, 3, 4.5)) + [{"type": "Stock", "time": 7, "id": 99, "lo": "x", "hi": 2}]
    gs = graphs(text, sorted(events, key=lambda e: e["time"]))
    assert any(isinstance(g, OrderGraph) and isinstance(g.fallback, TrendGraph) for g in gs)

    def run() -> tuple[list[dict], int]:
        ex = TrendExtractor(text, config=CetConfig(trends=trends, max_trends=20, with_events=True))
        ex.add_many(events)
        return ex.finish(), ex.metrics.get("predicate_errors", 0)

    new = run()
    with edge_graph():
        old = run()
    assert new == old and new[1] > 0


def test_other_shapes_keep_the_edge_graph() -> None:
    for text in (
        "RETURN TRENDS PATTERN Stock S+ WHERE S.lo < NEXT(S).lo AND S.hi < NEXT(S).hi WITHIN 10 s",
        "RETURN TRENDS PATTERN SEQ(Stock A, Stock S+) WHERE S.lo < NEXT(S).lo WITHIN 10 s",
        "RETURN TRENDS PATTERN SEQ(Stock S+, NOT Halt H) WHERE S.lo < NEXT(S).lo WITHIN 10 s",
        "RETURN TRENDS PATTERN Stock S+ WHERE S.lo + NEXT(S).lo < 3 WITHIN 10 s",
    ):
        gs = graphs(text, quotes(20, 2, values=(1, 2, 3)))
        assert gs and not any(isinstance(g, OrderGraph) for g in gs), text
