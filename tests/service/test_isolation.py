"""Through the service: a query's failure, its options and hostile input stay
its own, and nothing of the input is lost without a row or a dead letter.

- a query whose sink dies fails alone, with a one-line error; the stream's
  other query goes on; its progress shows the output kept for the sink;
  started again, it delivers what its sink could not take, nothing lost;
- a stream's shard count is the stream's: a query asking for another is
  refused with the reason;
- poison lines (nested too deep, not UTF-8, a key given twice) and an event
  far in the future are dead letters; the rows are `evaluate`'s;
- `GET /queries` and `/metrics` with 100 queries answer in about a second.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from service_helpers import (
    FLUSH,
    Q1,
    Service,
    all_results,
    normalized,
    sample_events,
    wait_for,
    write_file,
)

from greta_stream import evaluate
from greta_stream.testing.hostile import POISON_LINES

pytestmark = pytest.mark.service

UP = Q1.replace("S.price > NEXT(S).price", "S.price < NEXT(S).price")


def spec(service: Service, name: str, text: str, source: str, sink: Path, **options: object) -> dict:
    return {"name": name, "text": text, "source": {"format": "jsonl", "path": str(service.root / source),
                                                   "max_files_per_trigger": 1},
            "sinks": [{"format": "jsonl", "path": str(sink)}], "options": {"lateness_s": 0, **options}}


def status(api, query_id: str) -> dict:  # noqa: ANN001
    return api.get(f"/queries/{query_id}").json()


def stored(api, query_id: str, n: int):  # noqa: ANN001, ANN201
    return lambda: status(api, query_id)["progress"]["result_rows"] >= n


def test_a_dead_sink_fails_its_query_alone_and_nothing_is_lost(service: Service) -> None:
    events = sample_events()
    src = service.root / "in-dead-sink"
    blocked = service.root / "out-dead-sink-b"
    src.mkdir()
    with service.client() as api:
        r = api.post("/queries", json=spec(service, "dead-a", Q1, "in-dead-sink", service.root / "out-dead-sink-a"))
        assert r.status_code == 201, r.text
        a = r.json()["id"]
        r = api.post("/queries", json=spec(service, "dead-b", UP, "in-dead-sink", blocked))
        assert r.status_code == 201, r.text
        b = r.json()["id"]
        shutil.rmtree(blocked)  # the sink dies: a file where its folder was, every write into it fails
        blocked.write_text("not a folder")
        base = time.time() - 600
        write_file(src, "events.jsonl", events, stamp=base)
        write_file(src, "flush.jsonl", [FLUSH], stamp=base + 1)
        failed = wait_for(lambda: status(api, b)["status"] == "failed" and status(api, b), "the query to fail", service)
        assert "\n" not in failed["error"] and "Traceback" not in failed["error"] and len(failed["error"]) <= 300
        assert failed["progress"]["spooled_batches"] >= 1 and failed["progress"]["spooled_bytes"] > 0  # kept for it
        want_a = evaluate(Q1, events)
        wait_for(stored(api, a, len(want_a)), "the other query's rows", service)
        assert status(api, a)["status"] == "running"
        assert normalized(all_results(api, a)) == normalized(want_a)

        blocked.unlink()  # the sink comes back: started again, the query delivers what it kept
        assert api.post(f"/queries/{b}/start").json()["status"] == "running"
        want_b = evaluate(UP, events)
        wait_for(stored(api, b, len(want_b)), "the restarted query's kept rows", service)
        assert normalized(all_results(api, b)) == normalized(want_b)
        files = [json.loads(line) for f in blocked.glob("part-*.jsonl") for line in f.read_text().splitlines()]
        assert normalized(files) == normalized(want_b)
        assert status(api, b)["progress"]["spooled_batches"] == status(api, b)["progress"]["spooled_bytes"] == 0


def test_the_shard_count_is_the_streams(service: Service) -> None:
    events = sample_events()[:200]
    write_file(service.root / "in-shards", "events.jsonl", events, stamp=time.time() - 600)
    with service.client() as api:
        r = api.post("/queries", json=spec(service, "shards-a", Q1, "in-shards", service.root / "o-sa", shards=2))
        assert r.status_code == 201, r.text
        a = r.json()["id"]
        wait_for(lambda: status(api, a)["progress"]["batches"] > 0, "a first batch", service)
        r = api.post("/queries", json=spec(service, "shards-b", UP, "in-shards", service.root / "o-sb", shards=3))
        assert r.status_code == 422, r.text
        assert "has 2 shards" in r.json()["detail"]
        r = api.post("/queries", json=spec(service, "shards-c", UP, "in-shards", service.root / "o-sc"))
        assert r.status_code == 201, r.text
        assert status(api, a)["status"] == "running"


def test_poison_lines_and_far_future_events_are_dead_letters(service: Service) -> None:
    events = sorted(sample_events(), key=lambda e: e["time"])
    src = service.root / "in-poison"
    src.mkdir()
    base = time.time() - 600
    poison = [line for line, _ in POISON_LINES]
    (src / "a.jsonl").write_bytes(b"\n".join([json.dumps(e).encode() for e in events[:1000]] + poison) + b"\n")
    os.utime(src / "a.jsonl", (base, base))
    far = [{"type": "Stock", "time": 4_000_000_000, "company": 1, "sector": 1, "price": 5},  # 2096
           {"type": "Stock", "time": time.time() + 10 * 86_400, "company": 2, "sector": 2, "price": 5}]  # 10 days
    write_file(src, "b.jsonl", far, stamp=base + 1)
    write_file(src, "c.jsonl", events[1000:], stamp=base + 2)
    # Spark's watermark now stands ten days ahead: each shard goes by its own events,
    # so the end of input is an event of each group (each shard sees one)
    write_file(src, "d.jsonl", [{**FLUSH, "sector": s} for s in sorted({e["sector"] for e in events})],
               stamp=base + 3)
    with service.client() as api:
        r = api.post("/queries", json=spec(service, "poison", Q1, "in-poison", service.root / "out-poison"))
        assert r.status_code == 201, r.text
        q = r.json()["id"]
        want = evaluate(Q1, events)
        wait_for(stored(api, q, len(want)), "every window", service)
        assert normalized(all_results(api, q)) == normalized(want)
        progress = status(api, q)["progress"]
        # Q1 groups by sector: a company given twice is read as Spark and Python agree it is (the last);
        # that line has no sector
        assert progress["dead_letters_by_reason"] == {"malformed": 3, "missing_attribute": 1, "future": 2}


def test_listing_and_metrics_with_a_hundred_queries_answer_at_once(tmp_path: Path) -> None:
    """100 queries on one stream fed by 45 files (registered in the store before the service
    starts: it resumes them on one stream). Each answer reads what Spark's listener kept; none
    calls into Spark: the client's 30-second timeout would fail a request that took minutes."""
    from greta_service.store import QueryRecord, SQLiteStore

    svc = Service(tmp_path)
    src = tmp_path / "in-many"
    write_file(src, "events.jsonl", sample_events()[:100], stamp=time.time() - 600)
    for i in range(45):
        write_file(src, f"more-{i}.jsonl", [{"type": "Other", "time": i}], stamp=time.time() - 500 + i)
    store = SQLiteStore(svc.data / "greta.sqlite")
    for i in range(100):
        store.save_query(QueryRecord(f"many{i:03d}", f"many-{i}", Q1.replace("10 minutes", f"{10 + i} minutes"),
                                     source={"format": "jsonl", "path": str(src)},
                                     sinks=[{"format": "jsonl", "path": str(tmp_path / f"out-{i}")}],
                                     options={"lateness_s": 0.0}, created_at=i))
    store.close()
    svc.start()
    try:
        with svc.client() as api:
            wait_for(lambda: all(q["progress"]["batches"] > 0 for q in api.get("/queries").json()["queries"]),
                     "a batch of every query", svc, deadline_s=600)
            timings = {}
            for path in ("/queries", "/queries/many050", "/metrics", "/queries"):
                started = time.monotonic()
                r = api.get(path, timeout=30)
                timings[path] = round(time.monotonic() - started, 3)
                assert r.status_code == 200, r.text
            assert len(api.get("/queries").json()["queries"]) == 100
            print("seconds per request with 100 queries:", timings)
    finally:
        svc.stop()


def test_a_querys_state_size_outlives_its_stream_runs(service: Service) -> None:
    """The state budget counts a stopped, restarted or patched query's state from its last
    batch (stored), not 0 until a shard runs again."""
    write_file(service.root / "in-state", "events.jsonl", sample_events()[:1500], stamp=time.time() - 600)
    with service.client() as api:
        r = api.post("/queries", json=spec(service, "state-size", Q1, "in-state", service.root / "out-state"))
        assert r.status_code == 201, r.text
        q = r.json()["id"]
        wait_for(lambda: status(api, q)["progress"]["state_bytes"], "a state size", service)
        stopped = api.post(f"/queries/{q}/stop").json()["progress"]["state_bytes"]
        assert stopped > 0 and status(api, q)["progress"]["state_bytes"] == stopped  # its last batch's
        assert api.post(f"/queries/{q}/start").json()["progress"]["state_bytes"] > 0
        r = api.patch(f"/queries/{q}", json={"options": {"lateness_s": 5}})
        assert r.status_code == 200, r.text
        assert r.json()["progress"]["state_bytes"] > 0
