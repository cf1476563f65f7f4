"""The service with Delta sinks: a registered query's rows and dead letters
land in Delta tables equal to `evaluate` (read back with delta-rs), and
Delta-only settings on another format are refused with a message."""

from __future__ import annotations

import httpx
import pytest
from deltalake import DeltaTable
from service_helpers import FLUSH, Q1, Service, sample_events, settled, wait_for, write_file

from greta_stream import evaluate

pytestmark = pytest.mark.service


def test_rows_and_dead_letters_go_to_delta_tables(api: httpx.Client, service: Service) -> None:
    events = sample_events()
    expected = evaluate(Q1, events)
    src = service.root / "in-delta"
    write_file(src, "events.jsonl", [*events, "{not json"])
    spec = {"name": "q1-delta", "text": Q1, "source": {"format": "jsonl", "path": str(src)},
            "sinks": [{"format": "delta", "path": str(service.root / "delta-rows"), "partition_by": ["sector"]}],
            "dead_letter": {"format": "delta", "path": str(service.root / "delta-dead")},
            "options": {"shards": 2}}
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    query_id = r.json()["id"]
    write_file(src, "flush.jsonl", [FLUSH], stamp=None)
    wait_for(settled(api, query_id, len(expected)), "the Delta rows", service)

    table = DeltaTable(str(service.root / "delta-rows"))
    got = sorted((float(r["window_start"]), int(r["sector"]), int(r["count"]), round(r["avg_S_price"], 9))
                 for r in table.to_pandas().to_dict("records"))
    want = sorted((float(r["window_start"]), int(r["sector"]), int(r["count"]), round(r["avg_S_price"], 9))
                  for r in expected)
    assert got == want and want
    assert table.metadata().partition_columns == ["sector"]
    dead = DeltaTable(str(service.root / "delta-dead")).to_pandas()
    assert dead["reason"].tolist() == ["malformed"]
    assert api.delete(f"/queries/{query_id}").status_code == 204


def test_delta_settings_on_another_format_are_refused(api: httpx.Client, service: Service) -> None:
    spec = {"name": "not-delta", "text": Q1, "source": {"format": "jsonl", "path": str(service.root)},
            "sinks": [{"format": "jsonl", "path": str(service.root / "x"), "partition_by": ["sector"]}]}
    r = api.post("/queries", json=spec)
    assert r.status_code == 422 and "partition_by apply to delta sinks only" in r.text
