"""Changes sent while the service starts (Spark not up yet, /healthz answering):
a registration is checked at once and accepted (202, status `starting`), a
bad one refused with its position; stop and delete are kept too; once Spark
is up every change is applied and the rows are `evaluate`'s."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from service_helpers import FLUSH, Q1, Service, all_results, normalized, sample_events, settled, wait_for, write_file

from greta_stream import evaluate

pytestmark = pytest.mark.service


def test_changes_sent_while_the_service_starts_are_applied_when_spark_is_up(tmp_path: Path) -> None:
    service = Service(tmp_path)
    service.start(ready=False)
    try:
        with service.client() as api:
            assert api.get("/readyz").status_code != 200  # Spark takes seconds to start
            src = service.root / "in-early"
            events = sorted(sample_events(), key=lambda e: e["time"])
            write_file(src, "events.jsonl", [*events, FLUSH], stamp=time.time() - 600)

            def body(name: str, text: str = Q1) -> dict:
                return {"name": name, "text": text, "source": {"format": "jsonl", "path": str(src)},
                        "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}],
                        "options": {"shards": 2}}

            r = api.post("/queries", json=body("early"))
            assert r.status_code == 202, r.text
            assert r.json()["status"] == "starting" and r.json()["columns"]
            bad = api.post("/queries", json=body("bad", "RETURN COUNT(*) PATTERN S+ WITHIN"))
            assert bad.status_code == 422 and bad.json()["errors"][0]["line"] == 1
            gone = api.post("/queries", json=body("gone"))
            assert gone.status_code == 202, gone.text
            resting = api.post("/queries", json=body("resting"))
            assert resting.status_code == 202
            assert api.post("/queries/resting/stop").json()["status"] == "stopped"
            assert api.delete("/queries/gone").status_code == 204
            assert api.get("/readyz").status_code != 200, "Spark came up during the test: it proves nothing"

            service.wait_ready()
            early = wait_for(lambda: api.get("/queries/early").json()["status"] == "running"
                             and api.get("/queries/early").json(), "the early query running", service)
            want = evaluate(Q1, events)
            wait_for(settled(api, early["id"], len(want)), "its rows", service)
            assert normalized(all_results(api, early["id"])) == normalized(want)
            assert api.get("/queries/resting").json()["status"] == "stopped"
            assert api.get("/queries/gone").status_code == 404
            names = {q["name"] for q in api.get("/queries").json()["queries"]}
            assert names == {"early", "resting"}
    finally:
        service.stop()
