"""Hand-checked cases for the brute-force oracle (greta_stream.testing.oracle).

Section 7 of docs/QUERY_LANGUAGE.md uses hand-built ASTs; the other cases are written
as query text and parsed.
"""

from fractions import Fraction

import pytest

from greta_stream.query import parse
from greta_stream.query.ast import (
    Aggregate,
    Duration,
    EventPattern,
    Kleene,
    Not,
    Query,
    Seq,
)
from greta_stream.testing.oracle import complete_trends, enumerate_trends, oracle_rows


def stream(text, **attrs):
    """'a1, b2' -> events with type 'A', time 1, id 'a1'; attrs: id -> {attr: v}."""
    out = []
    for tok in (t.strip() for t in text.split(",")):
        out.append(
            {
                "type": tok[0].upper(),
                "time": int(tok[1:]),
                "id": tok,
                **attrs.get(tok, {}),
            }
        )
    return out


def rows(text, events, **names):
    """Oracle rows of a query given as text."""
    return oracle_rows(parse(text), events, **names)


def count(text, events):
    """COUNT(*) per window as {(start, end): count}."""
    return {
        (r["window_start"], r["window_end"]): r["count"]
        for r in rows(f"RETURN COUNT(*) {text}", events)
    }


# ------------------------------------------------ docs/QUERY_LANGUAGE.md section 7

A, B, C, D, E = (EventPattern(t, t) for t in "ABCDE")
AGGS = (
    Aggregate("COUNT"),
    Aggregate("COUNT", "A"),
    Aggregate("MIN", "A", "attr"),
    Aggregate("MAX", "A", "attr"),
    Aggregate("SUM", "A", "attr"),
    Aggregate("AVG", "A", "attr"),
)


def query(pattern, returns=AGGS):
    """A hand-built query over one 100 s window."""
    return Query(
        returns=returns,
        pattern=pattern,
        where=(),
        group_by=(),
        within=Duration(Fraction(100), "s"),
    )


S1 = stream("a1, b2, a3, a4, b7", a1={"attr": 5}, a3={"attr": 6}, a4={"attr": 4})
S_I = stream("a1, b2, c2, a3, e3, a4, c5, d6, b7, a8, b9")


@pytest.mark.parametrize(
    "pattern, expected",
    [
        (Kleene(Seq((Kleene(A), B))), (11, 20, 4, 6, 100, 5.0)),
        (Seq((Kleene(A), B)), (8, 13, 4, 6, 65, 5.0)),
        (Kleene(A), (7, 12, 4, 6, 60, 5.0)),
    ],
)
def test_section7_first_table(pattern, expected):
    [row] = oracle_rows(query(pattern), S1)
    assert row == dict(
        zip(
            [
                "window_start",
                "window_end",
                "count",
                "count_A",
                "min_A_attr",
                "max_A_attr",
                "sum_A_attr",
                "avg_A_attr",
            ],
            (0, 100) + expected,
        )
    )
    assert isinstance(row["avg_A_attr"], float)


@pytest.mark.parametrize(
    "pattern, expected",
    [
        (Kleene(A), 15),
        (Seq((Kleene(A), B)), 23),
        (Kleene(Seq((Kleene(A), B))), 43),
        (Kleene(Seq((Kleene(A), Not(Seq((C, Not(E), D))), B))), 13),
        (Seq((Kleene(A), Not(E))), 14),
        (Seq((Not(E), Kleene(A))), 12),
    ],
)
def test_section7_second_table(pattern, expected):
    [row] = oracle_rows(query(pattern, (Aggregate("COUNT"),)), S_I)
    assert row == {"window_start": 0, "window_end": 100, "count": expected}


def test_section7_6d_trends():
    pattern = Kleene(Seq((Kleene(A), Not(Seq((C, Not(E), D))), B)))
    found = enumerate_trends(query(pattern, (Aggregate("COUNT"),)), S_I)
    trends = found[(0, 100, ())]
    assert (("a1", "A"), ("b2", "B")) in trends
    assert not any(t[-1] == ("b7", "B") for t in trends)
    assert len(trends) == len(set(trends)) == 13


