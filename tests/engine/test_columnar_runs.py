"""Equivalence attributes of some positive aliases only (`[a.k]`, `[b.k, c.k]`) on the columnar engine,
against the general engine, the oracle and through micro-batches with restores.

Where the aliases stand at consecutive required positions, the trend's events bound to them are
consecutive in it, so "they all carry one value" is "each step between two of them keeps it": edge
predicates `X.k = NEXT(Y).k` on those steps (`parts.same_value_edges`), a looped group among them with
its step back. Values of ints beside floats (1 beside 1.0 agree); a NOT beside them is not bound by them
(SEMANTICS: such an attribute constrains only the events bound to its aliases). Strings there (beside
numbers) are compared by codes of one kernel run, as Python's `==` compares them (`keys.edge_values`).
"""

from __future__ import annotations

from typing import Any

import pytest
from columnar_support import check_against_general, dense_query, differential_tests, long_run_tests
from columnar_support import dense_events as dense
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream import RunSpec
from greta_stream.engine.columnar import Unsupported
from greta_stream.query import ast

SHAPES = [  # (pattern, its equivalence attribute and edge predicates it may take, alias it aggregates)
    ("SEQ(A a+, B b)", ["[a.k]", "a.v < NEXT(a).v"], "a"),
    ("SEQ(NOT E e, A a+, B b)", ["[a.k]", "a.v >= NEXT(b).v"], "b"),
    ("SEQ(A a, B b+, C c, D d)", ["[b.k, c.k]", "b.v <= NEXT(b).v"], "b"),
    ("SEQ(A a, (SEQ(B b, C c))+, D d)", ["[b.k, c.k]", "b.v < NEXT(c).v"], "c"),
    ("SEQ(A a+, NOT E e, B b+)", ["[b.f]", "[a.k]"], "a"),
    ("SEQ(A a+, B b, C c)", ["[a.f, b.f]", "b.v != NEXT(c).v"], "a"),
]
LOCALS = ["a.v > 0", "b.f < 2", "e.v > 1", "c.v < 3"]
NEGATED_SEQS = [  # an equivalence attribute of some parts of a negated SEQ: a match bounds its value's trends
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[a.k, c.k]", "a.v > NEXT(a).v"], "a"),  # b free: every run near it
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[b.k, d.k]", "c.v < NEXT(d).v"], "b"),  # the second part keyed
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[a.k, b.k, c.k]", "a.v <= NEXT(b).v"], "a"),  # every positive alias
    ("SEQ(NOT SEQ(C c, D d), A a+, B b)", ["[a.k, d.k]", "a.v > NEXT(a).v"], "b"),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", ["[b.k, c.k]", "a.v < NEXT(b).v"], "a"),  # trailing
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", ["[a.k, b.k, d.k]"], "b"),  # trailing, every positive alias
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["[a.k, e.k]", "c.v < NEXT(d).v"], "a"),  # the NOT inside keyed
    ("SEQ(A a, NOT SEQ(C c, D d, C e), B b+)", ["[b.k, c.k, e.k]", "b.v >= NEXT(b).v"], "b"),  # two parts keyed
    ("SEQ(A a+, NOT SEQ(C c, (SEQ(D d, C e))+, D f), B b)", ["[a.k, d.k]", "d.v < NEXT(e).v"], "a"),  # a group
    ("SEQ(A a+, NOT SEQ(C c, D d), B b, NOT E e)", ["[a.k, c.k, e.k]"], "a"),  # beside a keyed single NOT
    ("SEQ(A a, NOT SEQ(A c, B d), B b+)", ["[a.k, c.k]", "b.v >= NEXT(b).v"], "b"),  # parts of positive types
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[a.k, c.k] AND [b.f]", "(c.v < NEXT(d).v AND c.f > NEXT(d).f)"], "b"),
]

