"""A Kleene plus over a SEQ (`(SEQ(A+, B))+`, GRETA's template looping back from the SEQ's end to its start;
middle NOTs of one event or of a SEQ in it, each iteration's)
on the columnar engine, against the general engine, the oracle and through micro-batches with restores.

Dense streams of two types over a few seconds, so that trends run through several iterations of the SEQ:
sparse random streams (test_columnar_seq.py) seldom hold a second iteration. The SEQ alone is drawn too:
dense streams give its Kleene parts long runs (two loops, each with its own edge predicate).
"""

from __future__ import annotations

from columnar_support import dense_events as dense
from columnar_support import differential_tests, shape_queries
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream import RunSpec
from greta_stream.query import ast

PARTS = [("A a+", "B b"), ("A a", "A b+"), ("A a+", "A b"), ("A a", "B b+", "A c"), ("B b", "A a"), ("A a+", "B b+")]
EDGES = ["", "a.v > NEXT(a).v", "b.v <= NEXT(b).v", "a.v < NEXT(b).v", "(a.v > NEXT(a).v OR a.f < NEXT(a).f)"]
AGGS = ["COUNT(*)", "SUM(a.v)", "MAX(a.f)", "MIN(b.v)", "AVG(b.f)", "COUNT(a)"]


@st.composite
def loop_query(draw) -> str:  # noqa: ANN001
    parts = draw(st.sampled_from(PARTS))
    aliases = {p.split()[1].rstrip("+") for p in parts}
    kleene = {p.split()[1].rstrip("+") for p in parts if p.endswith("+")}
    edges = [e for e in EDGES if e and _fits(e, aliases, kleene, parts)]
    where = [e for e in edges if draw(st.integers(0, 2))]  # each mostly in: two loops with one each, say
    if draw(st.booleans()):
        where.append("[k]")
    of_aliases = [a for a in AGGS[1:] if a[a.index("(") + 1] in aliases]  # `SUM(a.v)`: of alias a
    aggs = ["COUNT(*)", *(a for a in of_aliases if draw(st.booleans()))]
    group = draw(st.sampled_from(["", "g"]))
    within = draw(st.integers(3, 12))
    slide = draw(st.integers(1, within))
    seq = f"SEQ({', '.join(parts)})"
    pattern = f"({seq})+" if draw(st.integers(0, 3)) else seq  # mostly the loop; the SEQ alone, densely
    strategy = draw(st.sampled_from(ast.STRATEGIES))  # the loop's step back is a transition of its own
    return (f"RETURN {group + ', ' if group else ''}{', '.join(aggs)} PATTERN {pattern} SEMANTICS {strategy} "
            + (f"WHERE {' AND '.join(where)} " if where else "")
            + (f"GROUP-BY {group} " if group else "") + f"WITHIN {within} s SLIDE {slide} s")


def _fits(edge: str, aliases: set[str], kleene: set[str], parts: tuple[str, ...]) -> bool:
    """The edge predicate's aliases are in the pattern: a loop of a Kleene alias, or two adjacent positions."""
    order = [p.split()[1].rstrip("+") for p in parts]
    x, y = edge.strip("(").split(".")[0], edge.split("NEXT(")[1].split(")")[0]
    if x not in aliases or y not in aliases:
        return False
    return x in kleene if x == y else order.index(y) == order.index(x) + 1


def dense_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AAB", n_max=n_max, seconds=14, max_v=4)


(test_a_kleene_plus_over_a_seq_equals_the_general_engine, test_a_kleene_plus_over_a_seq_equals_the_oracle,
 test_a_kleene_plus_over_a_seq_streamed_equals_the_general_engine) = differential_tests(loop_query(), dense_events, (150, 60, 60), oracle_events=9)


def test_several_iterations_count() -> None:
    """a1 b1 a2 b2 in one window: trends a1 b1, a1 b2, a2 b2, a1 a2 b2 (A+ takes a1 a2) and a1 b1 a2 b2 (two
    iterations)."""
    events = [{"type": t, "time": i, "v": 0, "f": 0.5, "k": 0, "g": 0, "id": i} for i, t in enumerate("ABAB")]
    rows = evaluate("RETURN COUNT(*) PATTERN (SEQ(A a+, B b))+ WITHIN 10 s", events, engine="columnar")
    assert rows.engine == "columnar" and [r["count"] for r in rows] == [5]


NEGATED = [  # (SEQ with middle NOTs, edge predicates it may take): each iteration's steps across its NOTs
    ("(SEQ(A a+, NOT C c, B b))+", ["a.v < NEXT(a).v", "a.v >= NEXT(b).v"]),
    ("(SEQ(A a+, NOT SEQ(C c, D d), B b))+", ["a.v > NEXT(a).v"]),
    ("(SEQ(A a, NOT C c, A b+, NOT D d, B e))+", ["b.v <= NEXT(b).v"]),
    ("(SEQ(A a+, NOT B c, B b))+", ["a.v != NEXT(a).v"]),  # the negated type is the last part's
]


