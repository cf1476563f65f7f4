"""Between two runs of the service: its data folder moved elsewhere (`greta_service.relocation`), and
queries put into its registry that today's registration checks refuse (`greta_service.recheck`).

A moved data folder runs on: a source inside it and one outside, sinks inside it, a stream that took
a query-set change (its control rows), every row once; nothing is written at the old place. A
query the checks refuse is failed with the check's message, not started, and the others run.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from service_helpers import (
    API_KEY,
    FLUSH,
    Q1,
    Service,
    all_results,
    batches_over,
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


def test_a_moved_data_folder_runs_on_with_every_row_once(tmp_path: Path) -> None:
    events = sorted(sample_events(), key=lambda e: e["time"])
    expected = evaluate(Q1, events)
    chunks = [events[k * 500:(k + 1) * 500] for k in range(4)]
    service = Service(tmp_path)
    outside, inside = tmp_path / "in-outside", service.data / "in"
    base = time.time() - 3600  # one file per micro-batch, in the order of their events
    for k in (0, 1):
        for folder in (outside, inside):
            write_file(folder, f"events-{k}.jsonl", chunks[k], stamp=base + k)

    def body(name: str, source: str, sink: str | None) -> dict:
        return {"name": name, "text": Q1, "source": {"format": "jsonl", "path": source, "max_files_per_trigger": 1},
                "sinks": [{"format": "jsonl", "path": sink}] if sink else [], "options": {"shards": 2}}

    service.start()
    try:
        with service.client() as api:
            ids = {}
            for name, source, sink in (("outside", str(outside), "out/outside"), ("inside", "in", "out/inside")):
                r = api.post("/queries", json=body(name, source, sink))
                assert r.status_code == 201, r.text
                ids[name] = r.json()["id"]
            wait_for(batches_over(api, ids["outside"], 0), "a first batch", service)
            r = api.post("/queries", json=body("joins", str(outside), None))  # taken by the running stream:
            assert r.status_code == 201, r.text                                # a control row in its log
            ids["joins"] = r.json()["id"]
            for name in ("outside", "inside"):
                wait_for(batches_over(api, ids[name], 1), f"two batches of {name}", service)
            wait_for(batches_over(api, ids["joins"], 0), "a batch of the query that joined", service)
        service.stop()

        old = service.data
        new = tmp_path / "elsewhere" / "data"
        new.parent.mkdir()
        shutil.move(old, new)
        service.data = new
        service.start()
        with service.client() as api:
            ready = api.get("/readyz").json()
            assert ready["status"] == "ready" and f"moved from {old}" in ready["detail"], ready
            assert str(outside) in ready["detail"]  # a path outside the data folder: kept as it is
            info = api.get(f"/queries/{ids['inside']}").json()
            assert info["source"]["path"] == str((new / "in").resolve())
            assert info["sinks"][0]["path"] == str((new / "out" / "inside").resolve())
            assert api.get(f"/queries/{ids['outside']}").json()["source"]["path"] == str(outside)
            for k in (2, 3):
                for folder in (outside, new / "in"):
                    write_file(folder, f"events-{k}.jsonl", chunks[k], stamp=base + k)
            for folder in (outside, new / "in"):
                write_file(folder, "flush.jsonl", [FLUSH], stamp=base + 4)
            for name in ("outside", "inside"):
                wait_for(settled(api, ids[name], len(expected)), f"every window of {name}", service)
                got = all_results(api, ids[name])
                assert len(got) == len(expected), name  # none lost, none read twice
                assert normalized(got) == normalized(expected), name
                assert normalized(list(read_jsonl_dir(new / "out" / name))) == normalized(expected), name
            assert query_progress(api, ids["joins"])["batches"] > 0
            assert api.get(f"/queries/{ids['joins']}").json()["status"] == "running"
        assert not old.exists(), "something was written at the data folder's old place"
    finally:
        service.stop()


def test_registered_queries_the_checks_refuse_now_are_failed_at_start_and_the_others_run(tmp_path: Path) -> None:
    service = Service(tmp_path)
    src, other_src, linked = tmp_path / "in", tmp_path / "in-other", tmp_path / "in-linked"
    for folder in (src, other_src, linked):
        folder.mkdir()
    service.start()
    try:
        with service.client() as api:
            r = api.post("/queries", json={"name": "good", "text": Q1, "source": {"format": "jsonl", "path": str(src)},
                                           "sinks": [{"format": "jsonl", "path": str(tmp_path / "out-good")}]})
            assert r.status_code == 201, r.text
            good = r.json()["id"]
    finally:
        service.stop()

    # what an older version (or a hand) may have left in the registry: each refused by a check of today
    os.symlink(service.data, linked / "back")
    db = sqlite3.connect(service.data / "greta.sqlite")
    record = json.loads(db.execute("SELECT record FROM queries WHERE id = ?", (good,)).fetchone()[0])
    bad = {
        "writes-into-a-source": {"source": {"format": "jsonl", "path": str(other_src)},
                                 "sinks": [{"format": "jsonl", "path": str(src / "rows")}]},
        "kafka-elsewhere": {"sinks": [{"format": "kafka", "topic": "t", "bootstrap_servers": "evil.example:9092"}]},
        "links-back": {"source": {"format": "jsonl", "path": str(linked)}, "sinks": []},
    }
    words = {"writes-into-a-source": "is inside the source folder", "kafka-elsewhere": "is not allowed",
             "links-back": "a link to the service's data folder"}
    for k, (name, change) in enumerate(bad.items()):
        rec = {**record, "id": f"bad{k:09d}", "name": name, "created_at": record["created_at"] + 1 + k, **change}
        db.execute("INSERT INTO queries (id, name, record) VALUES (?, ?, ?)", (rec["id"], name, json.dumps(rec)))
    db.commit()
    db.close()

    service.start()
    try:
        events = sorted(sample_events(), key=lambda e: e["time"])
        write_file(src, "events.jsonl", [*events, FLUSH], stamp=time.time() - 600)
        with service.client() as api:
            for k, name in enumerate(bad):
                info = api.get(f"/queries/bad{k:09d}").json()
                assert info["status"] == "failed" and words[name] in info["error"], info
                assert info["progress"].get("stream") is None, info  # not started, nor held by a stream
                r = api.post(f"/queries/{name}/start")
                assert r.status_code == 409 and words[name] in r.json()["detail"], r.text
            want = evaluate(Q1, events)
            wait_for(settled(api, good, len(want)), "the good query's rows", service)
            assert normalized(all_results(api, good)) == normalized(want)
            assert not (src / "rows").exists()
        listed = subprocess.run([sys.executable, "-m", "greta_stream", "queries", "list", "--url", service.url,
                                 "--api-key", API_KEY], capture_output=True, text=True, timeout=120).stdout
        lines = listed.splitlines()
        for name in bad:
            row = next(i for i, line in enumerate(lines) if line.startswith(name))
            assert lines[row].split()[2] == "failed" and lines[row + 1].startswith("  error: "), listed
            assert words[name] in lines[row + 1], listed
        log = service.log.read_text()
        assert all(f"query {name} (bad" in log for name in bad) and "refuse it now" in log
    finally:
        service.stop()

