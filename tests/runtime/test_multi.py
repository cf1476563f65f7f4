"""Many queries over one stream: every query's rows and dead letters are what it gives alone.

The shard step runs a `QuerySet` with one `MultiRunner` per shard; here it
is driven over random query sets (windows, slides, edge directions, GROUP-BY,
aggregates, local constants, lateness, a CET query, a general-engine query),
random streams with bad and late events, random micro-batch splits and shard
counts, and compared query by query with the same query run alone.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from greta_stream import MultiRunner, QuerySet, RunSpec, evaluate, plan_units
from greta_stream.testing.shards import OperatorSim


def template(i: int) -> str:
    """One query of a family of Q1 variants; i picks windows, direction, grouping, aggregates, constants."""
    within, slide = [(20, 10), (30, 10), (40, 20)][i % 3]
    op = "><"[(i // 3) % 2]
    group = ["sector", "company", None][(i // 6) % 3]
    aggs = ["COUNT(*)", "COUNT(*), AVG(S.price)", "SUM(S.price), MAX(S.price)"][(i // 18) % 3]
    local = ["", " AND S.price > 100"][(i // 54) % 2]
    ret = f"{group}, {aggs}" if group else aggs
    by = f" GROUP-BY {group}" if group else ""
    return (f"RETURN {ret} PATTERN Stock S+ WHERE [company, sector] AND S.price {op} NEXT(S).price{local}"
            f"{by} WITHIN {within} s SLIDE {slide} s")


OTHERS = [
    # CET: one record per trend (a cap, so the lists stay short)
    "RETURN TRENDS PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector "
    "WITHIN 10 s SLIDE 10 s",
    # the general engine: a middle NOT and a second type
    "RETURN sector, COUNT(*) PATTERN SEQ(Stock S+, NOT Halt H, Stock T) WHERE [sector] GROUP-BY sector "
    "WITHIN 20 s SLIDE 10 s",
]


def stream(seed: int, n: int = 120, bad_time: bool = False, int_prices: bool = False,
           text_price: bool = False) -> list:
    """Stock events (float prices; with `int_prices` some are ints: a SUM over both
    sends the columnar engine to the general one), halts, bad events."""
    rnd = random.Random(seed)
    events: list = []
    prices = [98.0, 99.5, 100.0, 101.25, 102.0, 103.5] + ([99, 101] if int_prices else [])
    for i in range(n):
        c = rnd.randrange(4)
        events.append({"type": "Stock", "time": i // 2 + rnd.choice([0, 0.5]), "company": c, "sector": c % 2,
                       "price": rnd.choice(prices), "id": i})
    events += [{"type": "Halt", "time": rnd.randrange(n // 2), "sector": rnd.randrange(2), "id": f"h{k}"}
               for k in range(3)]
    events += [{"type": "Stock", "time": 5, "company": 1},  # no sector, no price: dead for every query
               "not an object"]
    if bad_time:  # text among numeric times: the columnar engine hands over to the general one
        events.append({"type": "Stock", "time": "soon", "company": 1, "sector": 1, "price": 1})
    if text_price:  # valid for a COUNT(*) query, dead for one that aggregates the price: a family splits
        events.append({"type": "Stock", "time": n // 4, "company": 2, "sector": 0, "price": "n/a", "id": "t"})
    return events


def spec_of(text: str, lateness: float) -> RunSpec:
    return RunSpec.create(text, lateness_s=lateness, max_trends=3 if "TRENDS" in text else None)


def drive(queries: QuerySet, batches: list[list], n_shards: int,
          incremental: bool = False) -> tuple[dict[str, list], dict[str, list]]:
    """Each query's rows and dead letters through the operator's shards (`OperatorSim`), `n_shards` per slot."""
    sim = OperatorSim(n_shards, incremental=incremental, rebuild=incremental)
    for batch in batches:
        sim.batch(queries, batch)
    sim.finish(queries)
    assert not sim.holds_state
    rows = {n: sim.rows.get(n, []) for n in queries.names}
    dead = {n: [d["reason"] for d in sim.dead.get(n, [])] for n in queries.names}
    return rows, dead


def split(events: list, n_batches: int, seed: int) -> list[list]:
    rnd = random.Random(seed)
    ordered = sorted(events, key=lambda e: e["time"] if isinstance(e, dict) and isinstance(e.get("time"), (int, float))
                     else 0)
    cuts = sorted(rnd.sample(range(1, len(ordered)), n_batches - 1))
    batches = [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, len(ordered)])]
    for b in batches:
        rnd.shuffle(b)
    return batches


def key(row: dict) -> str:
    return repr(sorted(row.items()))


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(0, 107), min_size=1, max_size=6, unique=True),
    st.lists(st.sampled_from([0, 4, 15]), min_size=8, max_size=8),
    st.booleans(), st.integers(0, 2**16), st.integers(1, 5), st.integers(1, 3), st.integers(0, 3),
)
def test_each_query_of_a_stream_gives_its_own_rows(picks: list[int], lateness: list[int], others: bool, seed: int,
                                                    n_batches: int, n_shards: int, bad_time: int) -> None:
    texts = [template(i) for i in picks] + (OTHERS if others else [])
    queries = QuerySet.of([(f"q{i}", spec_of(t, lateness[i % 8])) for i, t in enumerate(texts)])
    events = stream(seed, bad_time=bad_time == 0, int_prices=bad_time == 1, text_price=bad_time == 2)
    batches = split(events, n_batches, seed)
    rows, dead = drive(queries, batches, n_shards, incremental=bad_time == 3)
    for name, spec in queries:
        alone = QuerySet.of({name: spec})
        want_rows, want_dead = drive(alone, batches, 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, want_rows[name])), name
        assert sorted(dead[name]) == sorted(want_dead[name]), name
        if lateness[0] == 0 and spec.lateness_s == 0 and n_batches == 1:
            got = sorted(map(key, rows[name]))
            assert got == sorted(map(key, evaluate(spec, events))), name


def test_a_restarted_stream_keeps_the_state_of_the_queries_it_still_has() -> None:
    """The query set changes between two micro-batches: a kept query goes on
    from its state, a new one starts empty, a removed one is dropped."""
    a, b, c = (spec_of(template(i), 0) for i in (0, 7, 20))
    events = stream(3)

    def before(e: object, t: float) -> bool:
        return isinstance(e, dict) and isinstance(e.get("time"), (int, float)) and e["time"] < t

    first = [e for e in events if before(e, 30)]
    second = [e for e in events if not before(e, 30)]
    multi = MultiRunner(QuerySet.of({"a": a, "b": b}))
    inf = lambda spec, kind: float("inf")  # noqa: E731
    wm = lambda spec, kind: 30  # noqa: E731
    multi.add_many(first)  # the first batch: no watermark yet
    early = multi.advance(wm)
    blob = multi.snapshot()
    later = MultiRunner.restore(QuerySet.of({"a": a, "c": c}), blob)
    later.add_many(second, wm)
    rows = early + later.advance(inf)
    got_a = sorted(key(r) for n, r in rows if n == "a")
    assert got_a == sorted(map(key, evaluate(a, events)))
    got_c = sorted(key(r) for n, r in rows if n == "c")
    assert got_c == sorted(map(key, evaluate(c, second)))  # it started at the stream's position
    assert [n for n, _ in rows[len(early):]] and all(n in ("a", "c") for n, _ in rows[len(early):])
    assert {n for n, _ in early} == {"a", "b"}


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**16), st.integers(2, 8), st.integers(1, 3))
def test_a_family_of_several_window_specs_and_groupings(seed: int, n_batches: int, n_shards: int) -> None:
    """Queries that differ only in windows and aggregates share one
    preparation and one pass per window spec; those of other GROUP-BY
    attributes are in other shards (a family each); each gets its own rows."""
    from greta_stream.runtime.planner import plan_units

    picks = [18, 19, 20, 24, 31, 36, 37, 38, 42]  # 3 window specs, 3 groupings, 2 aggregate lists, one direction
    queries = QuerySet.of([(f"q{i}", spec_of(template(i), 0)) for i in picks])
    units = plan_units(queries).units
    groupings = [{tuple(queries[n].query.group_by) for n in u.names} for u in units]
    assert sorted(map(sorted, groupings)) == [[()], [("company",)], [("sector",)]]  # a unit per GROUP-BY
    by_sector = next(u for u in units if queries[u.names[0]].query.group_by == ("sector",))
    assert len(by_sector.names) == 6 and len(by_sector.passes) == 3  # one family, a pass per window spec
    batches = split(stream(seed, n=200), n_batches, seed)
    rows, dead = drive(queries, batches, n_shards)
    for name, spec in queries:
        want_rows, want_dead = drive(QuerySet.of({name: spec}), batches, 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, want_rows[name])), name
        assert sorted(dead[name]) == sorted(want_dead[name]), name


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 6))
def test_a_family_whose_queries_validate_differently_splits_when_they_disagree(seed: int, n_batches: int) -> None:
    """COUNT(*) reads a price through its edge predicate only, AVG(S.price)
    needs it to be a number: one family until a text price comes; then each
    query gets the rows and dead letters it gets alone."""
    count, avg = template(0), template(18)  # the same but for AVG(S.price)
    queries = QuerySet.of({"count": spec_of(count, 0), "avg": spec_of(avg, 0)})
    assert len(plan_units(queries).units) == 1
    events = stream(seed, n=100, text_price=True)
    batches = split(events, n_batches, seed)
    rows, dead = drive(queries, batches, 1)
    for name, spec in queries:
        want_rows, want_dead = drive(QuerySet.of({name: spec}), batches, 1)
        assert sorted(map(key, rows[name])) == sorted(map(key, want_rows[name])), name
        assert sorted(dead[name]) == sorted(want_dead[name]), name
    assert "wrong_type" in dead["avg"] and "wrong_type" not in dead["count"]
    multi = MultiRunner(queries)
    for b in batches:
        multi.add_many(b)
    assert len(multi.units[0].parts) == 2  # split by validation


def test_queries_sharing_a_state_count_its_bytes_once() -> None:
    """A family's state is one blob under each of its queries' names: their sizes split it."""
    queries = QuerySet.of([(f"q{i}", spec_of(template(i), 0)) for i in (18, 19, 20)])  # one family
    multi = MultiRunner(queries)
    multi.add_many(stream(1, n=200))
    blob = multi.snapshot()
    sizes = multi.state_sizes
    assert len(multi.units) == 1 and all(sizes.values())
    family = len(next(iter(multi.units)).snapshot()["q18"][1])
    assert sum(sizes.values()) == family < len(blob)
