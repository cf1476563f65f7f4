"""Engine properties: results depend only on the set of events.

Arrival order, the points where the watermark advances and a snapshot /
restore in the middle must all leave the rows unchanged (docs/QUERY_LANGUAGE.md
sections 1 and 6).
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream.engine import Engine

QUERIES = [
    "RETURN g, COUNT(*), SUM(A.v), MIN(A.v), MAX(B.v), AVG(A.v) PATTERN (SEQ(A+, B))+ GROUP-BY g WITHIN 6 s SLIDE 2 s",
    "RETURN COUNT(*), COUNT(A) PATTERN SEQ(NOT E, A+, NOT C) WHERE [g] AND A.v < NEXT(A).v WITHIN 5 s SLIDE 1 s",
    "RETURN COUNT(*), MAX(A.v) PATTERN (SEQ(A+, NOT SEQ(C, NOT E, B b2), B))+ WITHIN 8 s SLIDE 4 s",
    "RETURN g, COUNT(*) PATTERN SEQ(A x+, A y+) WHERE [x.h] AND x.v <= NEXT(y).v GROUP-BY g WITHIN 4 s",
    "RETURN COUNT(*), SUM(B.w) PATTERN SEQ(A, NOT E, B+) WHERE [B.h, g] AND E.v > 1 WITHIN 3 s SLIDE 1 s",
    # Selection strategies and bounded repetition (SEMANTICS section 8): the
    # strategies' per-vertex state (first candidates, the partition's previous
    # time stamp) must survive snapshots and not depend on the batches.
    "RETURN g, COUNT(*), SUM(A.v), MIN(A.v) PATTERN A+ SEMANTICS skip-till-next-match WHERE [g] AND "
    "A.v < NEXT(A).v GROUP-BY g WITHIN 6 s SLIDE 2 s",
    "RETURN g, COUNT(*), COUNT(x) PATTERN SEQ(A x+, NOT E, B y) SEMANTICS contiguous WHERE [x.h] GROUP-BY g "
    "WITHIN 4 s SLIDE 1 s",
    "RETURN COUNT(*), SUM(A.v) PATTERN SEQ(A{2,3}, B?, C) SEMANTICS skip-till-next-match WHERE "
    "A.v <= NEXT(A).v WITHIN 5 s SLIDE 1 s",
    "RETURN COUNT(*), MAX(B.v) PATTERN (SEQ(A, B{2}))+ SEMANTICS contiguous WHERE [g] WITHIN 6 s SLIDE 3 s",
    "RETURN COUNT(*), AVG(A.w) PATTERN SEQ(A{0,2}, B*, C) WHERE A.v < NEXT(A).v WITHIN 5 s SLIDE 1 s",
]

events_st = st.lists(
    st.fixed_dictionaries({
        "type": st.sampled_from("ABCEF"),
        "time": st.integers(-4, 14),
        "v": st.integers(0, 4),
        "w": st.floats(-2, 2, allow_nan=False).map(lambda f: round(f, 3)),
        "g": st.integers(0, 1),
        "h": st.integers(0, 1),
    }),
    max_size=16,
).map(lambda evs: [dict(e, id=i) for i, e in enumerate(evs)])


def run_streaming(query: str, events: list[dict], cuts: list[int], snapshot_at: int | None = None) -> list[dict]:
    """Feed events in the given order; advance the watermark at each cut."""
    engine = Engine(query)
    rows: list[dict] = []
    added: list[dict] = []
    for i, ev in enumerate(events):
        engine.add(ev)
        added.append(ev)
        if i in cuts:
            # Everything still to come is at or after the watermark: never late.
            wm = min([e["time"] for e in events[i + 1:]], default=math.inf)
            rows += engine.advance(wm)
        if snapshot_at == i:
            engine = Engine.restore(query, engine.snapshot())
    rows += engine.finish()
    return sorted(rows, key=repr)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(QUERIES), events_st, st.randoms(use_true_random=False))
def test_arrival_order_does_not_matter(query: str, events: list[dict], rnd) -> None:  # noqa: ANN001
    shuffled = list(events)
    rnd.shuffle(shuffled)
    assert sorted(evaluate(query, shuffled), key=repr) == sorted(evaluate(query, events), key=repr)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(QUERIES), events_st, st.sets(st.integers(0, 15)), st.randoms(use_true_random=False))
def test_watermark_split_does_not_matter(query: str, events: list[dict], cuts: set[int], rnd) -> None:  # noqa: ANN001
    # Disorder within each batch between two cuts, time order across them.
    ordered = sorted(events, key=lambda e: e["time"])
    batches, start = [], 0
    for c in sorted(cuts) + [len(ordered)]:
        batch = ordered[start:c + 1]
        rnd.shuffle(batch)
        batches.append(batch)
        start = c + 1
    fed = [e for b in batches for e in b]
    cut_positions = {sum(len(b) for b in batches[: j + 1]) - 1 for j in range(len(batches) - 1)}
    expected = sorted(evaluate(query, events), key=repr)
    assert run_streaming(query, fed, sorted(cut_positions)) == expected


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(QUERIES), events_st, st.sets(st.integers(0, 15)), st.integers(0, 15))
def test_snapshot_restore_continue_equals_uninterrupted(query: str, events: list[dict], cuts: set[int], at: int) -> None:
    ordered = sorted(events, key=lambda e: e["time"])
    assert run_streaming(query, ordered, sorted(cuts), snapshot_at=at) == run_streaming(query, ordered, sorted(cuts))
