"""The columnar engine's kernel runs (driver.py, blocks.py, kernel.py, rows.py):
exact big counts, blocks of windows, threads.

Counts past 64 bits (the limb overflow and restart path) in one partition,
in a later one, in sliding windows and on every edge predicate kind; long
streams over many windows (several blocks per partition); a block's tree past
its memory bound run again in smaller blocks; partitions split across
threads; limbs of any width read back as exact ints. Rows are the general
engine's throughout.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from columnar_support import SETTINGS, check_against_general, queries, streams
from hypothesis import given, settings
from hypothesis import strategies as st

# ------------------------------------------------------ big counts


def _monotone(n: int, t0: int = 0, **attrs: Any) -> list[dict]:
    """n events at times t0.., v strictly decreasing."""
    return [{"type": "A", "time": t0 + i, "v": n - i, "f": 0.5 * (i % 3), **attrs} for i in range(n)]


BIG_AGGS = "COUNT(*), COUNT(X), SUM(X.v), AVG(X.v), SUM(X.f), AVG(X.f), MIN(X.v), MAX(X.f)"


def test_big_count_exact() -> None:
    n = 300
    events = _monotone(n)
    text = f"RETURN {BIG_AGGS} PATTERN A X+ WHERE X.v > NEXT(X).v WITHIN 300 s"
    rows = check_against_general(text, events)
    assert len(rows) == 1
    row = rows[0]
    assert row["count"] == 2**n - 1 and type(row["count"]) is int
    assert row["count_X"] == n * 2 ** (n - 1)  # each event is in half of the 2**n subsets
    assert row["sum_X_v"] == sum(range(1, n + 1)) * 2 ** (n - 1)
    assert row["min_X_v"] == 1 and row["max_X_f"] == 1.0


@pytest.mark.parametrize("where", ["X.v > NEXT(X).v", "X.v * 2 >= NEXT(X).v * 2 + 1", "X.k = NEXT(X).k", ""])
def test_big_count_every_predicate_kind(where: str) -> None:
    """Order (Fenwick) path, point (equality bucket) path and no predicate."""
    n = 200
    events = _monotone(n, k=1)
    clause = f" WHERE {where}" if where else ""
    rows = check_against_general(f"RETURN COUNT(*), COUNT(X), SUM(X.v) PATTERN A X+{clause} WITHIN 200 s", events)
    assert [r["count"] for r in rows] == [2**n - 1]


def test_big_count_sliding_windows() -> None:
    """Several lanes per event; each full window of w events has 2**w - 1 trends."""
    events = _monotone(240)
    text = f"RETURN {BIG_AGGS} PATTERN A X+ WHERE X.v > NEXT(X).v WITHIN 160 s SLIDE 40 s"
    rows = check_against_general(text, events)
    counts = {r["window_start"]: r["count"] for r in rows}
    assert counts[0] == counts[40] == counts[80] == 2**160 - 1
    assert counts[-120] == 2**40 - 1 and counts[200] == 2**40 - 1


def test_big_count_only_in_a_later_partition() -> None:
    """Small partitions first, then one that overflows 64 bits (restart with
    more limbs), then small ones again computed with the wider limbs."""
    small0 = _monotone(5, g=0)
    big = _monotone(300, g=1)
    small2 = _monotone(7, t0=10, g=2)
    small3 = [{"type": "A", "time": 3, "v": 1, "f": 2.0, "g": 3}]
    events = small0 + big + small2 + small3
    text = f"RETURN g, {BIG_AGGS} PATTERN A X+ WHERE X.v > NEXT(X).v GROUP-BY g WITHIN 300 s"
    rows = check_against_general(text, events)
    assert {r["g"]: r["count"] for r in rows} == {0: 2**5 - 1, 1: 2**300 - 1, 2: 2**7 - 1, 3: 1}
    # rolled up over partitions: the big one and small ones in one row
    text = f"RETURN {BIG_AGGS} PATTERN A X+ WHERE X.v > NEXT(X).v AND [g] WITHIN 300 s"
    rows = check_against_general(text, events)
    assert [r["count"] for r in rows] == [2**5 - 1 + 2**300 - 1 + 2**7 - 1 + 1]


def test_big_count_two_big_partitions_and_windows() -> None:
    """Two partitions that each need more limbs, over tumbling windows."""
    events = _monotone(150, g="a") + _monotone(150, g="b", t0=100) + _monotone(70, g="a", t0=150)
    text = f"RETURN g, {BIG_AGGS} PATTERN A X+ WHERE X.v > NEXT(X).v GROUP-BY g WITHIN 100 s"
    check_against_general(text, events)


# ------------------------------------------------------ blocks of windows


@settings(max_examples=25, **SETTINGS)
@given(st.data())
def test_long_streams_many_windows(data: st.DataObject) -> None:
    """60-150 events over ~10 times as many seconds, windows up to 80 s: many
    blocks of windows per partition, events in several blocks, and
    counts past 64 bits in some windows (the restart path)."""
    spec = data.draw(queries(max_within=80, max_slide=40))
    events = data.draw(streams(spec, 150, min_events=60, time_scale=8))
    check_against_general(spec.text, events)


@pytest.mark.parametrize("budget", [1 << 14, 1 << 10])
def test_trees_past_their_memory_bound_run_again_in_smaller_blocks(budget: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block's tree that would pass MAX_TREE_BYTES (big counts, many keys)
    makes the kernel run again with blocks of fewer windows, down to one:
    the rows do not change."""
    import greta_stream.engine.columnar.driver as columnar
    from greta_stream.engine.columnar import blocks

    monkeypatch.setattr(columnar, "MAX_TREE_BYTES", budget)
    lanes: list[int] = []
    tasks = blocks.tasks
    monkeypatch.setattr(blocks, "tasks", lambda *a: (lanes.append(a[-1]), tasks(*a))[1])
    events = _monotone(240)
    text = f"RETURN {BIG_AGGS} PATTERN A X+ WHERE X.v > NEXT(X).v WITHIN 160 s SLIDE 5 s"
    check_against_general(text, events)
    assert lanes[0] == 32 and lanes[-1] < 32  # ran again, with smaller blocks


