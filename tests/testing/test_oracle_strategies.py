"""Hand-computed cases for the oracle's selection strategies and bounded
repetition (SEMANTICS.md section 8), plus hypothesis properties that tie the
strategies and the repetition forms to each other.

Streams are written 'a1, b2' (type = letter, time = number, id = the token);
the expected trends are worked out by hand in the comments.
"""

from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greta_stream.query.analyzer import parse_and_analyze
from greta_stream.testing.oracle import complete_trends, enumerate_trends, oracle_rows

ANY, NEXT, CONT = "skip-till-any-match", "skip-till-next-match", "contiguous"


def stream(text, **attrs):
    """'a1, b2' -> events with type 'A', time 1, id 'a1'; attrs: id -> {attr: v}."""
    out = []
    for tok in (t.strip() for t in text.split(",")):
        out.append({"type": tok[0].upper(), "time": int(tok[1:]), "id": tok, **attrs.get(tok, {})})
    return out


def query(pattern, strategy=ANY, where="", group="", returns="COUNT(*)"):
    """A query over one 100 s window."""
    where = f" WHERE {where}" if where else ""
    group = f" GROUP-BY {group}" if group else ""
    return parse_and_analyze(
        f"RETURN {returns} PATTERN {pattern} SEMANTICS {strategy}{where}{group} WITHIN 100 s"
    )


def trends(pattern, events, strategy=ANY, **kw):
    """The trends as sorted strings 'a1 b2' (ids only), all groups together."""
    found = enumerate_trends(query(pattern, strategy, **kw), events)
    return sorted(" ".join(eid for eid, _ in t) for ts in found.values() for t in ts)


def bound(pattern, events, strategy=ANY, **kw):
    """The trends as sorted strings 'a1:x a2:y' (ids and aliases)."""
    found = enumerate_trends(query(pattern, strategy, **kw), events)
    return sorted(" ".join(f"{e}:{a}" for e, a in t) for ts in found.values() for t in ts)


def counts(pattern, events, **kw):
    """Number of trends under each strategy, (any, next, contiguous)."""
    return tuple(len(trends(pattern, events, s, **kw)) for s in (ANY, NEXT, CONT))


# ------------------------------------------------------------ section 8's own examples


def test_kleene_plus_three_events():
    events = stream("a1, a2, a3")
    six = ["a1", "a1 a2", "a1 a2 a3", "a2", "a2 a3", "a3"]
    assert trends("A+", events, NEXT) == six
    assert trends("A+", events, CONT) == six  # a1 a3 skips a2
    assert trends("A+", events, ANY) == sorted(six + ["a1 a3"])


def test_two_aliases_of_one_type():
    events = stream("a1, a2, a3")
    # any: x=a1 y=a2 | x=a1 y=a3 | x=a2 y=a3 | x=a1a2 y=a3 | x=a1 y=a2a3
    assert len(bound("SEQ(A x+, A y+)", events, ANY)) == 5
    # x=a1 y=a3 skips a2, a candidate for y after x (and not contiguous)
    expected = ["a1:x a2:x a3:y", "a1:x a2:y", "a1:x a2:y a3:y", "a2:x a3:y"]
    assert bound("SEQ(A x+, A y+)", events, NEXT) == expected
    assert bound("SEQ(A x+, A y+)", events, CONT) == expected


# ------------------------------------------------------------ edge predicates


