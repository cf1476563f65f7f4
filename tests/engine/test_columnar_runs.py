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
from columnar_support import dense_events as dense
from columnar_support import dense_query, differential_tests
from hypothesis import strategies as st
from problems_support import evaluate

from greta_stream import RunSpec
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


@st.composite
def run_query(draw: Any) -> str:
    pattern, where, agg = draw(st.sampled_from(SHAPES))
    equivalence, *edges = where
    text = dense_query(draw, pattern, edges, LOCALS, ["COUNT(*)", f"SUM({agg}.v)", f"MAX({agg}.f)"],
                       (ast.ANY_MATCH,))
    if " WHERE " in text:
        return text.replace(" WHERE ", f" WHERE {equivalence} AND ", 1)
    return text.replace(f"SEMANTICS {ast.ANY_MATCH} ", f"SEMANTICS {ast.ANY_MATCH} WHERE {equivalence} ", 1)


@st.composite
def run_events(draw: Any, n_max: int = 30) -> list[dict]:
    events = draw(dense(types="AABBCDE", n_max=n_max))
    for e in events:  # ints beside floats and strings (1, 1.0 and True agree, '1' does not), as Python's `==`
        e["k"] = draw(st.sampled_from([0, 1, 1.0, 2.5, "x", "y", "1", True]))
    return events


def run_stream(n_max: int = 30) -> st.SearchStrategy[list[dict]]:
    return run_events(n_max=n_max)


(test_some_aliases_equivalence_equals_the_general_engine, test_some_aliases_equivalence_equals_the_oracle,
 test_some_aliases_equivalence_streamed_equals_the_general_engine) = differential_tests(
    run_query(), run_stream, examples=(300, 200, 80))


@pytest.mark.parametrize("pattern, where, why", [
    ("SEQ(A a, B b, C c)", "[a.k, c.k]", "not at consecutive required positions"),
    ("SEQ(A a, (SEQ(B b, C c))+, D d)", "[a.k, b.k]", "not at consecutive required positions"),
    ("SEQ(A a, B b?, C c)", "[b.k, c.k]", "not at consecutive required positions"),
    ("SEQ(A a+, B b) SEMANTICS skip-till-next-match", "[a.k]", "under SEMANTICS skip-till-next-match"),
    ("SEQ(A a+, NOT E e, B b)", "[a.k, e.k]", "equivalence attributes of a negated alias"),
])
def test_what_stays_on_the_general_engine_says_why(pattern: str, where: str, why: str) -> None:
    assert why in RunSpec.create(f"RETURN COUNT(*) PATTERN {pattern} WHERE {where} WITHIN 10 s").columnar_refusal


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