@st.composite
def loop_not_query(draw) -> str:  # noqa: ANN001
    pattern, edges = draw(st.sampled_from(NEGATED))
    where = [e for e in edges if draw(st.integers(0, 2))] + (["c.v > 1"] if draw(st.booleans()) else [])
    if draw(st.booleans()):
        where.append("[k]")
    within = draw(st.integers(3, 12))
    strategy = draw(st.sampled_from(ast.STRATEGIES))
    return (f"RETURN COUNT(*), SUM(a.v), MAX(a.f) PATTERN {pattern} SEMANTICS {strategy} "
            + (f"WHERE {' AND '.join(where)} " if where else "") + f"WITHIN {within} s SLIDE {draw(st.integers(1, 3))} s")


def negated_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AAABBCD", n_max=n_max, seconds=14, max_v=4)


(test_a_kleene_plus_over_a_seq_with_nots_equals_the_general_engine,
 test_a_kleene_plus_over_a_seq_with_nots_equals_the_oracle,
 test_a_kleene_plus_over_a_seq_with_nots_streamed_equals_the_general_engine) = differential_tests(
    loop_not_query(), negated_events, (150, 60, 40), oracle_events=9)


def test_a_not_between_parts_holds_in_every_iteration_but_not_across_the_loop() -> None:
    """a1 b2 c3 a4 b5: `(SEQ(A, NOT C, B))+` has a1 b2, a4 b5 and a1 b2 a4 b5 (c3 lies between b2 and a4, an
    adjacency of the loop, not of the SEQ); with c between a4 and b5 instead, only a1 b2."""
    def count(types: str) -> int:
        events = [{"type": t, "time": i + 1} for i, t in enumerate(types)]
        rows = evaluate("RETURN COUNT(*) PATTERN (SEQ(A a, NOT C c, B b))+ WITHIN 10 s", events, engine="columnar")
        assert rows.engine == "columnar"
        return sum(r["count"] for r in rows)

    assert count("ABCAB") == 3
    assert count("ABACB") == 1


OPTIONAL = [  # (a Kleene plus over a SEQ with optional parts, edge predicates it may take, alias it aggregates)
    ("(SEQ(A a+, B b?))+", ["a.v > NEXT(a).v", "a.v <= NEXT(b).v"], "a"),
    ("(SEQ(A a, B b?))+", ["a.v < NEXT(b).v", "a.v < NEXT(a).v", "b.v > NEXT(a).v"], "a"),  # the loop's steps too
    ("(SEQ(A a?, B b))+", ["a.f >= NEXT(b).f", "b.v <= NEXT(b).v", "b.f != NEXT(a).f"], "b"),
    ("(SEQ(A a, B b?, C c))+", ["a.v < NEXT(c).v", "b.v != NEXT(c).v"], "c"),
    ("(SEQ(A a?, B b+, C c?))+", ["b.v >= NEXT(b).v", "b.v < NEXT(c).v"], "b"),
    ("(SEQ(B b, A a*))+", ["a.v > NEXT(a).v", "b.v < NEXT(a).v"], "a"),
]
OPTIONAL_QUERY = shape_queries(OPTIONAL, ["a.v > 0", "b.f < 2", "c.v < 3"],
                               ["COUNT(*)", "SUM({agg}.v)", "MAX({agg}.f)", "AVG({agg}.v)"])


def optional_events(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return dense(types="AABBC", n_max=n_max, seconds=14, max_v=4)


(test_a_kleene_plus_over_a_seq_with_optional_parts_equals_the_general_engine,
 test_a_kleene_plus_over_a_seq_with_optional_parts_equals_the_oracle,
 test_a_kleene_plus_over_a_seq_with_optional_parts_streamed_equals_the_general_engine) = differential_tests(
    OPTIONAL_QUERY, optional_events, (300, 200, 80), oracle_events=9)


def test_a_trend_counts_once_however_it_is_cut_into_iterations() -> None:
    """a1 a2 b3: `(SEQ(A+, B?))+` reads a1 a2 as one iteration (A+ of two) or two (B left out of the first):
    one trend. The trends: a1, a2, a1 a2, a1 b3, a2 b3, a1 a2 b3 (b3 alone is none: an iteration starts at
    A): 6."""
    events = [{"type": t, "time": i + 1} for i, t in enumerate("AAB")]
    text = "RETURN COUNT(*) PATTERN (SEQ(A a+, B b?))+ WITHIN 10 s"
    assert RunSpec.create(text).columnar_refusal == ""
    rows = evaluate(text, events, engine="columnar")
    assert rows.engine == "columnar" and sum(r["count"] for r in rows) == 6