def test_edge_predicate_next_match_differs_from_any_and_contiguous():
    events = stream("a1, a2, a3, a4", a1={"v": 1}, a2={"v": 0}, a3={"v": 2}, a4={"v": 3})
    pattern, where = "A+", "A.v < NEXT(A).v"
    # any: strictly increasing v: 4 singletons, a1a3 a1a4 a2a3 a2a4 a3a4, a1a3a4 a2a3a4
    assert len(trends(pattern, events, ANY, where=where)) == 11
    # next: a1a3 keeps (a2 fails 1 < 0, no candidate); a1a4 skips a3 (1 < 2), a2a4 skips a3
    assert trends(pattern, events, NEXT, where=where) == [
        "a1", "a1 a3", "a1 a3 a4", "a2", "a2 a3", "a2 a3 a4", "a3", "a3 a4", "a4",
    ]
    # contiguous: only time-neighbours; a1 a2 fails the predicate
    assert trends(pattern, events, CONT, where=where) == [
        "a1", "a2", "a2 a3", "a2 a3 a4", "a3", "a3 a4", "a4",
    ]


def test_candidate_needs_local_predicate_contiguity_does_not():
    events = stream("a1, a2, a3", a1={"v": 1}, a2={"v": -1}, a3={"v": 2})
    # a2 fails A.v > 0: it is in no trend and no candidate, but it breaks contiguity
    assert trends("A+", events, NEXT, where="A.v > 0") == ["a1", "a1 a3", "a3"]
    assert trends("A+", events, CONT, where="A.v > 0") == ["a1", "a3"]


def test_bad_event_does_not_break_contiguity():
    events = stream("a1, a2, a3", a1={"v": 1}, a3={"v": 2})  # a2 lacks v: a bad event
    assert trends("A+", events, CONT, where="A.v > 0") == ["a1", "a1 a3", "a3"]


def test_edge_predicate_across_optional_part():
    events = stream("a1, b2, c3, c4", a1={"v": 5}, c3={"v": 1}, c4={"v": 9}, b2={"v": 0})
    where = "A.v < NEXT(C).v"
    # any: a1 c4 (5 < 9), a1 b2 c3, a1 b2 c4 (A and C not adjacent there); a1 c3 fails 5 < 1
    assert trends("SEQ(A, B?, C)", events, ANY, where=where) == ["a1 b2 c3", "a1 b2 c4", "a1 c4"]
    # next: a1 c4 skips no C that may follow a1 (c3 fails the edge predicate); a1 b2 c4 skips c3
    assert trends("SEQ(A, B?, C)", events, NEXT, where=where) == ["a1 b2 c3", "a1 c4"]
    # contiguous: only a1 b2 c3 skips nothing
    assert trends("SEQ(A, B?, C)", events, CONT, where=where) == ["a1 b2 c3"]


# ------------------------------------------------------------ equal times


def test_equal_times_both_next():
    events = [
        {"type": "A", "time": 1, "id": "a1"},
        {"type": "A", "time": 2, "id": "p2"},
        {"type": "A", "time": 2, "id": "q2"},
        {"type": "A", "time": 3, "id": "a3"},
    ]
    # any: one of {-, a1} x {-, p2, q2} x {-, a3}, not empty: 2 * 3 * 2 - 1 = 11
    assert len(trends("A+", events, ANY)) == 11
    # next and contiguous: a1 a3 skips p2 and q2; p2 and q2 are both next after a1
    expected = ["a1", "a1 p2", "a1 p2 a3", "a1 q2", "a1 q2 a3", "a3", "p2", "p2 a3", "q2", "q2 a3"]
    assert trends("A+", events, NEXT) == sorted(expected)
    assert trends("A+", events, CONT) == sorted(expected)


def test_equal_time_with_y_is_not_between():
    events = [
        {"type": "A", "time": 1, "id": "a1"},
        {"type": "B", "time": 3, "id": "b3"},
        {"type": "B", "time": 3, "id": "c3"},
    ]
    for strategy in (ANY, NEXT, CONT):
        assert trends("SEQ(A, B)", events, strategy) == ["a1 b3", "a1 c3"]


# ------------------------------------------------------------ partitions


