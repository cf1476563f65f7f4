"""Selection strategies and bounded repetition (SEMANTICS section 8): the
engine against the brute-force oracle.

Random small queries mix the three strategies with every quantifier (`+`,
`{n}`, `{n,m}`, `{n,}`, `?`, `*`, `{0,m}`) over single events and groups,
the same type under several aliases, middle, leading and trailing NOTs,
local, edge and equivalence predicates (on every alias and on some only),
GROUP-BY, every aggregate (AVG, MIN and MAX of an alias that a part matching
nothing leaves out are null) and sliding windows, over streams with frequent
equal times and events of types outside the pattern. A query the analyzer
refuses is skipped (its refusal is tested in tests/query). The targeted tests
pin the worked examples of the section.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked
from test_differential import SETTINGS, check, compiles

from greta_stream import compile_query
from greta_stream.query import ast

STRATEGIES = ast.STRATEGIES
REPEATS = ("+", "{2}", "{2,3}", "{3}", "{2,}", "{1,2}")
OPTIONAL = ("?", "*", "{0,2}")


class _Aliases:
    def __init__(self) -> None:
        self.n = 0
        self.positive: list[str] = []
        self.negative: list[str] = []

    def new(self, etype: str, negative: bool = False) -> str:
        self.n += 1
        alias = f"{etype.lower()}{self.n}"
        (self.negative if negative else self.positive).append(alias)
        return f"{etype} {alias}"


@st.composite
def _part(draw, names: _Aliases, depth: int) -> str:  # noqa: ANN001
    """A positive part that matches at least one event."""
    if depth < 1 and draw(st.integers(0, 3)) == 0:
        inner = [draw(_part(names, depth + 1)) for _ in range(2)]
        group = f"SEQ({', '.join(inner)})"
        return group + draw(st.sampled_from(("+", "{2}", "")))
    ev = names.new(draw(st.sampled_from("AB")))
    return ev + draw(st.sampled_from(("",) + REPEATS))


@st.composite
def patterns(draw) -> tuple[str, _Aliases]:  # noqa: ANN001
    names = _Aliases()
    if draw(st.booleans()):
        return draw(_part(names, 0)), names
    parts: list[str] = []
    for i in range(draw(st.integers(2, 3))):
        if i and draw(st.integers(0, 4)) == 0 and not parts[-1].startswith("NOT"):
            parts.append("NOT " + names.new("E", negative=True))
        if draw(st.integers(0, 2)) == 0:
            parts.append(names.new(draw(st.sampled_from("ABC"))) + draw(st.sampled_from(OPTIONAL)))
        else:
            parts.append(draw(_part(names, 1)))
    if draw(st.integers(0, 5)) == 0:
        parts.insert(0, "NOT " + names.new("E", negative=True))
    if draw(st.integers(0, 5)) == 0:
        parts.append("NOT " + names.new("C", negative=True))
    return f"SEQ({', '.join(parts)})", names


@st.composite
def queries(draw) -> str:  # noqa: ANN001
    pattern, names = draw(patterns())
    pos = names.positive
    where: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(("edge", "edge", "local", "equiv")))
        x = draw(st.sampled_from(pos))
        if kind == "edge":
            y = draw(st.sampled_from(pos))
            where.append(f"{x}.v {draw(st.sampled_from(('<', '<=', '!=', '>')))} NEXT({y}).v")
        elif kind == "local":
            where.append(f"{draw(st.sampled_from(pos + names.negative))}.v > 0")
        else:
            where.append(draw(st.sampled_from(("[h]", f"[{x}.h]"))))
    group = draw(st.booleans())
    agg = draw(st.sampled_from(pos))
    items = ["g"] if group else []
    items += ["COUNT(*)", f"COUNT({agg})", f"SUM({agg}.v)", f"MIN({agg}.v)", f"MAX({agg}.w)", f"AVG({agg}.w)"]
    text = (f"RETURN {', '.join(items)} PATTERN {pattern} SEMANTICS {draw(st.sampled_from(STRATEGIES))}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + (" GROUP-BY g" if group else "")
            + draw(st.sampled_from((" WITHIN 10 s", " WITHIN 6 s SLIDE 2 s", " WITHIN 4 s SLIDE 1 s"))))
    return text


def _events(max_size: int) -> st.SearchStrategy[list[dict]]:
    return st.lists(
        st.fixed_dictionaries({
            "type": st.sampled_from("AABBCEF"),
            "time": st.integers(0, 7),
            "v": st.integers(0, 3),
            "w": st.sampled_from((0.5, 1.25, 2, -1)),
            "g": st.integers(0, 1),
            "h": st.integers(0, 1),
        }),
        max_size=max_size,
    ).map(lambda evs: [dict(e, id=i) for i, e in enumerate(evs)])


@settings(max_examples=300, **SETTINGS)
@given(text=queries(), events=_events(8))
def test_strategies_and_repetitions_equal_the_oracle(text: str, events: list[dict]) -> None:
    assume(compiles(text))
    check(text, events)


@settings(max_examples=60, **SETTINGS)
@given(strategy=st.sampled_from(STRATEGIES), events=_events(10))
def test_kleene_with_an_edge_predicate_under_each_strategy(strategy: str, events: list[dict]) -> None:
    """The shape of SEMANTICS section 8's comparison with Flink CEP, per partition."""
    check(f"RETURN g, COUNT(*), SUM(A.v), MAX(A.v) PATTERN A+ SEMANTICS {strategy} "
          "WHERE [g] AND A.v < NEXT(A).v GROUP-BY g WITHIN 10 s", events)


