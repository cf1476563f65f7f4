"""Deferred windows (cet/distributed.py): split by anchors, extracted in ranges, merged.

With `distribute_over`, large windows leave the extractor as deferred records;
expanding them over any number of anchor ranges must give exactly the
records of the extractor without it: the same trends in the same order, the
same totals and `truncated`, under every cap, in batch and in streaming
(snapshot + restore between micro-batches).
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator

import pytest
from cet_support import SETTINGS, cases, describe, extract, stream
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cet_ranges import KITING, kiting

from greta_stream.cet import CetConfig, TrendExtractor, distributed
from greta_stream.cet.distributed import DEFERRED, expand, split


@settings(max_examples=150, **SETTINGS)
@given(cases(windows=("tumbling", "slide_4_2", "slide_5_1")), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 1, 2, 5]), st.integers(0, 4), st.integers(1, 7))
def test_expanded_records_equal_the_extractor(case: tuple[str, list[dict]], trends: str, cap: int | None,
                                              over: int, ranges: int) -> None:
    text, events = case
    want = extract(text, events, trends=trends, max_trends=cap)
    deferred = extract(text, events, trends=trends, max_trends=cap, distribute_over=over)
    got = expand(pickle.loads(pickle.dumps(deferred)), ranges)  # as they travel: pickled
    assert got == want, describe(text, events, want, got)


@contextlib.contextmanager
def pieces_wanted(n: int) -> Iterator[None]:
    old, distributed.PIECES = distributed.PIECES, n
    try:
        yield
    finally:
        distributed.PIECES = old


@settings(max_examples=60, **SETTINGS)
@given(st.integers(0, 10**6), st.integers(1, 150), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 1, 7, 40]), st.integers(1, 9), st.sampled_from([1, 2, 5, 64]))
def test_kiting_split_in_any_ranges_equals_sequential(seed: int, n: int, trends: str, cap: int | None,
                                                      ranges: int, wanted: int) -> None:
    events = kiting(n, seed, list(range(6)))
    want = extract(KITING, events, trends=trends, max_trends=cap)
    with pieces_wanted(wanted):
        deferred = extract(KITING, events, trends=trends, max_trends=cap, distribute_over=0)
    assert all(DEFERRED in r for r in deferred)  # one range graph run per window: every one deferred
    assert expand(deferred, ranges) == want


@settings(max_examples=60, **SETTINGS)
@given(cases(windows=("tumbling", "slide_4_2")), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 1, 3]), st.sampled_from([1, 3, 8]), st.integers(1, 5))
def test_pieces_cut_deep_give_the_same_records(case: tuple[str, list[dict]], trends: str, cap: int | None,
                                               wanted: int, ranges: int) -> None:
    text, events = case
    want = extract(text, events, trends=trends, max_trends=cap)
    with pieces_wanted(wanted):
        got = expand(extract(text, events, trends=trends, max_trends=cap, distribute_over=0), ranges)
    assert got == want, describe(text, events, want, got)


def test_a_cap_that_one_anchor_fills_is_still_cut_into_pieces() -> None:
    events = [{"type": "Check", "time": t, "id": t, "src": 0, "dest": 0} for t in range(18)]  # 2^k - 1 trends
    deferred = extract(KITING, events, trends="all", max_trends=50, distribute_over=0)
    d = max((r[DEFERRED] for r in deferred), key=lambda d: d.total)
    assert d.take == 50 and d.total == 2**18 - 1 and len(d.pieces) >= 8 and len({p[0][0] for p in d.pieces}) == 1  # one anchor, many pieces
    assert expand(deferred, 4) == extract(KITING, events, trends="all", max_trends=50)


@settings(max_examples=40, **SETTINGS)
@given(st.integers(0, 10**6), st.integers(1, 80), st.sampled_from(["all", "complete"]),
       st.sampled_from([None, 1, 4]), st.integers(1, 4))
def test_streaming_with_deferred_windows_equals_batch(seed: int, n: int, trends: str, cap: int | None,
                                                      ranges: int) -> None:
    events = kiting(n, seed, list(range(5)))
    want = extract(KITING, events, trends=trends, max_trends=cap)
    got = stream(KITING, events, seed, trends=trends, max_trends=cap, distribute_over=3)
    assert expand(got, ranges) == want


@given(st.lists(st.integers(1, 30), min_size=1, max_size=40), st.integers(1, 400), st.integers(1, 12))
def test_split_gives_each_range_its_exact_share(counts: list[int], take: int, n: int) -> None:
    ranges = split(counts, take, n)
    assert 1 <= len(ranges) <= n
    assert ranges[0][0] == 0 and all(b == a2 for (_, b, _), (a2, _, _) in zip(ranges, ranges[1:], strict=False))
    assert sum(s for _, _, s in ranges) == min(take, sum(counts))
    for a, b, share in ranges[:-1]:
        assert share == sum(counts[a:b])  # all of its anchors' trends: the next range starts after them
    a, b, share = ranges[-1]
    assert 0 < share <= sum(counts[a:b]) and (b == len(counts) or sum(counts[:b - 1]) < take)


def test_distribute_over_is_validated() -> None:
    for bad in (-1, True, 1.5, "3"):
        with pytest.raises(ValueError, match="distribute_over"):
            CetConfig(distribute_over=bad)  # type: ignore[arg-type]


def test_deferred_window_keeps_totals_without_enumerating() -> None:
    events = kiting(120, 3, list(range(4)))
    ex = TrendExtractor(KITING, config=CetConfig(max_trends=5, distribute_over=0))
    ex.add_many(events)
    rows = ex.finish()
    assert ex.metrics["windows_deferred"] >= 1
    want = extract(KITING, events, max_trends=5, with_events=False)
    for r in rows:
        d = r[DEFERRED]
        assert d.take <= 5 and d.total >= sum(d.counts) >= d.take and d.truncated == (d.take < d.total)
    assert expand(rows) == want