def test_group_by_other_partitions_do_not_break_contiguity():
    events = stream(
        "a1, a2, a3, b4, b5",
        a1={"k": 1}, a2={"k": 2}, a3={"k": 1}, b4={"k": 1}, b5={"k": 2},
    )
    q = "SEQ(A+, B)"
    # any: k=1: a1 b4, a3 b4, a1 a3 b4; k=2: a2 b5
    assert trends(q, events, ANY, group="k") == ["a1 a3 b4", "a1 b4", "a2 b5", "a3 b4"]
    # next: a1 b4 skips a3, but a3 is no B (no B lies between a1 and b4): all four kept
    assert trends(q, events, NEXT, group="k") == ["a1 a3 b4", "a1 b4", "a2 b5", "a3 b4"]
    # contiguous: a1 b4 skips a3 of its partition; a2 (k=2) does not break a1 a3,
    # nor do a3 and b4 (k=1) break a2 b5
    assert trends(q, events, CONT, group="k") == ["a1 a3 b4", "a2 b5", "a3 b4"]
    found = enumerate_trends(query(q, CONT, group="k"), events)
    assert sorted(found) == [(0, 100, (1,)), (0, 100, (2,))]


def test_partial_equivalence_contiguity_uses_attributes_of_every_alias():
    events = stream("a1, a2, a3, b4", a1={"k": 1}, a2={"k": 2}, a3={"k": 1})
    q, where = "SEQ(A+, B)", "[A.k]"
    # any: k=1: a1 b4, a3 b4, a1 a3 b4; k=2: a2 b4
    assert trends(q, events, ANY, where=where) == ["a1 a3 b4", "a1 b4", "a2 b4", "a3 b4"]
    # next: a candidate for an A is an A with the trend's k; for b4, a B: there is none
    assert trends(q, events, NEXT, where=where) == ["a1 a3 b4", "a1 b4", "a2 b4", "a3 b4"]
    # contiguous: k applies to A only, so every A and B lies in every trend's partition
    assert trends(q, events, CONT, where=where) == ["a3 b4"]


def test_other_types_never_break_contiguity():
    events = stream("a1, c2, a3")
    assert trends("A+", events, CONT) == ["a1", "a1 a3", "a3"]


# ------------------------------------------------------------ negation


def test_middle_not_with_strategies():
    events = stream("a1, n2, a3, b4, b5")
    q = "SEQ(A+, NOT N, B)"
    # any: a1 .. b excluded by n2; a3 b4, a3 b5, a1 a3 b4, a1 a3 b5 (A->A crosses no NOT)
    assert trends(q, events, ANY) == ["a1 a3 b4", "a1 a3 b5", "a3 b4", "a3 b5"]
    # next: b4 is a candidate for B after a3 (no N between a3 and b4): ... b5 skips it
    assert trends(q, events, NEXT) == ["a1 a3 b4", "a3 b4"]
    # contiguous: n2, of a negative type, lies between a1 and a3
    assert trends(q, events, CONT) == ["a3 b4"]


def test_middle_not_candidate_must_clear_the_not():
    # the step A -> B crosses N, the loop B -> B does not
    events = stream("a1, b2, n3, b4")
    q = "SEQ(A, NOT N, B+)"
    # any: a1 b2, a1 b2 b4 (b2 -> b4 is the loop); a1 b4 has n3 between
    assert trends(q, events, ANY) == ["a1 b2", "a1 b2 b4"]
    assert trends(q, events, NEXT) == ["a1 b2", "a1 b2 b4"]
    assert trends(q, events, CONT) == ["a1 b2"]  # n3 between b2 and b4


def test_negative_pattern_stays_skip_till_any_match():
    # N = SEQ(C, D): c1 ... d4 is a match even though c3 lies between them
    events = stream("a0, c1, c3, d4, b5")
    q = "SEQ(A, NOT SEQ(C, D), B)"
    for strategy in (ANY, NEXT, CONT):
        assert trends(q, events, strategy) == []


