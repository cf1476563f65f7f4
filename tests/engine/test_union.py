"""One traversal for queries of different patterns around one Kleene part
(`engine/columnar/union.py`) against each query evaluated alone.

Random workloads: a Kleene core `E e+` with no edge predicate, one (indexed)
or two (scanned) on its loop, or a product of its two events' values (a pair
program, scanned); one to five queries, each with a chain of zero
to two parts before the core and zero to two after it (types A, B and E
itself, each once or Kleene), so queries share prefixes, suffixes or only
the core; local predicates on any part; windows of one slide (whole seconds
or halves of one) and different lengths; COUNT/SUM/AVG/MIN/MAX over any
alias, GROUP-BY or not; twins (an
earlier query's pattern, predicates and window under other aliases, with
other aggregates: one lane for both); streams with ties, ints and floats,
and bad records. Every query's rows from the union
must be exactly its rows alone.
"""

from __future__ import annotations

import random

import pytest
from columnar_support import SETTINGS
from hypothesis import given, settings
from hypothesis import strategies as st
from problems_support import evaluate  # greta_stream.evaluate, its problem warnings checked

from greta_stream.compiler.compiled import compile_query
from greta_stream.engine.columnar import Input, Unsupported, columnar_plan
from greta_stream.engine.columnar.union import core_of, evaluate_union, union_key, union_plan
from greta_stream.engine.ingest import FieldNames

EDGES = ["", "e.v < NEXT(e).v", "e.w >= NEXT(e).w", "e.v = NEXT(e).v", "e.v < NEXT(e).v AND e.w >= NEXT(e).w",
         "e.v * NEXT(e).w > e.w"]  # the last: a pair program (`pairs.py`)
LOCALS = ["{a}.w > 1", "{a}.v != 0", "({a}.w <= 3 OR {a}.v > 2)", "NOT {a}.v < -1"]


@st.composite
def part(draw, alias: str, kleene_ok: bool) -> tuple[str, str | None]:
    typ = draw(st.sampled_from(["A", "B", "E"]))
    kleene = "+" if kleene_ok and draw(st.integers(0, 3)) == 0 else ""
    local = draw(st.sampled_from([None, None, *LOCALS]))
    return f"{typ} {alias}{kleene}", None if local is None else local.format(a=alias)


