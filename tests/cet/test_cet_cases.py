"""Hand-checked CET cases: the paper's streams, rebinding, long trends, the cache budget.

Streams are written `a1 b2 e3`: type = upper-cased letter, time = the number,
id = the token.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cet_support import extract, keyed

from greta_stream.cet import CetConfig, TrendExtractor
from greta_stream.errors import SnapshotError
from greta_stream.query import parse
from greta_stream.testing.oracle import complete_trends


def ev(text: str, **attrs: dict) -> list[dict]:
    return [{"type": t[0].upper(), "time": int(t[1:]), "id": t, **attrs.get(t, {})} for t in text.split()]


def trends(text: str, events: list[dict], **options) -> list[list]:  # noqa: ANN003
    return [r["trend"] for r in extract(text, events, **options)]


def test_a_plus_has_one_complete_trend_and_all_subsets() -> None:
    q = "RETURN TRENDS PATTERN A+ WITHIN 100 s"
    assert trends(q, ev("a1 a2 a3")) == [["a1", "a2", "a3"]]
    got = trends(q, ev("a1 a2 a3"), trends="all")
    assert got == [["a1"], ["a1", "a2"], ["a1", "a2", "a3"], ["a1", "a3"], ["a2"], ["a2", "a3"], ["a3"]]


def test_paper_figure_3_all_and_complete() -> None:
    q = "RETURN TRENDS PATTERN (SEQ(A+, B))+ WITHIN 100 s"
    assert len(trends(q, ev("a1 b2 a3 a4 b7"), trends="all")) == 11  # docs/QUERY_LANGUAGE.md section 7
    assert trends(q, ev("a1 b2 a3 a4 b7")) == [["a1", "b2", "a3", "a4", "b7"]]


def test_paper_figure_6d_negation() -> None:
    q = "RETURN TRENDS PATTERN (SEQ(A+, NOT SEQ(C, NOT E, D), B))+ WITHIN 100 s"
    events = ev("a1 b2 c2 a3 e3 a4 c5 d6 b7 a8 b9")
    recs = extract(q, events, trends="all")
    assert len(recs) == 13 and {r["total"] for r in recs} == {13}
    # (c5, d6) keeps a1, a3, a4 from any b after d6, but not from a8 (A+ is a
    # Kleene adjacency, not negated), and a8 -> b9 is clear: one complete trend.
    assert trends(q, events) == [["a1", "b2", "a3", "a4", "a8", "b9"]]
    assert keyed(q, extract(q, events)) == complete_trends(parse(q), events)


def test_check_kiting_chains() -> None:
    q = "RETURN TRENDS PATTERN Check C+ WHERE C.dest = NEXT(C).src WITHIN 100 s"
    rows = [("c1", "A", "B"), ("c2", "B", "C"), ("c3", "B", "D"), ("c4", "D", "E")]  # CET paper Table 1
    events = [{"type": "Check", "time": i + 1, "id": c, "src": s, "dest": d} for i, (c, s, d) in enumerate(rows)]
    assert trends(q, events) == [["c1", "c2"], ["c1", "c3", "c4"]]


def test_rebinding_superset_is_found() -> None:
    # (x=a1, y=a2) is inside (x=a0, y=a1 a2) although a1 is bound differently there.
    q = "RETURN TRENDS PATTERN SEQ(A x, A y+) WITHIN 100 s"
    events = ev("a0 a1 a2")
    got = keyed(q, extract(q, events))
    want = complete_trends(parse(q), events)
    assert got == want == {(0, 100, ()): [(("a0", "x"), ("a1", "y"), ("a2", "y"))]}
    q = "RETURN TRENDS PATTERN SEQ(A x+, A y+) WITHIN 100 s"
    got = keyed(q, extract(q, ev("a1 a2 a3")))
    assert sorted(got[(0, 100, ())]) == sorted(complete_trends(parse(q), ev("a1 a2 a3"))[(0, 100, ())])
    assert len(got[(0, 100, ())]) == 2  # x=a1 y=a2 a3, and x=a1 a2 y=a3: same events, two bindings


def test_group_by_and_events() -> None:
    q = "RETURN TRENDS PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price GROUP-BY company WITHIN 10 s"
    events = [{"type": "Stock", "time": t, "id": i, "company": c, "price": p}
              for i, (t, c, p) in enumerate([(1, "x", 5), (2, "y", 9), (3, "x", 4), (4, "y", 3), (5, "x", 6)])]
    recs = extract(q, events)
    assert [(r["company"], r["trend"], r["aliases"], [e["price"] for e in r["events"]]) for r in recs] == [
        ("x", [0, 2], ["S", "S"], [5, 4]), ("x", [4], ["S"], [6]), ("y", [1, 3], ["S", "S"], [9, 3])]


def test_long_trend_beyond_recursion_limit_and_no_cache() -> None:
    n = 1200  # past the default recursion limit of 1000
    events = [{"type": "A", "time": i, "id": i} for i in range(n)]
    q = "RETURN TRENDS PATTERN A+ WITHIN 100000 s"
    for opts in ({}, {"cache_units": 0}):
        recs = extract(q, events, with_events=False, **opts)
        assert len(recs) == 1 and recs[0]["trend"] == list(range(n)) and recs[0]["total"] == 1
    recs = extract(q, events[:200], trends="all", max_trends=3, with_events=False)
    assert [r["trend"] for r in recs] == [[0], [0, 1], [0, 1, 2]]
    assert recs[0]["total"] == 2**200 - 1 and recs[0]["truncated"]


def test_cache_stays_within_budget_and_sliding_windows_share_it() -> None:
    q = "RETURN TRENDS PATTERN A+ WHERE A.v < NEXT(A).v WITHIN 8 s SLIDE 2 s"
    events = [{"type": "A", "time": t, "id": t, "v": (t * 7) % 5} for t in range(40)]
    for budget in (0, 10, 50, 10_000):
        ex = TrendExtractor(q, config=CetConfig(trends="all", cache_units=budget, graphlet_units=budget))
        ex.add_many(events)
        got = []
        for wm in range(0, 44, 2):
            got += ex.advance(wm)
            assert ex.metrics["cache_units"] <= budget if "cache_units" in ex.metrics else True
        got += ex.finish()
        if budget == 0:
            first = got
        assert got == first


def test_timestamps() -> None:
    q = "RETURN TRENDS PATTERN SEQ(A, B) WITHIN 1 min"
    events = [{"type": "A", "time": "2024-01-01T00:00:10Z", "id": "a"},
              {"type": "B", "time": "2024-01-01T00:00:20Z", "id": "b"}]
    recs = extract(q, events, with_events=False)
    assert recs == [{"window_start": datetime(2024, 1, 1, tzinfo=UTC),
                     "window_end": datetime(2024, 1, 1, 0, 1, tzinfo=UTC),
                     "trend": ["a", "b"], "total": 1, "truncated": False}]


def test_snapshot_checks_query_and_options() -> None:
    q = "RETURN TRENDS PATTERN A+ WITHIN 10 s"
    ex = TrendExtractor(q)
    ex.add({"type": "A", "time": 1})
    blob = ex.snapshot()
    with pytest.raises(SnapshotError):
        TrendExtractor.restore("RETURN TRENDS PATTERN B+ WITHIN 10 s", blob)
    with pytest.raises(SnapshotError):
        TrendExtractor.restore(q, blob, config=CetConfig(trends="all"))
    assert TrendExtractor.restore(q, blob).finish()[0]["trend"] == [0]


def test_bad_options() -> None:
    with pytest.raises(ValueError):
        CetConfig(trends="some")
    with pytest.raises(ValueError):
        CetConfig(max_trends=0)
