"""Restart the service (graceful, then kill -9 of the whole process with its JVM): queries resume from
their checkpoints and the results store ends with exactly the rows of `evaluate`, none lost, none twice.
Until Spark is up again (`/readyz` 503) a query to resume is listed as `starting`, not `running`.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from service_helpers import (
    API_KEY,
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
from greta_stream.connectors.sinks import read_jsonl_dir

pytestmark = pytest.mark.service


def test_restart_resumes_queries_with_no_result_lost_or_duplicated(service: Service) -> None:
    events = sorted(sample_events(), key=lambda e: e["time"])
    expected = evaluate(Q1, events)
    chunks = [events[k * 500:(k + 1) * 500] for k in range(4)]
    src, out = service.root / "in-restart", service.root / "out-restart"
    base = time.time() - 3600  # file source order = modification time order
    for k in (0, 1):  # one file per micro-batch (max_files_per_trigger): work is pending at each stop
        write_file(src, f"events-{k}.jsonl", chunks[k], stamp=base + k)
    spec = {"name": "q1-restart", "text": Q1, "sinks": [{"format": "jsonl", "path": str(out)}],
            "source": {"format": "jsonl", "path": str(src), "max_files_per_trigger": 1}, "options": {"shards": 2}}
    with service.client() as api:
        r = api.post("/queries", json=spec)
        assert r.status_code == 201, r.text
        query_id = r.json()["id"]
        idle = service.root / "in-restart-idle"
        idle.mkdir()
        r = api.post("/queries", json={**spec, "name": "q1-stays-stopped", "sinks": [],
                                       "source": {"format": "jsonl", "path": str(idle)}})
        assert r.status_code == 201, r.text
        stopped_id = r.json()["id"]
        assert api.post(f"/queries/{stopped_id}/stop").json()["status"] == "stopped"
        wait_for(batches_over(api, query_id, 0), "a first batch", service)
        before = api.get(f"/queries/{query_id}").json()["progress"]["batches"]

    service.stop()  # graceful: the lifespan stops the streams, their desired state stays "running"
    service.start(ready=False)
    with service.client() as api:
        # until Spark is up and its stream resumed, the query is listed as starting, not running
        listed = {q["id"]: q["status"] for q in api.get("/queries").json()["queries"]}
        cli = subprocess.run([sys.executable, "-m", "greta_stream", "queries", "list", "--url", service.url,
                              "--api-key", API_KEY], capture_output=True, text=True, timeout=120)
        assert api.get("/readyz").status_code == 503, "Spark came up during the test: it proves nothing"
        assert listed[query_id] == "starting" and listed[stopped_id] == "stopped"
        assert [line.split()[:3] for line in cli.stdout.splitlines() if query_id in line] == [
            ["q1-restart", query_id, "starting"]], cli.stdout + cli.stderr
        service.wait_ready()
        assert api.get(f"/queries/{query_id}").json()["status"] == "running"
        assert api.get(f"/queries/{stopped_id}").json()["status"] == "stopped"
        for k in (2, 3):
            write_file(src, f"events-{k}.jsonl", chunks[k], stamp=base + k)
        wait_for(batches_over(api, query_id, before), "a resumed batch", service)

    service.restart(hard=True)  # kill -9 of driver and JVM while files are pending, maybe mid-batch
    write_file(src, "flush.jsonl", [FLUSH], stamp=base + 4)
    with service.client() as api:
        assert api.get(f"/queries/{query_id}").json()["status"] == "running"
        wait_for(settled(api, query_id, len(expected)), "every window of Q1", service)
        # every file is in, the watermark passed every window: nothing more can come
        got = all_results(api, query_id)
        assert len(got) == len(expected)
        assert normalized(got) == normalized(expected)
        assert normalized(list(read_jsonl_dir(out))) == normalized(expected)
        info = api.get(f"/queries/{query_id}").json()
        assert info["progress"]["result_rows"] == len(expected)
        assert api.get(f"/queries/{stopped_id}").json()["status"] == "stopped"
