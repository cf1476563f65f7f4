"""Query-set changes that never stop the stream: registering, stopping, starting,
patching and deleting a query on a running stream change its query set at the
next micro-batch (control rows: `greta_stream.spark.control`), the Spark stream
running on (the same run: its batch count never starts again), and every query's
rows are what it gives alone over the events it saw. `/plan` names each query
beside its id; a stream left with no running query says it holds the stopped ones."""

from __future__ import annotations

import json
import time

import pytest
from service_helpers import FLUSH, Q1, Service, all_results, normalized, sample_events, settled, wait_for, write_file

from greta_stream import evaluate

pytestmark = pytest.mark.service

UP = Q1.replace("S.price > NEXT(S).price", "S.price < NEXT(S).price")


def test_queries_join_and_leave_a_running_stream_without_a_restart(service: Service) -> None:
    events = sorted(sample_events(), key=lambda e: e["time"])
    first, second, third = events[:700], events[700:1400], events[1400:]
    src, base = service.root / "in-live", time.time() - 3600
    src.mkdir()

    def body(name: str, text: str) -> dict:
        return {"name": name, "text": text, "source": {"format": "jsonl", "path": str(src),
                                                       "max_files_per_trigger": 1},
                "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}], "options": {"shards": 2}}

    def stream() -> dict:  # the source's stream, in /plan
        (found,) = [s for s in api.get("/plan").json()["streams"] if s["stream"] == key]
        return found

    with service.client() as api:
        r = api.post("/queries", json=body("live-a", Q1))
        assert r.status_code == 201, r.text
        a = r.json()["id"]
        write_file(src, "events-0.jsonl", first, stamp=base)
        wait_for(lambda: api.get(f"/queries/{a}").json()["progress"]["stream_batches"] >= 2, "a few batches", service)
        key = api.get(f"/queries/{a}").json()["progress"]["stream"]
        before = stream()
        batches = api.get(f"/queries/{a}").json()["progress"]["stream_batches"]

        r = api.post("/queries", json=body("live-b", UP))
        assert r.status_code == 201, r.text
        b = r.json()["id"]
        after = stream()
        assert after["changes_without_restart"] == before["changes_without_restart"] + 1
        # each query by its name beside its id: in the lists, each query's entry, each unit and the text
        assert (after["queries"], after["names"]) == ([a, b], ["live-a", "live-b"])
        assert [(q["id"], q["name"], q["lateness_s"]) for q in after["by_query"]] == [(a, "live-a", 0), (b, "live-b", 0)]
        assert all(u["names"] == [after["query_names"][q] for q in u["queries"]] for u in after["units"])
        assert f"live-a [{a}]" in after["text"] and f"live-b [{b}]" in after["text"]
        assert after["query_set_version"] == before["query_set_version"] + 1  # no Spark stream stopped or started
        # the same run of the stream: its batch count goes on (a restart starts it again)
        wait_for(lambda: api.get(f"/queries/{b}").json()["progress"]["stream_batches"] > batches,
                 "a batch of the same run with the new query", service)
        write_file(src, "events-1.jsonl", second, stamp=base + 1)
        wait_for(lambda: api.get(f"/queries/{b}").json()["progress"]["batches"] >= 1, "b's first batch", service)

        assert api.post(f"/queries/{a}/stop").json()["status"] == "stopped"  # a leaves; b goes on
        assert stream()["changes_without_restart"] == before["changes_without_restart"] + 2
        write_file(src, "events-2.jsonl", [*third, FLUSH], stamp=base + 2)
        want_b = evaluate(UP, second + third)
        wait_for(settled(api, b, len(want_b)), "b's windows", service)
        assert normalized(all_results(api, b)) == normalized(want_b)
        assert api.get(f"/queries/{a}").json()["status"] == "stopped"
        assert api.get(f"/queries/{b}").json()["progress"]["stream_batches"] > batches  # never started again
        # nothing piles up: Spark deletes a control row's file once the batch that read it is committed
        (rows,) = [p for p in service.root.rglob("control/rows") if p.is_dir() and key in str(p)]
        wait_for(lambda: len([f for f in rows.iterdir() if not f.name.startswith(".")]) <= 1,
                 "the read control rows' files deleted", service)
        # and the query sets before the one every shard took go: two changes, one set left
        assert [p.name for p in (rows.parent / "sets").glob("qs-*.pkl")] == [
            f"qs-{stream()['query_set_version']:010d}.pkl"]

        assert api.delete(f"/queries/{b}").status_code == 204  # no query runs: the stream holds a, stopped
        assert api.delete(f"/queries/{a}").status_code == 204
    lines = [json.loads(line) for line in service.log.read_text(errors="replace").splitlines() if line.startswith("{")]
    said = [r["message"] for r in lines if r["logger"] == "greta_service" and f"stream {key} " in r["message"]]
    assert any(" holds " in m and "without a restart: live-a" in m for m in said), said
    assert not [m for m in said if "takes 0 queries" in m]
