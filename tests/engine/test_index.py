"""Indexed propagation (engine/index.py) against the oracle and the scan.

Every test forces the index on tiny inputs (`GraphPlan.index_min_vertices = 0`),
so edges of the shape `key(X) op probe(NEXT(Y))` with op in `< <= > >= =` go
through the Fenwick, hash or bucket indexes. Values come from a few numbers
(ints and floats that tie across types, 1 == 1.0), so ties and equal keys are
frequent. Covered: every op, both sides swapped, multiplicative and additive
constants, several predicates on one edge (one indexed, the rest checked),
middle negation (eviction), leading/trailing NOT, sliding windows and pane
expiry through watermark advances, strings mixed into numeric attributes
(side list, `predicate_errors` equal to the scan's) and exact big counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream.engine import Engine
from greta_stream.engine import graph as graph_module
from greta_stream.engine.plan import GraphPlan
from greta_stream.query import parse
from greta_stream.testing.oracle import oracle_rows

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@contextmanager
def indexing(on: bool = True, min_vertices: int = 0) -> Iterator[None]:
    saved = GraphPlan.indexing, GraphPlan.index_min_vertices
    GraphPlan.indexing, GraphPlan.index_min_vertices = on, min_vertices
    try:
        yield
    finally:
        GraphPlan.indexing, GraphPlan.index_min_vertices = saved


def same_rows(expected: list[dict], got: list[dict]) -> bool:
    if len(expected) != len(got):
        return False
    for want, have in zip(expected, got, strict=True):
        if list(want) != list(have):
            return False
        for k, w in want.items():
            h = have[k]
            if isinstance(w, float) or isinstance(h, float):
                if type(w) is not type(h) or not math.isclose(w, h, rel_tol=1e-9, abs_tol=1e-12):
                    return False
            elif type(w) is not type(h) or w != h:
                return False
    return True


EDGES = (
    "{x}.v < NEXT({y}).v",
    "{x}.v <= NEXT({y}).v",
    "{x}.v > NEXT({y}).v",
    "{x}.v >= NEXT({y}).v",
    "{x}.v = NEXT({y}).v",
    "NEXT({y}).v < {x}.v",  # swapped sides
    "NEXT({y}).v = {x}.v",
    "{x}.v * 1.05 < NEXT({y}).v",
    "{x}.v * 2 + 1 >= NEXT({y}).v",
    "{x}.v - 1 <= NEXT({y}).v * 1.1",
    "{x}.w = NEXT({y}).w",
    "{x}.v % 2 = NEXT({y}).v % 2",
)

PATTERNS = (
    ("A+", [("A", "A")]),
    ("SEQ(A+, B)", [("A", "A"), ("A", "B")]),
    ("SEQ(A, B+)", [("A", "B"), ("B", "B")]),
    ("(SEQ(A+, B))+", [("A", "A"), ("A", "B"), ("B", "A")]),
    ("SEQ(A+, NOT E, B+)", [("A", "A"), ("A", "B"), ("B", "B")]),
    ("SEQ(A, NOT E, B)", [("A", "B")]),
    ("SEQ(NOT E, A+)", [("A", "A")]),
    ("SEQ(A+, NOT E)", [("A", "A")]),
    ("SEQ(A x+, NOT E, A y+)", [("x", "x"), ("x", "y"), ("y", "y")]),
)

WINDOWS = ("WITHIN 100 s", "WITHIN 4 s SLIDE 2 s", "WITHIN 5 s SLIDE 1 s", "WITHIN 3 s", "WITHIN 6 s SLIDE 4 s")
VALUES = st.sampled_from([0, 1, 1.0, 2, 2.0, 3, -1, 0.5, 1.5, 4])
RETURNS = ("COUNT(*)", "COUNT(*), COUNT({a})", "COUNT(*), SUM({a}.v), AVG({a}.v)", "COUNT(*), SUM({a}.v)")


@st.composite
def queries(draw: Any) -> str:
    pattern, pairs = draw(st.sampled_from(PATTERNS))
    preds = []
    for _ in range(draw(st.integers(1, 3))):
        x, y = draw(st.sampled_from(pairs))
        preds.append(draw(st.sampled_from(EDGES)).format(x=x, y=y))
    if draw(st.integers(0, 3)) == 0:
        preds.append("E.v > 0" if "NOT E" in pattern else f"{pairs[0][0]}.v != 3")
    alias = pairs[0][0]
    ret = draw(st.sampled_from(RETURNS)).format(a=alias)
    group = draw(st.sampled_from(["", "", " GROUP-BY g"]))
    if group:
        ret = "g, " + ret
    return f"RETURN {ret} PATTERN {pattern} WHERE {' AND '.join(preds)}{group} {draw(st.sampled_from(WINDOWS))}"


@st.composite
def events(draw: Any, max_size: int = 9, dirty: bool = False) -> list[dict]:
    n = draw(st.integers(0, max_size))
    out = []
    for i in range(n):
        v = draw(VALUES)
        if dirty and draw(st.integers(0, 4)) == 0:
            v = draw(st.sampled_from(["x", "y", True]))
        out.append({
            "type": draw(st.sampled_from("AABBE")), "time": draw(st.integers(0, 9)), "v": v,
            "w": draw(st.sampled_from([0, 1, "p", 1.0])), "g": draw(st.integers(0, 1)), "id": i,
        })
    return out


@settings(max_examples=300, **SETTINGS)
@given(queries(), events())
def test_indexed_engine_equals_oracle(text: str, evs: list[dict]) -> None:
    note(text)
    expected = oracle_rows(parse(text), evs)
    with indexing():
        got = list(evaluate(text, evs))
    assert same_rows(expected, got), (expected, got)


def run_stream(text: str, evs: list[dict], cuts: list[int]) -> tuple[list[dict], dict]:
    """Feed in time order, advancing the watermark at the cuts (pane expiry, rebuilds)."""
    engine = Engine(text)
    ordered = sorted(evs, key=lambda e: e["time"])
    rows: list[dict] = []
    for i, ev in enumerate(ordered):
        engine.add(ev)
        if i in cuts:
            rows += engine.advance(min([e["time"] for e in ordered[i + 1:]], default=math.inf))
            if i % 3 == 0:
                engine = Engine.restore(text, engine.snapshot())  # indexes are rebuilt after a restore
    rows += engine.finish()
    return sorted(rows, key=repr), dict(engine.metrics)


@settings(max_examples=120, **SETTINGS)
@given(queries(), events(max_size=40, dirty=True), st.sets(st.integers(0, 39)))
def test_indexed_equals_scan_on_larger_streams(text: str, evs: list[dict], cuts: set[int]) -> None:
    """Rows and metrics (predicate_errors included) equal the scan's; strings force the side list."""
    note(text)
    with indexing(False):
        want = run_stream(text, evs, sorted(cuts))
    with indexing():
        got = run_stream(text, evs, sorted(cuts))
    assert got == want


