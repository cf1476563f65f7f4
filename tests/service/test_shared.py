"""Queries that read one source share one Spark stream: one read, one parse, one operator.

Adding, stopping or deleting a query restarts the stream from its checkpoint
with the new query set: the other queries lose and repeat nothing, a new
query starts at the stream's position, a backfill reads the source from the
start on a stream of its own.
"""

from __future__ import annotations

import time

import pytest
from service_helpers import (
    FLUSH,
    Q1,
    Service,
    all_results,
    batches_over,
    normalized,
    sample_events,
    settled,
    wait_for,
    write_file,
)

from greta_stream import evaluate

pytestmark = pytest.mark.service

UP = Q1.replace("S.price > NEXT(S).price", "S.price < NEXT(S).price")
WIDE = Q1.replace("WITHIN 10 minutes", "WITHIN 20 minutes")


def register(api, service: Service, name: str, text: str, **options: object):  # noqa: ANN001, ANN201
    spec = {"name": name, "text": text, "source": {"format": "jsonl", "path": str(service.root / "in-shared"),
                                                   "max_files_per_trigger": 1},
            "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}],
            "options": {"shards": 2, **options}}
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_queries_of_one_source_share_a_stream_that_restarts_as_queries_come_and_go(service: Service) -> None:
    events = sorted(sample_events(), key=lambda e: e["time"])
    first, second = events[:1000], events[1000:]
    src = service.root / "in-shared"
    base = time.time() - 3600  # the file source reads files in modification time order
    src.mkdir(parents=True, exist_ok=True)
    with service.client() as api:
        down = register(api, service, "shared-down", Q1)
        up = register(api, service, "shared-up", UP)
        # the file comes once both are registered: a query registered after a batch starts where the stream is
        write_file(src, "events-0.jsonl", first, stamp=base)
        wait_for(batches_over(api, down, 0), "a first batch", service)
        # the first file's closed windows leave on the batch after it (the watermark moves at a batch's end)
        wait_for(settled(api, up, 1), "the second query's first rows", service)
        infos = {q: api.get(f"/queries/{q}").json()["progress"] for q in (down, up)}
        assert infos[down]["stream"] == infos[up]["stream"] and infos[down]["stream_queries"] == 2
        plan = api.get("/plan").json()["streams"]
        mine = [p for p in plan if p["stream"] == infos[down]["stream"]]
        assert len(mine) == 1 and sorted(mine[0]["queries"]) == sorted([down, up])

        # stop one, add one: the stream restarts without and with them
        assert api.post(f"/queries/{up}/stop").json()["status"] == "stopped"
        wide = register(api, service, "shared-wide", WIDE)
        backfill = register(api, service, "shared-backfill", WIDE, backfill=True)
        assert api.get(f"/queries/{backfill}").json()["progress"].get("stream") != infos[down]["stream"]
        write_file(src, "events-1.jsonl", second, stamp=base + 1)
        write_file(src, "flush.jsonl", [FLUSH], stamp=base + 2)

        want_down = evaluate(Q1, events)
        wait_for(settled(api, down, len(want_down)), "every window of the first query", service)
        got_down = all_results(api, down)
        assert normalized(got_down) == normalized(want_down)  # nothing lost, nothing twice across the restarts
        want_wide = evaluate(WIDE, second)  # it joined the stream where the stream was: the second file on
        wait_for(settled(api, wide, len(want_wide)), "the added query's windows", service)
        assert normalized(all_results(api, wide)) == normalized(want_wide)
        want_backfill = evaluate(WIDE, events)
        wait_for(settled(api, backfill, len(want_backfill)), "the backfill", service)
        assert normalized(all_results(api, backfill)) == normalized(want_backfill)
        # the stopped query saw the first file only; deleting the others leaves it registered
        got_up = all_results(api, up)
        assert got_up and all(r["window_start"] <= first[-1]["time"] for r in got_up)
        for q in (down, wide, backfill, up):
            assert api.delete(f"/queries/{q}").status_code == 204
        assert [p for p in api.get("/plan").json()["streams"] if p["stream"] == infos[down]["stream"]] == []