@st.composite
def workload(draw) -> tuple[list[str], int]:
    edge = draw(st.sampled_from(EDGES))
    # slides in ms: whole seconds, and halves (times of .5 fall on their windows' bounds)
    slide = draw(st.sampled_from([2000, 3000, 5000, 500, 1500]))
    grouped = draw(st.booleans())
    texts = []
    drawn: list[tuple[str, list[str], list[str], int]] = []
    for _ in range(draw(st.integers(1, 5))):
        if drawn and draw(st.integers(0, 2)) == 0:
            # a twin of an earlier query (other aliases, other aggregates): their lanes are one
            pattern, where, aliases, within = drawn[draw(st.integers(0, len(drawn) - 1))]
            renamed = {a: f"t{a}" for a in aliases if a != "e"}
            for a, b in renamed.items():
                pattern = pattern.replace(a, b)
                where = [w.replace(a, b) for w in where]
            aliases = [renamed.get(a, a) for a in aliases]
        else:
            # other Kleene parts only beside a core with edge predicates (else no part is *the* Kleene part)
            before = [draw(part(f"p{i}", bool(edge))) for i in range(draw(st.integers(0, 2)))]
            after = [draw(part(f"s{i}", bool(edge))) for i in range(draw(st.integers(0, 2)))]
            parts = [*before, ("E e+", draw(st.sampled_from([None, None, "e.w > 0", "e.v <= 2"]))), *after]
            pattern = parts[0][0] if len(parts) == 1 else f"SEQ({', '.join(p for p, _ in parts)})"
            where = [w for _, w in parts if w] + ([edge] if edge else [])
            aliases = ["e", *(p.split()[1].rstrip("+") for p, _ in parts if not p.startswith("E e+"))]
            within = draw(st.sampled_from([slide, 2 * slide, slide + 1000, slide + 500, 3 * slide]))
        drawn.append((pattern, where, aliases, within))
        aggs = ["COUNT(*)"]
        for _ in range(draw(st.integers(0, 3))):
            a = draw(st.sampled_from(aliases))
            aggs.append(draw(st.sampled_from([f"COUNT({a})", f"SUM({a}.v)", f"AVG({a}.w)", f"MIN({a}.v)",
                                              f"MAX({a}.w)"])))
        texts.append(
            f"RETURN {'g, ' if grouped else ''}{', '.join(dict.fromkeys(aggs))} PATTERN {pattern}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + (" GROUP-BY g" if grouped else "") + f" WITHIN {_seconds(within)} SLIDE {_seconds(slide)}")
    return texts, slide


def _seconds(ms: int) -> str:
    """A duration as the queries spell it: whole seconds, else milliseconds."""
    return f"{ms // 1000} seconds" if ms % 1000 == 0 else f"{ms} ms"


@st.composite
def events(draw) -> list[dict]:
    pool = draw(st.lists(st.integers(0, 30), min_size=1, max_size=10))
    floats = draw(st.booleans())
    out = []
    for _ in range(draw(st.integers(0, 45))):
        t = draw(st.sampled_from(pool)) if draw(st.booleans()) else draw(st.integers(0, 30))
        w = draw(st.integers(0, 5))
        out.append({"type": draw(st.sampled_from("EEEAAB")), "time": t + (0.5 if floats and t % 3 == 0 else 0),
                    "v": draw(st.integers(-3, 3)), "w": w / 2 if floats else w, "g": draw(st.integers(0, 1))})
    if out and draw(st.integers(0, 3)) == 0:  # bad records every query rejects alike
        for _ in range(draw(st.integers(1, 2))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] = {**out[i], **draw(st.sampled_from([{"time": None}, {"time": "soon"}, {"type": None}]))}
    return out


def _union_rows(texts: list[str], records: list[dict]) -> dict[str, list[dict]]:
    plans = [(f"q{i}", columnar_plan(compile_query(t))) for i, t in enumerate(texts)]
    assert len({union_key(p) for _, p in plans}) == 1
    return evaluate_union(union_plan(plans), Input(records), FieldNames())


@settings(max_examples=150, **SETTINGS)
@given(workload(), events())
def test_every_query_of_a_union_gives_its_rows_alone(work: tuple[list[str], int], records: list[dict]) -> None:
    texts, _ = work
    got = _union_rows(texts, records)
    for i, text in enumerate(texts):
        alone = list(evaluate(text, records))
        assert got[f"q{i}"] == alone, f"{text}\nevents: {records}\nunion: {got[f'q{i}']}\nalone: {alone}"


def test_a_union_of_shapes_around_one_kleene_part() -> None:
    """The four shapes of a shared Kleene part and a longer sequence around it, by hand."""
    texts = [
        "RETURN g, COUNT(*) PATTERN E e+ WHERE e.v < NEXT(e).v GROUP-BY g WITHIN 10 seconds SLIDE 5 seconds",
        "RETURN g, SUM(e.v) PATTERN SEQ(A x, E e+) WHERE e.v < NEXT(e).v AND e.w > 3 GROUP-BY g "
        "WITHIN 10 seconds SLIDE 5 seconds",
        "RETURN g, MAX(y.v) PATTERN SEQ(E e+, B y) WHERE e.v < NEXT(e).v GROUP-BY g WITHIN 5 seconds SLIDE 5 seconds",
        "RETURN g, AVG(e.v), MIN(x.w) PATTERN SEQ(A x, E e+, B y) WHERE e.v < NEXT(e).v AND x.w < 5 GROUP-BY g "
        "WITHIN 15 seconds SLIDE 5 seconds",
        "RETURN g, COUNT(*) PATTERN SEQ(B b, A x, E e+, A y) WHERE e.v < NEXT(e).v GROUP-BY g "
        "WITHIN 15 seconds SLIDE 5 seconds",
    ]
    rng = random.Random(7)
    records = [{"type": rng.choice("EEAB"), "time": i * 0.7, "v": rng.randint(0, 9), "w": rng.randint(0, 9),
                "g": rng.randint(0, 1)} for i in range(150)]
    got = _union_rows(texts, records)
    union = union_plan([(f"q{i}", columnar_plan(compile_query(t))) for i, t in enumerate(texts)])
    # one state per distinct chain around the core: E, A before, B after, B before A, A after
    assert [(s.type, s.kleene) for s in union.plan.states] == [("E", True), ("A", False), ("B", False),
                                                               ("B", False), ("A", False)]
    for i, text in enumerate(texts):
        assert got[f"q{i}"] == list(evaluate(text, records))
        assert got[f"q{i}"], text  # every query has rows here: the comparison is not of empty lists


def test_queries_with_equal_lanes_share_one() -> None:
    """A family (one pattern, predicates and window; other aggregates and aliases) inside a union: one lane,
    each query its own rows; queries that differ in a local predicate or a window keep lanes of their own."""
    texts = [
        "RETURN g, COUNT(*) PATTERN SEQ(A x, E e+) WHERE e.v < NEXT(e).v AND x.w > 2 GROUP-BY g "
        "WITHIN 10 seconds SLIDE 5 seconds",
        "RETURN g, SUM(f.v), MAX(a.w) PATTERN SEQ(A a, E f+) WHERE f.v < NEXT(f).v AND a.w > 2 GROUP-BY g "
        "WITHIN 10 seconds SLIDE 5 seconds",
        "RETURN g, AVG(e.w), MIN(e.v), COUNT(x) PATTERN SEQ(A x, E e+) WHERE x.w > 2 AND e.v < NEXT(e).v GROUP-BY g "
        "WITHIN 10 seconds SLIDE 5 seconds",
        "RETURN g, COUNT(*) PATTERN SEQ(A x, E e+) WHERE e.v < NEXT(e).v AND x.w > 3 GROUP-BY g "
        "WITHIN 10 seconds SLIDE 5 seconds",
        "RETURN g, COUNT(*) PATTERN SEQ(A x, E e+) WHERE e.v < NEXT(e).v AND x.w > 2 GROUP-BY g "
        "WITHIN 5 seconds SLIDE 5 seconds",
        "RETURN g, SUM(e.w) PATTERN E e+ WHERE e.v < NEXT(e).v GROUP-BY g WITHIN 10 seconds SLIDE 5 seconds",
        "RETURN g, COUNT(*) PATTERN E d+ WHERE d.v < NEXT(d).v GROUP-BY g WITHIN 10 seconds SLIDE 5 seconds",
    ]
    rng = random.Random(11)
    records = [{"type": rng.choice("EEAB"), "time": i * 0.7, "v": rng.randint(0, 9), "w": rng.randint(0, 9),
                "g": rng.randint(0, 1)} for i in range(150)]
    union = union_plan([(f"q{i}", columnar_plan(compile_query(t))) for i, t in enumerate(texts)])
    lane = {m.name: m.lane for m in union.members}
    assert union.nq == 4
    assert lane["q0"] == lane["q1"] == lane["q2"] and lane["q5"] == lane["q6"]
    assert len({lane["q0"], lane["q3"], lane["q4"], lane["q5"]}) == 4
    got = _union_rows(texts, records)
    for i, text in enumerate(texts):
        assert got[f"q{i}"] == list(evaluate(text, records))
        assert got[f"q{i}"], text


@pytest.mark.parametrize("text, why", [
    ("RETURN COUNT(*) PATTERN SEQ(NOT A n, E e+) WITHIN 5 seconds SLIDE 5 seconds", "negation"),
    ("RETURN COUNT(*) PATTERN SEQ(A a, E e+) WHERE a.v < NEXT(e).v WITHIN 5 seconds SLIDE 5 seconds",
     "between two positions"),
    ("RETURN COUNT(*) PATTERN SEQ(A a+, E e+) WITHIN 5 seconds SLIDE 5 seconds", "no single Kleene part"),
])
def test_queries_that_cannot_join_a_union_say_why(text: str, why: str) -> None:
    with pytest.raises(Unsupported, match=why):
        core_of(columnar_plan(compile_query(text)))