# ------------------------------------------------------ more small cases


def test_kleene_of_kleene_equals_kleene():
    events = stream("a1, a2, a3")
    assert count("PATTERN (A+)+ WITHIN 10 s", events) == {(0, 10): 7}


def test_same_type_two_aliases():
    events = stream("a1, a2, a3")
    q = parse("RETURN COUNT(*), COUNT(x), COUNT(y) PATTERN SEQ(A x+, A y+) WITHIN 10 s")
    trends = enumerate_trends(q, events)[(0, 10, ())]
    full = [t for t in trends if len(t) == 3]
    assert sorted(full) == [
        (("a1", "x"), ("a2", "x"), ("a3", "y")),
        (("a1", "x"), ("a2", "y"), ("a3", "y")),
    ]
    assert len(trends) == 5  # 3 pairs + 2 splits of the triple
    assert oracle_rows(q, events)[0] == {
        "window_start": 0,
        "window_end": 10,
        "count": 5,
        "count_x": 6,
        "count_y": 6,
    }
    # both triples are maximal: neither has a strict superset of events
    assert sorted(complete_trends(q, events)[(0, 10, ())]) == sorted(full)


def test_group_by_and_rename():
    events = stream(
        "a1, a2, a3, b4, b5",
        a1={"g": "x"},
        a2={"g": "y"},
        a3={"g": "x"},
        b4={"g": "x"},
        b5={"g": "y"},
    )
    out = rows(
        "RETURN g AS grp, COUNT(*) PATTERN SEQ(A+, B) GROUP-BY g WITHIN 10 s", events
    )
    assert out == [
        {"window_start": 0, "window_end": 10, "grp": "x", "count": 3},
        {"window_start": 0, "window_end": 10, "grp": "y", "count": 1},
    ]
    # GROUP-BY attributes are always in the row, even if RETURN omits them
    out = rows("RETURN COUNT(*) PATTERN SEQ(A+, B) GROUP-BY g WITHIN 10 s", events)
    assert [r["g"] for r in out] == ["x", "y"]


def test_edge_predicate():
    events = stream("a1, a2, a3", a1={"v": 1}, a2={"v": 3}, a3={"v": 2})
    # increasing subsequences: 3 singletons, (a1 a2), (a1 a3)
    assert count("PATTERN A+ WHERE A.v < NEXT(A).v WITHIN 10 s", events) == {(0, 10): 5}


def test_edge_predicate_across_not():
    events = stream("a1, a2, b3", a1={"v": 1}, a2={"v": 5}, b3={"v": 3})
    q = parse(
        "RETURN COUNT(*) PATTERN SEQ(A, NOT E, B) WHERE A.v < NEXT(B).v WITHIN 10 s"
    )
    assert enumerate_trends(q, events) == {(0, 10, ()): [(("a1", "A"), ("b3", "B"))]}


def test_local_predicate_on_negative_alias():
    text = "PATTERN SEQ(A, NOT E, B) WHERE E.v > 5 WITHIN 10 s"
    assert count(text, stream("a1, e2, b3", e2={"v": 3})) == {(0, 10): 1}
    assert count(text, stream("a1, e2, b3", e2={"v": 9})) == {}


def test_failing_expression_is_false():
    events = stream(
        "a1, a2, a3", a1={"v": 4, "w": 2}, a2={"v": 4, "w": 0}, a3={"v": "s", "w": 1}
    )
    # a2 divides by zero, a3 subtracts from a string: only a1 qualifies
    assert count("PATTERN A+ WHERE A.v / A.w - 1 > 0 WITHIN 10 s", events) == {
        (0, 10): 1
    }


def test_sliding_window_trend_in_two_windows():
    events = stream("a6, a8")
    q = parse("RETURN COUNT(*) PATTERN A+ WITHIN 10 s SLIDE 5 s")
    found = enumerate_trends(q, events)
    assert list(found) == [(0, 10, ()), (5, 15, ())]
    for trends in found.values():
        assert (("a6", "A"), ("a8", "A")) in trends and len(trends) == 3