def test_trailing_and_leading_not_with_next_match():
    events = stream("a2, e3, a4")
    # leading: a4 has e3 before it; a2 a4 skips no A; e3 (a negative type) breaks contiguity
    assert trends("SEQ(NOT E, A+)", events, NEXT) == ["a2", "a2 a4"]
    assert trends("SEQ(NOT E, A+)", events, CONT) == ["a2"]
    # trailing: a2 has e3 after it
    assert trends("SEQ(A+, NOT E)", events, NEXT) == ["a2 a4", "a4"]
    assert trends("SEQ(A+, NOT E)", events, CONT) == ["a4"]


# ------------------------------------------------------------ bounded repetition


def test_exactly_two():
    events = stream("a1, a2, a3")
    assert trends("A{2}", events, ANY) == ["a1 a2", "a1 a3", "a2 a3"]
    assert trends("A{2}", events, NEXT) == ["a1 a2", "a2 a3"]
    assert trends("A{2}", events, CONT) == ["a1 a2", "a2 a3"]


def test_two_to_three():
    events = stream("a1, a2, a3, a4")
    assert len(trends("A{2,3}", events, ANY)) == 6 + 4
    consecutive = ["a1 a2", "a1 a2 a3", "a2 a3", "a2 a3 a4", "a3 a4"]
    assert trends("A{2,3}", events, NEXT) == consecutive
    assert trends("A{2,3}", events, CONT) == consecutive


def test_two_or_more():
    events = stream("a1, a2, a3")
    assert trends("A{2,}", events, ANY) == ["a1 a2", "a1 a2 a3", "a1 a3", "a2 a3"]
    assert trends("A{2,}", events, NEXT) == ["a1 a2", "a1 a2 a3", "a2 a3"]


def test_optional():
    events = stream("a1, b2, c3")
    assert trends("SEQ(A, B?, C)", events, ANY) == ["a1 b2 c3", "a1 c3"]
    assert trends("SEQ(A, B?, C)", events, NEXT) == ["a1 b2 c3", "a1 c3"]  # b2 is no C
    assert trends("SEQ(A, B?, C)", events, CONT) == ["a1 b2 c3"]
    assert trends("SEQ(A, B?, C)", stream("a1, b2, b3, c4"), ANY) == [
        "a1 b2 c4", "a1 b3 c4", "a1 c4",
    ]


def test_star():
    events = stream("a1, b2, b3, c4")
    assert trends("SEQ(A, B*, C)", events, ANY) == ["a1 b2 b3 c4", "a1 b2 c4", "a1 b3 c4", "a1 c4"]
    # a1 b3 c4 skips b2, a B that may follow a1
    assert trends("SEQ(A, B*, C)", events, NEXT) == ["a1 b2 b3 c4", "a1 b2 c4", "a1 c4"]
    assert trends("SEQ(A, B*, C)", events, CONT) == ["a1 b2 b3 c4"]


def test_zero_to_two():
    events = stream("a1, b2, b3, b4, c5")
    # any: no B, one of three, two of three
    assert len(trends("SEQ(A, B{0,2}, C)", events, ANY)) == 1 + 3 + 3
    assert trends("SEQ(A, B{0,2}, C)", events, NEXT) == ["a1 b2 b3 c5", "a1 b2 c5", "a1 c5"]
    assert trends("SEQ(A, B{0,2}, C)", events, CONT) == []  # three B in a row: none fits
    assert trends("SEQ(A, B{0,2}, C)", stream("a1, b2, b3, c5"), CONT) == ["a1 b2 b3 c5"]


