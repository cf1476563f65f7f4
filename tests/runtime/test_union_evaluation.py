"""Unions (runtime/plan, engine/columnar/union.py): queries whose patterns
differ around one Kleene part on one columnar stream, one traversal per
window spec with a lane per query.

Random query sets around a Kleene part `Stock S+` (its edge predicate, or
none), with parts before and after it (`Halt`, `News`, `Stock` itself),
local predicates, windows of one slide, aggregates, lateness; random
micro-batch splits through the operator's shards (state saved and restored
every batch), with late and bad events. Each query gets the rows and dead
letters it gets alone. Queries leaving and joining a union change no other
query's rows.
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import drive, key, split

from greta_stream import MultiRunner, QuerySet, RunSpec, evaluate, plan_units

PARTS = ["Halt H{i}", "News N{i}", "Stock X{i}"]
LOCALS = ["", " AND {a}.level > 1", " AND ({a}.level <= 2 OR {a}.price > 100)"]
EDGES = ["S.price < NEXT(S).price", "S.price >= NEXT(S).price", ""]


def union_query(rnd: random.Random, edge: str, slide: int, grouped: bool) -> str:
    before = [rnd.choice(PARTS).format(i=i) for i in range(rnd.choice([0, 0, 1, 2]))]
    after = [rnd.choice(PARTS).format(i=i + 2) for i in range(rnd.choice([0, 1, 1, 2]))]
    parts = [*before, "Stock S+", *after]
    aliases = ["S", *(p.split()[1] for p in before + after)]
    where = ["[sector]"] + ([edge] if edge else [])
    locals_ = "".join(rnd.choice(LOCALS).format(a=a) for a in aliases if rnd.random() < 0.4)
    aggs = dict.fromkeys(["COUNT(*)", *(rnd.choice(["SUM(S.price)", "AVG(S.price)", f"MAX({a}.level)",
                                                    f"COUNT({a})", "MIN(S.price)"])
                                        for a in rnd.sample(aliases, min(len(aliases), rnd.randint(0, 2))))])
    pattern = parts[0] if len(parts) == 1 else f"SEQ({', '.join(parts)})"
    within = rnd.choice([slide, 2 * slide, 3 * slide, slide + 5])
    return (f"RETURN {'sector, ' if grouped else ''}{', '.join(aggs)} PATTERN {pattern} "
            f"WHERE {' AND '.join(where)}{locals_}{' GROUP-BY sector' if grouped else ''} "
            f"WITHIN {within} s SLIDE {slide} s")


def union_stream(seed: int, n: int = 160) -> list:
    rnd = random.Random(seed)
    events: list = []
    for i in range(n):
        typ = rnd.choice(["Stock", "Stock", "Stock", "Halt", "News"])
        events.append({"type": typ, "time": i // 2 + rnd.choice([0, 0.5]), "sector": rnd.randrange(2),
                       "price": rnd.choice([98.0, 99.5, 100.0, 101.25, 102.0]), "level": rnd.randrange(4), "id": i})
    events += [{"type": "Stock", "time": 5, "sector": 1},  # no price: dead for every query that reads it
               {"type": "Halt", "time": "soon", "sector": 0, "level": 1}, "not an object"]
    return events


def union_set(seed: int, n: int) -> QuerySet:
    rnd = random.Random(seed)
    edge, slide, grouped = rnd.choice(EDGES), rnd.choice([10, 20]), rnd.random() < 0.7
    lateness = rnd.choice([0, 5])
    texts = list(dict.fromkeys(union_query(rnd, edge, slide, grouped) for _ in range(n)))
    return QuerySet.of([(f"q{i}", RunSpec.create(t, lateness_s=lateness)) for i, t in enumerate(texts)])


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**16), st.integers(2, 5), st.integers(1, 8), st.integers(1, 3))
def test_each_query_of_a_union_gives_its_rows_alone(seed: int, n_queries: int, n_batches: int,
                                                     n_shards: int) -> None:
    queries = union_set(seed, n_queries)
    events = union_stream(seed)
    batches = split(events, n_batches, seed)
    rows, dead = drive(queries, batches, n_shards)
    for name, spec in queries:
        want_rows, want_dead = drive(QuerySet.of({name: spec}), batches, 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, want_rows[name])), (name, spec.text)
        assert sorted(dead[name]) == sorted(want_dead[name]), (name, spec.text)


def test_the_planner_makes_a_union_of_patterns_around_one_kleene_part_and_says_so() -> None:
    texts = [
        "RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [sector] AND S.price < NEXT(S).price GROUP-BY sector "
        "WITHIN 20 s SLIDE 10 s",
        "RETURN sector, SUM(S.price) PATTERN SEQ(Halt H, Stock S+) WHERE [sector] AND S.price < NEXT(S).price "
        "GROUP-BY sector WITHIN 20 s SLIDE 10 s",
        "RETURN sector, MAX(N.level) PATTERN SEQ(Stock S+, News N) WHERE [sector] AND S.price < NEXT(S).price "
        "AND S.level > 1 GROUP-BY sector WITHIN 20 s SLIDE 10 s",
        "RETURN sector, AVG(S.price) PATTERN SEQ(Halt H, Stock S+, News N) WHERE [sector] AND "
        "S.price < NEXT(S).price GROUP-BY sector WITHIN 30 s SLIDE 10 s",
        "RETURN sector, COUNT(*) PATTERN SEQ(Stock S+, Halt H) WHERE [sector] AND S.price < NEXT(S).price "
        "GROUP-BY sector WITHIN 30 s SLIDE 10 s",
        # alone in its window spec: a union pass of one query shares nothing, so it runs alone
        "RETURN sector, COUNT(*) PATTERN SEQ(News N, Stock S+) WHERE [sector] AND S.price < NEXT(S).price "
        "GROUP-BY sector WITHIN 40 s SLIDE 10 s",
    ]
    queries = QuerySet.of([(f"q{i}", RunSpec.create(t)) for i, t in enumerate(texts)])
    plan = plan_units(queries)
    assert len(plan.units) == 2
    text = plan.explain()
    assert "shared union around Stock+" in text, text
    assert "states Stock+ (3 queries), Halt before (1 query), News after (1 query)" in text, text
    assert "solo q5: columnar runner (no other query shares its pattern" in text, text
    unit = plan.to_dict()["units"][0]
    assert unit["kind"] == "union" and sorted(unit["queries"]) == ["q0", "q1", "q2", "q3", "q4"]
    assert len(unit["passes"]) == 2 and unit["shared_cost"] < unit["separate_cost"]
    events = union_stream(5, 400)
    multi = MultiRunner(queries)
    multi.add_many(events)
    got = multi.finish()
    for name, spec in queries:
        mine = sorted(key(r) for n, r in got if n == name)
        assert mine == sorted(map(key, evaluate(spec, events))), name
        assert mine, name  # rows to compare: not two empty lists


def test_queries_joining_and_leaving_a_union_change_no_other_query() -> None:
    """A restart with another query set: the queries saved together go on from
    their union's state (fewer of them, so fewer types), a new one starts at
    the stream's position, a removed one is gone."""
    base = union_set(11, 5)
    names = list(base.names)
    assert any(len(u.names) > 2 and getattr(u, "kind", "") == "union" for u in plan_units(base).units)
    events = [e for e in union_stream(11, 300) if isinstance(e, dict) and isinstance(e.get("time"), (int, float))]
    first = [e for e in events if e["time"] < 60]
    second = [e for e in events if e["time"] >= 60]
    multi = MultiRunner(base)
    multi.add_many(first)
    early = multi.advance(lambda spec, kind: 60)
    kept = QuerySet.of([(n, base[n]) for n in names[1:]]
                       + [("new", RunSpec.create(str(base[names[0]].text).replace("Stock S+", "Stock S+, News Z")
                                                 if "SEQ(" in str(base[names[0]].text) else base[names[0]].text))])
    later = MultiRunner.restore(kept, multi.snapshot())
    later.add_many(second, lambda spec, kind: 60)
    rows = early + later.advance(lambda spec, kind: math.inf)
    for n in names[1:]:
        assert sorted(key(r) for m, r in rows if m == n) == sorted(map(key, evaluate(base[n], events))), n
    assert sorted(key(r) for m, r in rows if m == "new") == sorted(map(key, evaluate(kept["new"], second)))
    assert not any(m == names[0] for m, _ in rows[len(early):])