def test_index_is_used_and_big_counts_stay_exact() -> None:
    text = "RETURN COUNT(*), SUM(A.v), AVG(A.v) PATTERN A+ WHERE A.v > NEXT(A).v WITHIN 1000 s"
    evs = [{"type": "A", "time": i, "v": float(300 - i) + 0.25 if i % 7 else 300 - i} for i in range(300)]
    built = []
    original = graph_module.build_index
    try:
        graph_module.build_index = lambda *a: built.append(1) or original(*a)
        with indexing(min_vertices=0):
            got = list(evaluate(text, evs))
    finally:
        graph_module.build_index = original
    assert built, "the indexed path was not taken"
    assert got[0]["count"] == 2**300 - 1  # every subsequence strictly decreases
    with indexing(False):
        assert list(evaluate(text, evs)) == got


def test_fenwick_suffix_with_ties_and_negation() -> None:
    text = (
        "RETURN COUNT(*) PATTERN SEQ(A+, NOT E, B) WHERE A.v >= NEXT(B).v AND A.v * 1.5 > NEXT(A).v"
        " WITHIN 20 s SLIDE 5 s"
    )
    evs = [
        {"type": t, "time": i, "v": v, "id": i}
        for i, (t, v) in enumerate([("A", 2), ("A", 2.0), ("A", 3), ("E", 0), ("A", 1), ("B", 1), ("A", 4), ("B", 2.0)])
    ]
    expected = oracle_rows(parse(text), evs)
    with indexing():
        assert same_rows(expected, list(evaluate(text, evs)))


TIES = [1, 1, 2, 1.0, 2.0, 3, 0.5, 2, 3.0, 1]


@pytest.mark.parametrize("edge", EDGES[:10])
@pytest.mark.parametrize("window", ["WITHIN 100 s", "WITHIN 4 s SLIDE 1 s"])
def test_every_op_with_ties(edge: str, window: str) -> None:
    """Each op on a fixed stream full of ties (1, 1.0, 2, 2.0 ...), tumbling and sliding."""
    text = f"RETURN COUNT(*), SUM(A.v) PATTERN A+ WHERE {edge.format(x='A', y='A')} {window}"
    evs = [{"type": "A", "time": i, "v": v, "w": 0, "id": i} for i, v in enumerate(TIES)]
    expected = oracle_rows(parse(text), evs)
    with indexing():
        assert same_rows(expected, list(evaluate(text, evs)))