def test_group_repetition():
    events = stream("a1, b2, a3, b4, a5, b6")
    q = "(SEQ(A, B)){2}"
    # any: a b a b in time order: a1b2a3b4 a1b2a3b6 a1b2a5b6 a1b4a5b6 a3b4a5b6
    assert len(trends(q, events, ANY)) == 5
    assert trends(q, events, NEXT) == ["a1 b2 a3 b4", "a3 b4 a5 b6"]
    assert trends(q, events, CONT) == ["a1 b2 a3 b4", "a3 b4 a5 b6"]
    events = stream("a1, a2, b3, a4, b5")
    # next: a1 b3 skips a2, but a2 is no B; contiguous: a2 lies between a1 and b3
    assert trends(q, events, ANY) == ["a1 b3 a4 b5", "a2 b3 a4 b5"]
    assert trends(q, events, NEXT) == ["a1 b3 a4 b5", "a2 b3 a4 b5"]
    assert trends(q, events, CONT) == ["a2 b3 a4 b5"]


def test_repeated_group_of_one_binding_is_one_trend():
    events = stream("a1, b2, a3, b4")
    assert bound("(SEQ(A, B)){1,2}", events, ANY).count("a1:A b2:B a3:A b4:B") == 1


# ------------------------------------------------------------ the GRETA paper streams

S1 = stream("a1, b2, a3, a4, b7", a1={"attr": 5}, a3={"attr": 6}, a4={"attr": 4})
S_I = stream("a1, b2, c2, a3, e3, a4, c5, d6, b7, a8, b9")


@pytest.mark.parametrize(
    "pattern, expected",
    [
        # A's: a1 a3 a4 a8; any = C(4, 2); next / contiguous: consecutive A's
        ("A{2}", (6, 3, 3)),
        # any: a1a3, a1a4, a3a4 -> b7 or b9 (6), a1a8, a3a8, a4a8 -> b9 (3);
        # next: a1a3 b7, a3a4 b7, a4a8 b9; contiguous: a3 a4 b7 (b2 between a1, a3; b7 between a4, a8)
        ("SEQ(A{2}, B)", (9, 3, 1)),
        # plus triples: a1a3a4 -> b7 | b9, a1a3a8, a1a4a8, a3a4a8 -> b9 (5);
        # next adds a1a3a4 b7 and a3a4a8 b9; contiguous adds none
        ("SEQ(A{2,3}, B)", (14, 5, 1)),
        # next: 10 runs of consecutive A's, each to the first B after it;
        # contiguous: a1 b2, a4 b7, a3 a4 b7, a8 b9
        ("SEQ(A+, B)", (23, 10, 4)),
        ("A+", (15, 10, 10)),
    ],
)
def test_paper_stream(pattern, expected):
    assert counts(pattern, S_I) == expected


def test_paper_stream_contiguous_trends():
    assert trends("SEQ(A+, B)", S_I, CONT) == ["a1 b2", "a3 a4 b7", "a4 b7", "a8 b9"]
    assert trends("SEQ(A{2,3}, B)", S_I, NEXT) == [
        "a1 a3 a4 b7", "a1 a3 b7", "a3 a4 a8 b9", "a3 a4 b7", "a4 a8 b9",
    ]


def test_paper_aggregates_by_strategy():
    returns = "COUNT(*), COUNT(A), SUM(A.attr), MIN(A.attr), MAX(A.attr), AVG(A.attr)"
    cols = ["count", "count_A", "sum_A_attr", "min_A_attr", "max_A_attr", "avg_A_attr"]

    def row(strategy):
        [r] = oracle_rows(query("SEQ(A+, B)", strategy, returns=returns), S1)
        return tuple(r[c] for c in cols)

    # next: a1 b2, a3 b7, a4 b7, a1a3 b7, a3a4 b7, a1a3a4 b7
    assert row(NEXT) == (6, 10, 51, 4, 6, 5.1)
    # contiguous: a1 b2, a4 b7, a3 a4 b7
    assert row(CONT) == (3, 4, 19, 4, 6, 4.75)
    assert row(ANY)[:3] == (8, 13, 65)