TWO_KEYED = [  # two equivalence attributes keying parts of one negated SEQ: a match bounds the trends of both values
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[a.k, c.k] AND [b.j, d.j]", "a.v > NEXT(a).v"], "a"),
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[a.k, c.k] AND [a.j, d.j]"], "a"),  # both of the Kleene's
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[a.k, c.k] AND [b.j, c.j]", "c.v < NEXT(d).v"], "b"),  # one part, two
    ("SEQ(A a+, NOT SEQ(C c, D d), B b)", ["[a.k, b.k, c.k] AND [b.j, d.j]"], "b"),  # one of every positive alias
    ("SEQ(NOT SEQ(C c, D d), A a+, B b)", ["[a.k, c.k] AND [b.j, d.j]", "a.v > NEXT(a).v"], "a"),  # leading
    ("SEQ(A a+, B b, NOT SEQ(C c, D d))", ["[a.k, d.k] AND [b.j, c.j]"], "b"),  # trailing
    ("SEQ(A a+, NOT SEQ(C c, NOT E e, D d), B b)", ["[a.k, e.k] AND [b.j, c.j]"], "a"),  # the NOT inside keyed
    ("SEQ(A a, NOT SEQ(C c, D d, C e), B b+)", ["[b.k, c.k, e.k] AND [a.j, d.j]", "b.v >= NEXT(b).v"], "b"),
    ("SEQ(A a, NOT SEQ(C c, D d), B b+)", ["[a.k, c.k] AND [b.j, d.j]"], "b"),  # the reader looped: a run of j
    ("SEQ(NOT SEQ(C c, D d), A a, B b+)", ["[b.k, d.k] AND [a.j, c.j]"], "b"),  # a, first, reads the leading one
]
# where the alias reading a negated SEQ (the state after a middle one, the first of a leading one, the last of a
# trailing one) is once in every trend, its own value is its trend's: no run under skip-till-any-match


def equivalence_queries(shapes: list[tuple[str, list[str], str]], strategies: tuple[str, ...],
                        ) -> st.SearchStrategy[str]:
    """`dense_query`s of one of `shapes` (pattern, [its equivalence attribute, more predicates it may take],
    alias its aggregates read) under one of `strategies`, the equivalence attribute always in."""
    @st.composite
    def query(draw: Any) -> str:
        pattern, where, agg = draw(st.sampled_from(shapes))
        equivalence, *more = where
        text = dense_query(draw, pattern, more, LOCALS, ["COUNT(*)", f"SUM({agg}.v)", f"MAX({agg}.f)", f"MIN({agg}.v)"],
                           strategies)
        if " WHERE " in text:
            return text.replace(" WHERE ", f" WHERE {equivalence} AND ", 1)
        return text.replace(" GROUP-BY", f" WHERE {equivalence} GROUP-BY", 1) if " GROUP-BY" in text else (
            text.replace(" WITHIN", f" WHERE {equivalence} WITHIN", 1))

    return query()


@st.composite
def run_events(draw: Any, n_max: int = 30) -> list[dict]:
    events = draw(dense(types="AABBCDE", n_max=n_max))
    for e in events:  # ints beside floats and strings (1, 1.0 and True agree, '1' does not), as Python's `==`
        e["k"] = draw(st.sampled_from([0, 1, 1.0, 2.5, "x", "y", "1", True]))
    return events