def test_sliding_window_negative_k():
    events = stream("a3, a7")
    assert count("PATTERN A+ WITHIN 10 s SLIDE 5 s", events) == {
        (-5, 5): 1,
        (0, 10): 3,
        (5, 15): 1,
    }


def test_fractional_window_bounds():
    events = [{"type": "A", "time": 0.2}, {"type": "A", "time": 0.4}]
    q = parse("RETURN COUNT(*) PATTERN A+ WITHIN 500 ms")
    assert oracle_rows(q, events) == [
        {"window_start": 0, "window_end": 0.5, "count": 3}
    ]
    assert enumerate_trends(q, events)[(0, 0.5, ())][-1] == ((1, "A"),)  # default ids


def test_leading_not_depends_on_window():
    events = stream("e3, a7")
    assert count("PATTERN SEQ(NOT E, A) WITHIN 10 s SLIDE 5 s", events) == {(5, 15): 1}


def test_trailing_not_needs_match_inside_window():
    assert count("PATTERN SEQ(A, NOT E) WITHIN 10 s", stream("a1, e10")) == {(0, 10): 1}
    assert count("PATTERN SEQ(A, NOT E) WITHIN 10 s", stream("a1, e9")) == {}


def test_partial_equivalence_negates_whole_segment():
    # vehicle applies to S and F only; segment to every alias, X included
    events = [
        {"type": "S", "time": 1, "id": "s1", "vehicle": 1, "segment": 7},
        {"type": "S", "time": 2, "id": "s2", "vehicle": 2, "segment": 8},
        {"type": "X", "time": 3, "id": "x3", "segment": 7},
        {"type": "F", "time": 4, "id": "f4", "vehicle": 1, "segment": 7},
        {"type": "F", "time": 5, "id": "f5", "vehicle": 2, "segment": 8},
        {"type": "F", "time": 6, "id": "f6", "vehicle": 2, "segment": 7},
    ]
    q = parse(
        "RETURN COUNT(*) PATTERN SEQ(S, NOT X, F) "
        "WHERE [S.vehicle, F.vehicle, segment] WITHIN 10 s"
    )
    assert enumerate_trends(q, events) == {(0, 10, ()): [(("s2", "S"), ("f5", "F"))]}


def test_float_sum_and_avg():
    events = stream("a1, a2", a1={"v": 0.1}, a2={"v": 0.2})
    [row] = rows(
        "RETURN SUM(A.v) AS s, AVG(A.v), MIN(A.v), MAX(A.v) PATTERN A+ WITHIN 10 s",
        events,
    )
    assert isinstance(row["s"], float) and row["s"] == pytest.approx(0.6, rel=1e-12)
    assert row["avg_A_v"] == pytest.approx(0.15, rel=1e-12)
    assert (row["min_A_v"], row["max_A_v"]) == (0.1, 0.2)


def test_complete_trends_per_partition():
    events = stream(
        "a1, a2, a3, b4", a1={"k": 1}, a2={"k": 2}, a3={"k": 1}, b4={"k": 1}
    )
    q = parse("RETURN COUNT(*) PATTERN A+ WHERE [A.k] WITHIN 10 s")
    assert complete_trends(q, events) == {
        (0, 10, ()): [(("a1", "A"), ("a3", "A")), (("a2", "A"),)]
    }
    q = parse("RETURN COUNT(*) PATTERN SEQ(A+, B) GROUP-BY k WITHIN 10 s")
    assert complete_trends(q, events) == {
        (0, 10, (1,)): [(("a1", "A"), ("a3", "A"), ("b4", "B"))]
    }


def test_event_missing_aggregated_attribute_is_skipped():
    events = stream("a1, a2, a3", a1={"v": 1}, a3={"v": 2})
    [row] = rows("RETURN COUNT(*), SUM(A.v) PATTERN A+ WITHIN 10 s", events)
    assert (row["count"], row["sum_A_v"]) == (3, 6)
