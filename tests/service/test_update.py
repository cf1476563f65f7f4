"""`PATCH /queries/{id}`: new sinks keep a query's state and results; a new text starts both afresh.

The source is one folder read a file per micro-batch (modification times in
file order). A sink change between the two halves of the input must give
exactly `evaluate` over all of it (windows spanning the change included), the
rows split between the old and the new sink with none twice; a text change
clears the stored rows and the query sees the input from the stream's
position on, as a new query would.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from service_helpers import (
    FLUSH,
    Q1,
    Service,
    all_results,
    normalized,
    query_progress,
    sample_events,
    settled,
    wait_for,
    write_file,
)

from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir

pytestmark = pytest.mark.service

WIDE = Q1.replace("WITHIN 10 minutes", "WITHIN 20 minutes")


def register(api, service: Service, name: str):  # noqa: ANN001, ANN201
    spec = {"name": name, "text": Q1,
            "source": {"format": "jsonl", "path": str(service.root / f"in-{name}"), "max_files_per_trigger": 1},
            "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}-a")}], "options": {"shards": 2}}
    (service.root / f"in-{name}").mkdir()
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def halves() -> tuple[list, list, list]:
    events = sorted(sample_events(), key=lambda e: e["time"])
    return events, events[:1000], events[1000:]


def with_rows(api, service: Service, name: str, first: list) -> tuple[str, Path, float]:  # noqa: ANN001
    """Query `name` registered, its source's first file (`first`) written and some of its rows stored:
    its id, its source folder and the files' first modification time."""
    src, base = service.root / f"in-{name}", time.time() - 3600
    query_id = register(api, service, name)
    write_file(src, "events-0.jsonl", first, stamp=base)
    wait_for(lambda: api.get(f"/queries/{query_id}").json()["progress"]["result_rows"] > 0, "rows", service)
    return query_id, src, base


def test_new_sinks_keep_the_state_and_the_rows(service: Service) -> None:
    events, first, second = halves()
    with service.client() as api:
        query_id, src, base = with_rows(api, service, "upd-sinks", first)
        before = api.get(f"/queries/{query_id}").json()["progress"]["result_rows"]
        r = api.patch(f"/queries/{query_id}", json={"sinks": [{"format": "jsonl",
                                                               "path": str(service.root / "out-upd-sinks-b")}]})
        assert r.status_code == 200, r.text
        assert r.json()["sinks"][0]["path"].endswith("out-upd-sinks-b") and r.json()["status"] == "running"
        assert r.json()["progress"]["result_rows"] >= before  # kept
        write_file(src, "events-1.jsonl", [*second, FLUSH], stamp=base + 1)
        want = evaluate(Q1, events)
        wait_for(settled(api, query_id, len(want)), "every window", service)
        assert normalized(all_results(api, query_id)) == normalized(want)
        assert api.delete(f"/queries/{query_id}").status_code == 204
    sinks = [list(read_jsonl_dir(service.root / f"out-upd-sinks-{x}")) for x in "ab"]
    assert all(sinks) and normalized(sinks[0] + sinks[1]) == normalized(want)


def test_a_new_text_starts_afresh_where_the_stream_is(service: Service) -> None:
    _, first, second = halves()
    with service.client() as api:
        query_id, src, base = with_rows(api, service, "upd-text", first)
        r = api.patch(f"/queries/{query_id}", json={"text": WIDE})
        assert r.status_code == 200, r.text
        assert (r.json()["id"], r.json()["name"], r.json()["text"]) == (query_id, "upd-text", WIDE)
        assert r.json()["progress"]["result_rows"] == 0 and all_results(api, query_id) == []
        write_file(src, "events-1.jsonl", [*second, FLUSH], stamp=base + 1)
        want = evaluate(WIDE, second)
        wait_for(settled(api, query_id, len(want)), "the new text's windows", service)
        assert normalized(all_results(api, query_id)) == normalized(want)

        bad = api.patch(f"/queries/{query_id}", json={"text": "RETURN COUNT(*) PATTERN S+ WITHIN"})
        assert bad.status_code == 422 and bad.json()["errors"][0]["line"] == 1
        assert api.get(f"/queries/{query_id}").json()["text"] == WIDE  # a refused update changes nothing
        assert api.patch(f"/queries/{query_id}", json={"source": {"format": "jsonl"}}).status_code == 422
        assert api.patch("/queries/nope", json={"text": WIDE}).status_code == 404
        assert api.delete(f"/queries/{query_id}").status_code == 204


def test_a_stopped_query_alone_on_its_source_skips_what_arrived_while_it_was_stopped(service: Service) -> None:
    """Its stream goes on holding it (reading, evaluating nothing): started again,
    the query goes on from its state with the input that arrives from then on."""
    events = sorted(sample_events(), key=lambda e: e["time"])
    first, missed, last = events[:700], events[700:1400], events[1400:]
    src, base = service.root / "in-upd-alone", time.time() - 3600
    with service.client() as api:
        query_id = register(api, service, "upd-alone")
        write_file(src, "events-0.jsonl", first, stamp=base)
        # the stream's first batch may hold its control row alone: stop once the query has read the file
        wait_for(lambda: query_progress(api, query_id).get("input_rows", 0) >= len(first), "the first file read",
                 service)
        stream = api.get(f"/queries/{query_id}").json()["progress"]["stream"]
        assert api.post(f"/queries/{query_id}/stop").json()["status"] == "stopped"
        offsets = service.data / "checkpoints" / stream / "offsets"
        read = len(list(offsets.glob("[0-9]*")))
        write_file(src, "events-1.jsonl", missed, stamp=base + 1)
        wait_for(lambda: len(list(offsets.glob("[0-9]*"))) > read, "the holding stream to read the file", service)
        time.sleep(2)  # its batch commits
        assert api.post(f"/queries/{query_id}/start").json()["status"] == "running"
        write_file(src, "events-2.jsonl", [*last, FLUSH], stamp=base + 2)
        want = evaluate(Q1, first + last)
        wait_for(settled(api, query_id, len(want)), "every window", service)
        assert normalized(all_results(api, query_id)) == normalized(want)
        assert api.delete(f"/queries/{query_id}").status_code == 204


def test_new_field_names_move_the_query_to_the_stream_that_reads_them(service: Service) -> None:
    """A stream is one source read with one set of field names: a query given new field names
    leaves its stream (which runs on without it) for the stream that reads them."""
    _, first, second = halves()
    with service.client() as api:
        query_id, src, base = with_rows(api, service, "upd-fields", first)
        old = api.get(f"/queries/{query_id}").json()["progress"]["stream"]
        r = api.patch(f"/queries/{query_id}", json={"options": {"shards": 2, "fields": {"type": "kind"}}})
        assert r.status_code == 200, r.text
        new = r.json()["progress"]["stream"]
        assert new != old
        running = {s["stream"]: s["query_names"] for s in api.get("/plan").json()["streams"]}
        assert query_id in running[new] and query_id not in running.get(old, {})  # not on both streams
        renamed = [{**{k: v for k, v in e.items() if k != "type"}, "kind": e["type"]} for e in second]
        write_file(src, "events-1.jsonl", [*renamed, {"kind": "Flush", "time": 10**6}], stamp=base + 1)
        want = evaluate(Q1, renamed, type_field="kind")
        wait_for(settled(api, query_id, len(want)), "the windows of the renamed events", service)
        assert normalized(all_results(api, query_id)) == normalized(want)
        assert api.delete(f"/queries/{query_id}").status_code == 204