# ------------------------------------------------------ threads


def test_partitions_split_across_threads_equal_general(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions are split into ranges of about equal events, one thread each
    (any number of partitions, including one): the rows do not change."""
    import greta_stream.engine.columnar.driver as columnar

    rng = random.Random(7)
    text = ("RETURN g, COUNT(*), SUM(X.v), MAX(X.v) PATTERN A X+ WHERE [p] AND X.v > NEXT(X).v "
            "GROUP-BY g WITHIN 6 s SLIDE 2 s")
    for parts in (1, 2, 3, 7):
        events = [{"type": "A", "time": rng.randint(0, 400), "p": rng.randrange(parts), "g": rng.randrange(2),
                   "v": rng.randint(-50, 50)} for _ in range(900)]
        for threads in (2, 3):
            monkeypatch.setattr(columnar, "PARALLEL_EVENTS", 0)
            monkeypatch.setattr(columnar.os, "cpu_count", lambda n=threads: n)
            check_against_general(text, events)


# ------------------------------------------------------ limbs


@given(st.integers(0, 7).flatmap(lambda w: st.tuples(st.just(w), st.lists(st.integers(0, 2 ** (32 * w) - 1 if w else 0),
                                                                          max_size=40))))
def test_exact_ints_read_any_width_of_limbs(case: tuple[int, list[int]]) -> None:
    from greta_stream.engine.columnar.rows import exact_ints

    width, values = case
    limbs = np.array([[(v >> (32 * j)) & 0xFFFFFFFF for j in range(width)] for v in values],
                     dtype=np.uint64).reshape(len(values), width)
    assert exact_ints(limbs) == values
