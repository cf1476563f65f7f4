"""The range-edge graph (ranges.py, rangeview.py, reduction.py) against the edge graph.

`ExtractionPlan.indexing = False` gives the earlier event-to-event graph (graph.py,
windows.py), itself checked against the oracle in test_cet_differential.py.
On random queries and streams both must report the same records in the same
order, under every cap; the cap keeps a prefix of the uncapped order and the
totals stay exact.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Iterator

import pytest
from cet_support import SETTINGS, cases, describe, extract, keyed, stream
from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream.cet import CetConfig, TrendExtractor, reduction
from greta_stream.cet.plan import ExtractionPlan
from greta_stream.cet.ranges import RangeGraph
from greta_stream.query import parse
from greta_stream.testing.oracle import complete_trends, enumerate_trends

KITING = "RETURN TRENDS PATTERN Check C+ WHERE C.src = NEXT(C).dest WITHIN 20 s SLIDE 5 s"


@contextlib.contextmanager
def edge_graph() -> Iterator[None]:
    old = ExtractionPlan.indexing
    ExtractionPlan.indexing = False
    try:
        yield
    finally:
        ExtractionPlan.indexing = old


def both(text: str, events: list[dict], **options: object) -> tuple[list[dict], list[dict]]:
    new = extract(text, events, **options)
    with edge_graph():
        old = extract(text, events, **options)
    return new, old


def kiting(n: int, seed: int, accounts: list) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        src, dest = rnd.sample(accounts, 2)
        out.append({"type": "Check", "time": rnd.randrange(40), "id": i, "src": src, "dest": dest})
    return out


@settings(max_examples=150, **SETTINGS)
@given(cases(windows=("tumbling", "slide_4_2", "slide_5_1")), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 1, 3]))
def test_same_records_as_edge_graph(case: tuple[str, list[dict]], trends: str, cap: int | None) -> None:
    text, events = case
    new, old = both(text, events, trends=trends, max_trends=cap)
    assert new == old, describe(text, events, old, new)


@settings(max_examples=60, **SETTINGS)
@given(st.integers(0, 10**6), st.integers(1, 60), st.sampled_from(["all", "complete"]))
def test_kiting_equals_oracle_and_edge_graph(seed: int, n: int, trends: str) -> None:
    """Equality edges with mixed key types (2 and "2" differ; NaN equals nothing)."""
    events = kiting(n, seed, [0, 1, 2, "2", math.nan])
    new, old = both(KITING, events, trends=trends)
    assert new == old
    oracle = complete_trends if trends == "complete" else enumerate_trends
    expected = oracle(parse(KITING), events)
    got = keyed(KITING, new)
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}


@settings(max_examples=60, **SETTINGS)
@given(st.integers(0, 10**6), st.integers(1, 80), st.sampled_from(["all", "complete"]), st.integers(1, 20))
def test_cap_keeps_a_prefix_and_the_exact_total(seed: int, n: int, trends: str, cap: int) -> None:
    events = kiting(n, seed, [0, 1, 2, 3])
    full = extract(KITING, events, trends=trends)
    capped = extract(KITING, events, trends=trends, max_trends=cap)
    windows: dict[float, list[dict]] = {}
    for r in full:
        windows.setdefault(r["window_start"], []).append(r)
    want = []
    for rows in windows.values():
        total = len(rows)
        assert all(r["total"] == total and not r["truncated"] for r in rows)
        want += [dict(r, truncated=total > cap) for r in rows[:cap]]
    assert capped == want


def test_kiting_uses_range_edges_and_streams_like_batch() -> None:
    events = kiting(300, 7, list(range(12)))
    ex = TrendExtractor(KITING, config=CetConfig(max_trends=50))
    ex.add_many(events[:150])
    ex.advance(10)
    graphs = [g for p in ex.partitions.values() for g in p.runs.values()]
    assert graphs and all(isinstance(g, RangeGraph) for g in graphs)
    assert all(not v.pred and not v.succ for g in graphs for v in g.verts)  # no edge lists
    with edge_graph():
        old = extract(KITING, events, max_trends=50)
    assert extract(KITING, events, max_trends=50) == old


@pytest.mark.parametrize("trends", ["all", "complete"])
def test_snapshot_restores_range_graph(trends: str) -> None:
    events = sorted(kiting(200, 3, list(range(6))), key=lambda e: e["time"])
    cfg = CetConfig(trends=trends, max_trends=20)
    ex = TrendExtractor(KITING, config=cfg)
    ex.add_many(events[:100])
    out = ex.advance(events[100]["time"])
    ex = TrendExtractor.restore(KITING, ex.snapshot(), config=cfg)
    ex.add_many(events[100:])
    out += ex.finish()
    assert out == extract(KITING, events, trends=trends, max_trends=20, with_events=False)


@settings(max_examples=30, **SETTINGS)
@given(st.integers(0, 10**6), st.integers(1, 120), st.integers(2, 5))
def test_threads_do_not_change_the_records(seed: int, n: int, threads: int) -> None:
    events = kiting(n, seed, [0, 1, 2, 3, 4])
    one = extract(KITING, events, trends="complete")
    old = reduction.MIN_SLICE
    reduction.MIN_SLICE = 1  # split even tiny windows
    try:
        many = extract(KITING, events, trends="complete", threads=threads)
    finally:
        reduction.MIN_SLICE = old
    assert many == one


def test_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="threads"):
        CetConfig(threads=0)


@settings(max_examples=40, **SETTINGS)
@given(st.integers(0, 10**6), st.integers(1, 80), st.sampled_from(["all", "complete"]), st.sampled_from([None, 1, 4]))
def test_kiting_streaming_equals_batch(seed: int, n: int, trends: str, cap: int | None) -> None:
    """Shuffled micro-batches, watermarks, a snapshot + restore after each batch
    (without the events: a NaN restored from a snapshot is another object, unequal)."""
    events = kiting(n, seed, [0, 1, 2, "2", math.nan])
    options = dict(trends=trends, max_trends=cap, with_events=False)
    assert stream(KITING, events, seed, **options) == extract(KITING, events, **options)
