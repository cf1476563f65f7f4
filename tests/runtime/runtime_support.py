"""Helpers for the runtime tests: a family of Q1 variants, other queries, a
stock stream with bad and late events, and the operator's shards driving a
`QuerySet` (tests are not a package: imported by name, as tests/cet/cet_support.py is).
"""

from __future__ import annotations

import random

from greta_stream import QuerySet, RunSpec
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
    # selection strategies and repetitions (the columnar engine's iteration lanes and taken marks; CET: the
    # general engine's state a vertex keeps per transition)
    "RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S{2,} SEMANTICS skip-till-next-match "
    "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN 20 s SLIDE 10 s",
    "RETURN TRENDS PATTERN SEQ(Stock S+, Halt H?, Stock T) SEMANTICS contiguous WHERE [sector] GROUP-BY sector "
    "WITHIN 10 s SLIDE 10 s",
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