# ------------------------------------------------------------ worked examples

A3 = [{"type": "A", "time": t, "id": f"a{t}"} for t in (1, 2, 3)]


def _count(text: str, events: list[dict]) -> int:
    rows = list(evaluate(text, events))
    return rows[0]["count"] if rows else 0


def test_the_sections_example_a1_a2_a3() -> None:
    """`A+` over a1 a2 a3: every subsequence (7) under skip-till-any-match;
    a1, a1a2, a1a2a3, a2, a2a3, a3 under the other two."""
    counts = {s: _count(f"RETURN COUNT(*) PATTERN A+ SEMANTICS {s} WITHIN 10 s", A3) for s in STRATEGIES}
    assert counts == {ast.ANY_MATCH: 7, ast.NEXT_MATCH: 6, ast.CONTIGUOUS: 6}


def test_next_match_takes_the_earliest_candidate_and_contiguous_the_next_event() -> None:
    events = [{"type": "A", "time": t, "v": v, "id": f"a{t}"} for t, v in ((1, 5), (2, 3), (3, 6), (4, 4))]
    base = "RETURN COUNT(*) PATTERN A+ SEMANTICS {} WHERE A.v < NEXT(A).v WITHIN 10 s"
    # any: 4 singles + (5,6) (3,6) (3,4); next: a2 -> a3 only (a3 is a2's first candidate);
    # contiguous: only a2 a3 are neighbours with a rising value.
    assert [_count(base.format(s), events) for s in STRATEGIES] == [7, 6, 5]


def test_equal_times_are_both_next() -> None:
    events = [{"type": "A", "time": 1, "id": "a1"}, {"type": "A", "time": 2, "id": "b2"},
              {"type": "A", "time": 2, "id": "c2"}, {"type": "A", "time": 3, "id": "d3"}]
    # a1 -> b2 and a1 -> c2 (both next), each -> d3: singles 4, pairs 4, triples 2.
    assert _count("RETURN COUNT(*) PATTERN A+ SEMANTICS contiguous WITHIN 10 s", events) == 10
    assert _count("RETURN COUNT(*) PATTERN A+ SEMANTICS skip-till-next-match WITHIN 10 s", events) == 10


def test_other_partitions_and_types_never_break_contiguity() -> None:
    events = [{"type": "A", "time": 1, "g": 1}, {"type": "A", "time": 2, "g": 2}, {"type": "F", "time": 3, "g": 1},
              {"type": "A", "time": 4, "g": 1}]
    rows = list(evaluate("RETURN g, COUNT(*) PATTERN A+ SEMANTICS contiguous GROUP-BY g WITHIN 10 s", events))
    assert [(r["g"], r["count"]) for r in rows] == [(1, 3), (2, 1)]


def test_optional_part_makes_its_neighbours_adjacent() -> None:
    events = [{"type": "A", "time": 1, "v": 1}, {"type": "B", "time": 2, "v": 9}, {"type": "C", "time": 3, "v": 2}]
    text = "RETURN COUNT(*), COUNT(B), AVG(B.v) PATTERN SEQ(A, B?, C) WHERE A.v < NEXT(C).v WITHIN 10 s"
    # a1 c3 (the edge A -> C holds) and a1 b2 c3 (A and C not adjacent: the edge does not apply).
    assert list(evaluate(text, events))[0] | {} == {"window_start": 0, "window_end": 10, "count": 2, "count_B": 1,
                                                      "avg_B_v": 9.0}
    only_ac = list(evaluate(text, [events[0], events[2]]))[0]
    assert only_ac["count"] == 1 and only_ac["count_B"] == 0 and only_ac["avg_B_v"] is None


def test_counted_repetitions_count_each_trend_once() -> None:
    events = [{"type": "A", "time": t, "v": t} for t in range(1, 6)]
    for pattern, want in (("A{2}", 10), ("A{2,3}", 20), ("A{2,}", 26), ("SEQ(A a, A b{0,2})", 5 + 10 + 10)):
        assert _count(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 10 s", events) == want, pattern


def test_explain_names_the_selection_and_the_iterations() -> None:
    text = compile_query("RETURN COUNT(*) PATTERN A{2} SEMANTICS contiguous WITHIN 10 s").explain()
    assert "selection: contiguous" in text and "state A#1: A (iteration of A)" in text