def test_complete_trends_under_next_match():
    q = query("A+", NEXT)
    assert complete_trends(q, stream("a1, a2, a3")) == {
        (0, 100, ()): [(("a1", "A"), ("a2", "A"), ("a3", "A"))]
    }
    q = query("SEQ(A+, B)", CONT)
    assert sorted(complete_trends(q, S1)[(0, 100, ())]) == [
        (("a1", "A"), ("b2", "B")),
        (("a3", "A"), ("a4", "A"), ("b7", "B")),
    ]


# ------------------------------------------------------------ properties

TYPES = "AB"


@st.composite
def events_st(draw):
    """Up to 10 events of types A, B (and C, outside every pattern), times 0..6, v 0..2, k 0..1."""
    n = draw(st.integers(1, 10))
    return [
        {
            "type": draw(st.sampled_from("AABBC")),
            "time": draw(st.integers(0, 6)),
            "id": i,
            "v": draw(st.integers(0, 2)),
            "k": draw(st.integers(0, 1)),
        }
        for i in range(n)
    ]


PATTERNS = [
    ("A+", ""),
    ("SEQ(A+, B)", "A.v <= NEXT(A).v"),
    ("SEQ(A, B?, A a2)", ""),
    ("SEQ(A, B*, A a2+)", "B.v > 0"),
    ("(SEQ(A, B)){1,2}", "[k]"),
    ("SEQ(A{2,3}, NOT C, B)", "A.v < NEXT(B).v"),
]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _set(pattern, events, strategy, where=""):
    found = enumerate_trends(query(pattern, strategy, where=where), events)
    return {(key, t) for key, ts in found.items() for t in ts}


@SETTINGS
@given(events=events_st(), which=st.sampled_from(PATTERNS))
def test_contiguous_within_next_within_any(events, which):
    """A candidate breaks contiguity, so contiguous <= next <= any."""
    pattern, where = which
    any_, next_, cont = (_set(pattern, events, s, where) for s in (ANY, NEXT, CONT))
    assert cont <= next_ <= any_
    for (_, _, _), trend in any_:
        assert len(set(trend)) == len(trend)


def _brute(events, lo, hi, strategy):
    """Trends of A{lo,hi} straight from the definitions, no predicates."""
    a = sorted((e for e in events if e["type"] == "A"), key=lambda e: e["time"])
    out = set()
    for size in range(lo, (hi or len(a)) + 1):
        for combo in combinations(a, size):
            times = [e["time"] for e in combo]
            if any(s >= t for s, t in zip(times, times[1:])):
                continue
            if strategy == ANY or not any(
                s < e["time"] < t for s, t in zip(times, times[1:]) for e in events if e["type"] == "A"
            ):
                out.add(tuple(sorted(e["id"] for e in combo)))
    return out


@SETTINGS
@given(
    events=events_st(),
    bounds=st.sampled_from([(1, None), (2, None), (2, 2), (2, 3), (1, 3), (3, 3)]),
    strategy=st.sampled_from([ANY, NEXT, CONT]),
)
def test_repetition_against_brute_force(events, bounds, strategy):
    lo, hi = bounds
    text = {(1, None): "A+", (2, None): "A{2,}"}.get(bounds) or (
        f"A{{{lo}}}" if lo == hi else f"A{{{lo},{hi}}}"
    )
    found = enumerate_trends(query(text, strategy), events)
    got = {tuple(sorted(eid for eid, _ in t)) for ts in found.values() for t in ts}
    assert sum(len(ts) for ts in found.values()) == len(got)
    assert got == _brute(events, lo, hi, strategy)


@SETTINGS
@given(events=events_st())
def test_optional_part_is_union_under_any_match(events):
    """SEQ(A, B?, A a2) has the trends of SEQ(A, A a2) and of SEQ(A, B, A a2);
    the edge predicate between A and a2 applies only where they are adjacent."""
    where = "A.v <= NEXT(a2).v"
    assert _set("SEQ(A, B?, A a2)", events, ANY, where) == (
        _set("SEQ(A, A a2)", events, ANY, where) | _set("SEQ(A, B, A a2)", events, ANY)
    )
