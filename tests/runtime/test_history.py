"""Out-of-order history with a lateness that covers it: nothing is "future", streamed rows equal `evaluate`.

A year of real hourly readings (vega_datasets' Seattle temperatures, numbers written as JSON encoders
write them: 39 beside 39.4) arrives in files that each hold a random part of the year, or a month each
in random order. `max_future_s` (30 days) counts from the newest time the watermark stands for, and
through each batch's own times: a batch spanning a year is history, not a jump ahead; a record years
ahead of everything is still `future`.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from greta_stream import QuerySet, RunSpec, evaluate, open_stream
from greta_stream.engine.ingest import reach
from greta_stream.testing.shards import OperatorSim

YEAR_S = 366 * 86_400
QUERIES = [
    "RETURN COUNT(*), MAX(W.temp), SUM(W.temp) PATTERN Weather W+ WHERE W.temp > NEXT(W).temp "
    "WITHIN 1 day SLIDE 12 hours",
    "RETURN COUNT(*), MIN(W.temp) PATTERN Weather W+ WITHIN 2 hours",
]


def readings() -> list[dict[str, Any]]:
    from vega_datasets import data

    frame = data.seattle_temps()
    seconds = frame["date"].to_numpy().astype("datetime64[s]").astype("int64")
    return [{"type": "Weather", "time": int(t), "temp": int(v) if float(v).is_integer() else float(v), "id": i}
            for i, (t, v) in enumerate(zip(seconds.tolist(), frame["temp"].tolist()))]


def key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(row.items()))


def in_random_parts(events: list[dict[str, Any]], n: int, seed: int) -> list[list[dict[str, Any]]]:
    shuffled = events[:]
    random.Random(seed).shuffle(shuffled)
    return [sorted(shuffled[i::n], key=lambda e: e["time"]) for i in range(n)]


def by_month_in_random_order(events: list[dict[str, Any]], seed: int) -> list[list[dict[str, Any]]]:
    months: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        months.setdefault((e["time"] - events[0]["time"]) // (31 * 86_400), []).append(e)
    order = list(months)
    random.Random(seed).shuffle(order)
    return [months[m] for m in order]


def test_reach_walks_the_times_in_steps_no_longer_than_the_bound() -> None:
    assert reach(0, [5, 40, 200, 70, 110], 35) == 70  # 70 -> 110 is a jump
    assert reach(0, np.array([5.0, np.nan, 40.0]), 35) == 40.0
    assert reach(10, [1, 2], 3) == 10 and reach(0, [], 3) == 0 and reach(0, [50], 35) == 0


@pytest.mark.parametrize("split", ["random-parts", "months-shuffled"])
@pytest.mark.parametrize("text", QUERIES, ids=["kleene-edge", "kleene-min"])
def test_history_out_of_order_loses_nothing_to_future(split: str, text: str) -> None:
    """Through the Spark operator's shards (`OperatorSim`): no dead letter, every row of `evaluate`."""
    events = readings()
    spec = RunSpec.create(text, lateness_s=YEAR_S)
    files = in_random_parts(events, 6, 0) if split == "random-parts" else by_month_in_random_order(events, 1)
    sim = OperatorSim(2)
    queries = QuerySet.of({"q": spec})
    for f in files:
        sim.batch(queries, f)
    sim.finish(queries)
    assert sim.dead.get("q", []) == []
    assert sorted(map(key, sim.rows["q"])) == sorted(map(key, evaluate(spec, events)))


@pytest.mark.parametrize("engine", ["columnar", "general"])
def test_a_runner_takes_a_batch_of_history_past_max_future_s(engine: str) -> None:
    """`open_stream`: after a first month, a batch holding the other eleven is history, not "future";
    a record decades ahead of it still is."""
    events = readings()
    first, rest = events[:744], events[744:]
    poison = {"type": "Weather", "time": events[-1]["time"] + 40 * 365 * 86_400, "temp": 1, "id": "poison"}
    spec = RunSpec.create(QUERIES[1], engine=engine, lateness_s=60)
    dead: list[Any] = []
    stream = open_stream(spec, dead_letter=dead.append)
    stream.add_many(first)
    rows = stream.advance(first[-1]["time"] - 60)
    stream.add_many([*rest[:100], poison, *rest[100:]])
    rows += stream.finish()
    assert [(d.reason, d.record["id"]) for d in dead] == [("future", "poison")]
    assert sorted(map(key, rows)) == sorted(map(key, evaluate(spec, events)))