def run_stream(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return run_events(n_max=n_max)


@st.composite
def few_values(draw: Any, n_max: int = 30) -> list[dict]:
    """`run_events` with fewer values of k (0, 1 beside 1.0, '1'): a negated SEQ's keyed match of a trend's
    value needs a C and a D between two of its events, and the C of its value."""
    events = draw(dense(types="AABBCDDE", n_max=n_max, n_min=6))
    for e in events:
        e["k"] = draw(st.sampled_from([0, 1, 1.0, "1"]))
    return events


def few_values_stream(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return few_values(n_max=n_max)


@st.composite
def two_keys(draw: Any, n_max: int = 30) -> list[dict]:
    """`few_values` with a second attribute j of few values (0, 1 beside 1.0, 'x')."""
    events = draw(few_values(n_max=n_max))
    for e in events:
        e["j"] = draw(st.sampled_from([0, 1, 1.0, "x"]))
    return events


def two_keys_stream(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return two_keys(n_max=n_max)


(test_some_aliases_equivalence_equals_the_general_engine, test_some_aliases_equivalence_equals_the_oracle,
 test_some_aliases_equivalence_streamed_equals_the_general_engine) = differential_tests(
    equivalence_queries(SHAPES, (ast.ANY_MATCH,)), run_stream, examples=(300, 200, 80))


(test_a_keyed_negated_seq_equals_the_general_engine, test_a_keyed_negated_seq_equals_the_oracle,
 test_a_keyed_negated_seq_streamed_equals_the_general_engine) = differential_tests(
    equivalence_queries(NEGATED_SEQS, ast.STRATEGIES), few_values_stream, examples=(200, 80, 40))


(test_two_attributes_keying_a_negated_seq_equal_the_general_engine,
 test_two_attributes_keying_a_negated_seq_equal_the_oracle,
 test_two_attributes_keying_a_negated_seq_streamed_equal_the_general_engine) = differential_tests(
    equivalence_queries(TWO_KEYED, ast.STRATEGIES), two_keys_stream, examples=(200, 80, 40))


def test_counts_of_a_small_stream_by_hand() -> None:
    """a1(k 1) a2(k 1.0) a3(k 2) b4: SEQ(A+, B) has 7 trends; with [a.k] those whose a's agree: a1, a2,
    a1 a2, a3 (each then b4): 4."""
    events = [{"type": t, "time": i + 1, "k": k} for i, (t, k) in enumerate([("A", 1), ("A", 1.0), ("A", 2),
                                                                              ("B", 0)])]
    rows = evaluate("RETURN COUNT(*) PATTERN SEQ(A a+, B b) WHERE [a.k] WITHIN 10 s", events, engine="columnar")
    assert rows.engine == "columnar"
    assert sum(r["count"] for r in rows) == 4


def test_strings_run_on_the_columnar_engine_compared_by_codes() -> None:
    """An equivalence attribute of some aliases holding strings (and a number beside them): compared by
    codes of one kernel run, the rows the general engine gives, on the columnar engine."""
    events = [{"type": t, "time": i + 1, "k": k} for i, (t, k) in enumerate([("A", "x"), ("A", "x"), ("A", "y"),
                                                                              ("B", "z"), ("A", 1), ("A", "1")])]
    events += [{"type": "A", "time": 10 + i, "k": "x"} for i in range(2000)]  # past the small-input rule
    text = "RETURN COUNT(*) PATTERN SEQ(A a+, B b) WHERE [a.k] WITHIN 10 s"
    rows = evaluate(text, events)
    assert rows.engine == "columnar", rows.engine_reason
    assert sum(r["count"] for r in rows) == 4  # x, x, y, x x: 1 and '1' come after b
    assert list(rows) == list(evaluate(text, events, engine="general"))


@pytest.mark.parametrize("incremental", [True, False])
def test_strings_compared_for_equality_stream_as_the_batch_gives(incremental: bool) -> None:
    """`S.sym = NEXT(S).sym` over strings beside numbers through micro-batches: codes hold for one kernel
    run, so the carried trees (`incremental`) leave such a predicate to the batch kernel over the kept
    events; the rows are the general engine's, from the columnar engine."""
    import random

    from greta_stream.compiler.compiled import compile_query
    from greta_stream.engine.columnar.stream import ColumnarStream

    rnd = random.Random(3)
    events = [{"type": "S", "time": i * 0.5, "sym": rnd.choice(["ibm", "aapl", 1, "1", True]), "p": rnd.random()}
              for i in range(400)]
    text = "RETURN COUNT(*), SUM(S.p) PATTERN S+ WHERE S.sym = NEXT(S).sym WITHIN 20 seconds SLIDE 5 seconds"
    stream = ColumnarStream(compile_query(text), incremental=incremental)
    rows: list = []
    for t in range(0, 200, 10):
        rows += stream.add_many([e for e in events if t <= e["time"] < t + 10]) or []
        rows += stream.advance(t + 10) or []
    rows += stream.finish() or []
    assert stream.engine_ran == ("columnar", None)
    want = list(evaluate(text, events, engine="general"))
    assert sorted(map(str, map(dict, rows))) == sorted(map(str, want)) and len(want) > 30


# Aliases that stand apart: a run of vertices per value (`valueruns.py`), the free states' vertices in every
# run near them. (pattern, its equivalence attributes and edge predicates it may take, alias it aggregates)
APART = [
    ("SEQ(A a, B b, C c)", ["[a.k, c.k]", "b.v < NEXT(c).v"], "b"),
    ("SEQ(NOT E e, A a, B b+, C c)", ["[a.f, c.f]", "b.v <= NEXT(b).v"], "b"),
    ("SEQ(A a, NOT E e, B b, C c+)", ["[a.k, c.k]", "a.v > NEXT(b).v"], "c"),
    ("SEQ(A a, (SEQ(B b, C c))+, D d)", ["[a.k, b.k]", "b.v < NEXT(c).v"], "c"),
    ("SEQ(A a+, B b, A c)", ["[a.k, c.k]", "a.v >= NEXT(a).v"], "a"),
    ("SEQ(A a, B b?, C c)", ["[b.k, c.k]", "a.v < NEXT(c).v"], "a"),
    ("SEQ(A a, B b*, C c, D d)", ["[a.f, d.f]", "[b.k, c.k]"], "b"),
    ("(SEQ(A a, B b, C c))+", ["[a.k, c.k]", "a.v < NEXT(b).v"], "a"),
    ("SEQ(A a, B b, C c, D d)", ["[a.k, c.k]", "[b.f, d.f]"], "d"),
    ("SEQ(A a, B b{2,3}, C c)", ["[a.k, c.k]"], "b"),
]


APART_QUERIES = equivalence_queries(APART, (ast.ANY_MATCH,))
(test_aliases_apart_equal_the_general_engine, test_aliases_apart_equal_the_oracle,
 test_aliases_apart_streamed_equal_the_general_engine) = differential_tests(
    APART_QUERIES, run_stream, examples=(300, 200, 80))
test_aliases_apart_over_long_runs_equal_the_general_engine, test_aliases_apart_over_long_runs_equal_the_oracle = (
    long_run_tests(APART_QUERIES, "AABBCDE"))


@pytest.mark.parametrize("pattern, where", [(p, w[0]) for p, w, _ in APART])
def test_aliases_apart_run_on_the_columnar_engine(pattern: str, where: str) -> None:
    assert RunSpec.create(f"RETURN COUNT(*) PATTERN {pattern} WHERE {where} WITHIN 10 s").columnar_refusal == ""


def test_aliases_apart_that_a_trend_may_all_step_over_are_no_run() -> None:
    """`SEQ(A a?, B b, C c?)` with `[a.k, c.k]`: a trend of b alone has no value of k, so it would lie in
    every run (the query's analysis refuses it first: such an attribute must apply to an alias every
    trend has)."""
    from greta_stream.engine.columnar.parts import State
    from greta_stream.engine.columnar.valueruns import value_run

    states = [State("a", "A", False, optional=True), State("b", "B", False), State("c", "C", False, optional=True)]
    with pytest.raises(Unsupported, match="a trend may have none of"):
        value_run(states, [], [], [], frozenset({"a", "c"}), "k")
    assert value_run(states, [], [], [], frozenset({"a", "b"}), "k").required == (1,)
    with pytest.raises(Unsupported, match="a trend may have none of"):  # in an optional group, or counted from 0
        value_run(states[1:], [], [(0, 1)], [], frozenset({"b"}), "k")
    with pytest.raises(Unsupported, match="a trend may have none of"):
        value_run(states[1:], [], [], [(0, 0, 2)], frozenset({"b"}), "k")


def test_aliases_apart_by_hand() -> None:
    """SEQ(A a, B b, C c) WHERE [a.k, c.k] over a1(k 1) b2 a3(k 2) b4 c5(k 1.0) c6(k 2): the trends whose
    a and c agree are a1 b2 c5, a1 b4 c5 (1 and 1.0 agree) and a3 b4 c6: 3; b4 stands in both runs."""
    events = [{"type": t, "time": i + 1, "k": k, "v": i} for i, (t, k) in enumerate(
        [("A", 1), ("B", 7), ("A", 2), ("B", 8), ("C", 1.0), ("C", 2)])]
    text = "RETURN COUNT(*), SUM(b.v) PATTERN SEQ(A a, B b, C c) WHERE [a.k, c.k] WITHIN 10 s SLIDE 10 s"
    rows = evaluate(text, events, engine="columnar")
    assert rows.engine == "columnar"
    assert [(r["count"], r["sum_b_v"]) for r in rows] == [(3, 1 + 3 + 3)]
    assert list(rows) == list(evaluate(text, events, engine="general"))


def test_runs_with_no_trend_are_left_out_and_the_others_keep_their_groups() -> None:
    """Runs in order: a1 (g 0, k 1: no C of k 1, left out), a2 b3 c4 (g 1, k 2: one trend), a5 (g 0, k 5:
    left out), a6 b7 c8 (g 0, k 6: one trend). The rows must be each group's, whatever runs were left out
    between them (the kernel numbers the partitions it reads 0..)."""
    events = [{"type": t, "time": tm, "k": k, "g": g, "v": tm} for t, tm, k, g in [
        ("A", 1, 1, 0), ("A", 2, 2, 1), ("B", 3, 0, 1), ("C", 4, 2, 1), ("A", 5, 5, 0), ("A", 6, 6, 0), ("B", 7, 0, 0),
        ("C", 8, 6, 0)]]
    text = "RETURN g, COUNT(*), SUM(b.v) PATTERN SEQ(A a, B b, C c) WHERE [a.k, c.k] GROUP-BY g WITHIN 10 s SLIDE 10 s"
    rows = evaluate(text, events, engine="columnar")
    assert rows.engine == "columnar"
    assert sorted((r["g"], r["count"], r["sum_b_v"]) for r in rows) == [(0, 1, 7), (1, 1, 3)]
    assert list(rows) == list(evaluate(text, events, engine="general"))


# A single negated event keyed by an equivalence attribute of every positive alias, beside an unkeyed one:
# the keyed NOT bounds the trends of its value, the other every value (`keys._negated_keys`).
KEYED_NOT = [
    ("SEQ(NOT E e, A a+, NOT C c, B b)", ["[a.k, b.k, e.k]", "a.v < NEXT(a).v"], "a"),
    ("SEQ(NOT E e, A a, B b+, NOT C c)", ["[a.k, b.k, c.k]", "b.v >= NEXT(b).v"], "b"),
    ("SEQ(A a+, NOT E e, B b, NOT D d)", ["[a.f, b.f, e.f]", "a.v <= NEXT(b).v"], "b"),
    ("SEQ(NOT E e, A a, B b, C c, NOT D d)", ["[a.k, b.k, c.k, e.k]", "[a.f, c.f]"], "b"),
    ("SEQ(NOT C c, (SEQ(A a, B b))+, NOT E e)", ["[a.k, b.k, e.k]", "a.v < NEXT(b).v"], "a"),
]


(test_keyed_negation_equals_the_general_engine, test_keyed_negation_equals_the_oracle,
 test_keyed_negation_streamed_equals_the_general_engine) = differential_tests(
    equivalence_queries(KEYED_NOT, (ast.ANY_MATCH, ast.NEXT_MATCH)), run_stream, examples=(300, 200, 80))


@pytest.mark.parametrize("pattern, where", [(p, w[0]) for p, w, _ in KEYED_NOT])
def test_keyed_negation_runs_on_the_columnar_engine(pattern: str, where: str) -> None:
    assert RunSpec.create(f"RETURN COUNT(*) PATTERN {pattern} WHERE {where} WITHIN 10 s").columnar_refusal == ""


def test_keyed_negation_by_hand() -> None:
    """SEQ(NOT E e, A a, B b, NOT C c) WHERE [a.k, b.k, e.k] over a1(k 1) e2(k 1) a4(k 1) a5(k 2) b6(k 1)
    b7(k 2.0), one window [0, 10): e2 bounds the trends of k 1 only (a4 b6 starts after it: dropped), so a1 b6
    and a5 b7 stay (2; an unkeyed E would leave 1). The NOT C is unkeyed: c at 6.5, whatever its k, drops the
    trends that end before it (a1 b6)."""
    events = [{"type": t, "time": tm, "k": k} for t, tm, k in [("A", 1, 1), ("E", 2, 1), ("A", 4, 1), ("A", 5, 2),
                                                               ("B", 6, 1), ("B", 7, 2.0)]]
    text = "RETURN COUNT(*) PATTERN SEQ(NOT E e, A a, B b, NOT C c) WHERE [a.k, b.k, e.k] WITHIN 10 s SLIDE 10 s"
    for extra, count in [([], 2), ([{"type": "C", "time": 6.5, "k": 9}], 1)]:
        rows = evaluate(text, events + extra, engine="columnar")
        assert rows.engine == "columnar"
        assert [r["count"] for r in rows] == [count]
        assert list(rows) == list(evaluate(text, events + extra, engine="general"))


# A single negated event keyed by an equivalence attribute of some positive aliases only: a run per value,
# and the NOT bounds its value's run only, free vertices included (`keys.run_negations`).
RUN_NOT = [
    ("SEQ(A a, B b, NOT E e, C c)", ["[a.k, e.k, c.k]", "b.v < NEXT(c).v"], "b"),
    ("SEQ(NOT E e, A a, B b+)", ["[a.k, e.k]", "b.v <= NEXT(b).v"], "b"),
    ("SEQ(A a+, B b, NOT E e)", ["[b.k, e.k]", "a.v > NEXT(a).v"], "a"),
    ("SEQ(NOT D d, A a, B b, NOT E e)", ["[a.f, e.f]", "a.v < NEXT(b).v"], "b"),
    ("(SEQ(A a, NOT E e, B b))+", ["[a.k, e.k]", "a.v < NEXT(b).v"], "b"),
    ("SEQ(A a, NOT E e, B b+, C c)", ["[a.k, c.k, e.k]", "[b.f]"], "b"),
]


RUN_NOT_QUERIES = equivalence_queries(RUN_NOT, (ast.ANY_MATCH, ast.ANY_MATCH, ast.NEXT_MATCH))
(test_a_runs_negation_equals_the_general_engine, test_a_runs_negation_equals_the_oracle,
 test_a_runs_negation_streamed_equals_the_general_engine) = differential_tests(
    RUN_NOT_QUERIES, run_stream, examples=(300, 200, 80))
test_a_runs_negation_over_long_runs_equals_the_general_engine, test_a_runs_negation_over_long_runs_equals_the_oracle = (
    long_run_tests(RUN_NOT_QUERIES, "AABBCDE"))


@pytest.mark.parametrize("pattern, where", [(p, w[0]) for p, w, _ in RUN_NOT])
def test_a_runs_negation_runs_on_the_columnar_engine(pattern: str, where: str) -> None:
    assert RunSpec.create(f"RETURN COUNT(*) PATTERN {pattern} WHERE {where} WITHIN 10 s").columnar_refusal == ""


def test_a_runs_negation_by_hand() -> None:
    """SEQ(A a, B b, NOT E e, C c) WHERE [a.k, e.k, c.k], b free: a1(k 1) a2(k 2) b3 e4(k 1) c5(k 1) c6(k 2)
    in one window. e4 lies between b3 and the c's: it breaks a1 b3 c5 (its value) and not a2 b3 c6 (b3 is
    in both runs, bounded in run 1 only): 1 trend; an unkeyed E would leave none."""
    events = [{"type": t, "time": tm, "k": k} for t, tm, k in [("A", 1, 1), ("A", 2, 2), ("B", 3, 0), ("E", 4, 1),
                                                               ("C", 5, 1.0), ("C", 6, 2)]]
    text = "RETURN COUNT(*) PATTERN SEQ(A a, B b, NOT E e, C c) WHERE [a.k, e.k, c.k] WITHIN 10 s SLIDE 10 s"
    rows = evaluate(text, events, engine="columnar")
    assert rows.engine == "columnar"
    assert [r["count"] for r in rows] == [1]
    assert list(rows) == list(evaluate(text, events, engine="general"))


@st.composite
def strict_events(draw: Any, n_max: int = 30) -> list[dict]:
    """Denser than `run_events` (6 s) with fewer values (1 and 1.0 agree): trends that skip nothing are rare."""
    events = draw(dense(types="AABBCD", n_max=n_max, n_min=min(n_max, 8), seconds=6))
    for e in events:
        e["k"] = draw(st.sampled_from([0, 1, 1.0, "x"]))
    return events


def strict_stream(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return strict_events(n_max=n_max)


STRICT_QUERIES = equivalence_queries(SHAPES[:4] + APART, (ast.NEXT_MATCH, ast.CONTIGUOUS))
(test_stricter_strategies_equal_the_general_engine, test_stricter_strategies_equal_the_oracle,
 test_stricter_strategies_streamed_equal_the_general_engine) = differential_tests(
    STRICT_QUERIES, strict_stream, examples=(300, 200, 80))
test_stricter_strategies_over_long_runs_equal_the_general_engine, test_stricter_strategies_over_long_runs_equal_the_oracle = (
    long_run_tests(STRICT_QUERIES, "AABBCDE"))


# Under contiguous an equivalence attribute of every positive alias that a NOT lacks (`[P.vehicle]` beside
# `NOT Accident A`) is a run per value too: a trend's breakers carry only the attributes of every alias
# (SEMANTICS section 8), so a Position of another vehicle breaks it, and the partitions are of those.
CONTIGUOUS_RUNS = [
    ("SEQ(A a+, NOT E e, B b)", ["[a.k, b.k]", "a.v <= NEXT(a).v"], "a"),
    ("SEQ(NOT E e, A a+)", ["[a.k]", "a.v < NEXT(a).v"], "a"),
    ("SEQ(NOT D d, A a, B b+, NOT E e)", ["[a.k, b.k, e.k]", "b.v >= NEXT(b).v"], "b"),
    ("(SEQ(A a, NOT E e, B b))+", ["[a.k, b.k]", "a.v < NEXT(b).v"], "a"),
    ("SEQ(A a+, NOT E e, B b)", ["[a.k, b.k, e.k]", "[a.f]"], "b"),
]


CONTIGUOUS_QUERIES = equivalence_queries(CONTIGUOUS_RUNS, (ast.CONTIGUOUS, ast.CONTIGUOUS, ast.NEXT_MATCH))
(test_contiguous_runs_equal_the_general_engine, test_contiguous_runs_equal_the_oracle,
 test_contiguous_runs_streamed_equal_the_general_engine) = differential_tests(
    CONTIGUOUS_QUERIES, strict_stream, examples=(300, 200, 80))
test_contiguous_runs_over_long_runs_equal_the_general_engine, test_contiguous_runs_over_long_runs_equal_the_oracle = (
    long_run_tests(CONTIGUOUS_QUERIES, "AABBCDE"))


def test_contiguous_runs_by_hand() -> None:
    """SEQ(A a+, NOT E e, B b) SEMANTICS contiguous WHERE [a.k, b.k]: a1(k 1) a2(k 2) b3(k 1). a2 is of another
    run, yet it lies between a1 and b3 and has the pattern's type: it breaks a1 b3 (the trend's breakers carry
    the attributes of every alias only, none here). So no trend; without a2, a1 b3."""
    events = [{"type": t, "time": tm, "k": k} for t, tm, k in [("A", 1, 1), ("A", 2, 2), ("B", 3, 1)]]
    text = "RETURN COUNT(*) PATTERN SEQ(A a+, NOT E e, B b) SEMANTICS contiguous WHERE [a.k, b.k] WITHIN 10 s SLIDE 10 s"
    for evs, count in [(events, []), ([events[0], events[2]], [1])]:
        rows = evaluate(text, evs, engine="columnar")
        assert rows.engine == "columnar"
        assert [r["count"] for r in rows] == count
        assert list(rows) == list(evaluate(text, evs, engine="general"))


@pytest.mark.parametrize(("query", "note"), [
    ("SEQ(NOT Halt C, Stock A, Stock B, Halt D) WHERE [A.volume, D.volume]",
     "equivalence volume on A, D: a run per value, an event of B joining every run near it"),
    ("SEQ(Login L, Stock S+, NOT Logout O) WHERE [L.user, O.user]",
     "equivalence user on L, O: a run per value, an event of S joining every run near it (cost grows with the "
     "values near it); NOT O bounds its value's run only"),
    ("SEQ(NOT Halt H, Stock S+, NOT Suspend X) WHERE [S.company, H.company]",
     "equivalence company on H, S: a partition attribute of the positive events; the negated ones bound the "
     "trends of their value"),
    ("SEQ(Login L, Stock S+, Logout O) WHERE [S.company]", "equivalence company on S: the same value along each "
     "step between them"),
    ("SEQ(Stock S+, NOT SEQ(Halt C, Halt D), Stock E) WHERE [S.volume, C.volume]",
     "equivalence volume on C, S: a run per value, an event of E joining every run near it (cost grows with the "
     "values near it); a negated SEQ's C matches for its value's run only"),
])
def test_explain_says_how_the_columnar_engine_takes_each_equivalence(query: str, note: str) -> None:
    from greta_stream.runtime.batch import runs_on

    said = runs_on(RunSpec.create(f"RETURN COUNT(*) PATTERN {query} WITHIN 10 s"))
    assert said.startswith("runs on: the columnar engine\n  " + note)


@pytest.mark.parametrize(("query", "events"), [
    # [a.k, c.k]: a trend of k = 0, a b c; the A of k = 1 between b and c breaks it (it carries every
    # alias's attributes, none), though it is in another run
    ("SEQ(A a, B b, C c) WHERE [a.k, c.k]", [("A", 0, 0), ("A", 0, 0), ("B", 0.25, 0), ("A", 1, 1), ("C", 2, 0)]),
    # [a.k]: a0 a0' b1 with an A of k = 1 at 0.5 between them
    ("SEQ(A a+, B b) WHERE [a.k]", [("A", 0, 0), ("A", 0.25, 0), ("A", 0.5, 1), ("B", 1, 0)]),
])
def test_under_contiguous_an_event_of_another_run_breaks_a_trend(query: str, events: list[tuple]) -> None:
    """SEMANTICS section 8: under contiguous an event of the pattern's types between two events of a trend
    breaks it when it carries the values of the attributes of every alias, whatever its run."""
    evs = [{"type": t, "time": time, "k": k, "v": 1} for t, time, k in events]
    pattern, _, where = query.partition(" WHERE ")
    text = f"RETURN COUNT(*) PATTERN {pattern} SEMANTICS contiguous WHERE {where} WITHIN 5 s"
    got = check_against_general(text, evs)
    assert list(got) == list(evaluate(text, evs, engine="general"))
    assert sum(r["count"] for r in got) == (0 if "c.k" in query else 1)  # [a.k]: a0.5 b1 only
