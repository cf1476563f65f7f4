"""A query registered through the service (`POST /queries`) with a Kafka source and Kafka sinks.

`greta-stream serve` runs as a subprocess on a free loopback port; the query's
source and sinks are the pipeline's Kafka formats, selected by field name. The
result topic and the service's own results store both equal `evaluate`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_process import serving

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.demo.broker import KafkaBroker, consume_all, produce

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

API_KEY = "kafka-test-key-0123456789"
QUERY = ("RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price "
         "GROUP-BY sector WITHIN 60 s SLIDE 20 s")
FLUSH = {"type": "Flush", "time": 100_000}


@pytest.fixture
def service(tmp_path: Path, subprocesses: None) -> Iterator[str]:
    """`greta-stream serve` on a free loopback port; yields its base URL."""
    with serving(tmp_path, API_KEY) as url:
        yield url


def test_query_with_kafka_source_and_sink_through_the_service(service: str, kafka_broker: KafkaBroker, topics,  # noqa: ANN001
                                                              generators) -> None:  # noqa: ANN001
    import httpx

    source, results, dead = topics("events", "results", "dead", partitions=2)
    events = generators.stock(800, seed=7, companies=6, sectors=3, rate=10)
    expected = evaluate(QUERY, events)
    produce(kafka_broker.bootstrap, source, [*events, "{not json"],
            key=lambda e: e.get("company") if isinstance(e, dict) else None)
    kafka = {"format": "kafka", "bootstrap_servers": kafka_broker.bootstrap}
    name = f"kafka-{uuid.uuid4().hex[:8]}"
    body = {
        "name": name, "text": QUERY,
        "source": {**kafka, "topic": source, "options": {"maxOffsetsPerTrigger": "500"}},
        "sinks": [{**kafka, "topic": results}], "dead_letter": {**kafka, "topic": dead},
        "options": {"lateness_s": 60, "shards": 2},
    }
    with httpx.Client(base_url=service, headers={"X-API-Key": API_KEY}, timeout=120) as api:
        r = api.post("/queries", json=body)
        assert r.status_code == 201, r.text
        query_id = r.json()["id"]
        produce(kafka_broker.bootstrap, source, [FLUSH])

        deadline = time.monotonic() + 300
        while len({m["key"] for m in consume_all(kafka_broker.bootstrap, results)}) < len(expected):
            info = api.get(f"/queries/{query_id}").json()
            assert info["status"] != "failed", info
            assert time.monotonic() < deadline, f"{len(expected)} rows expected; {info}"
            time.sleep(1)
        stored = _all_results(api, query_id)
        assert api.post(f"/queries/{query_id}/stop").status_code == 200

    messages = consume_all(kafka_broker.bootstrap, results)
    assert Counter(m["key"] for m in messages).most_common(1)[0][1] == 1  # no key twice
    assert {m["headers"]["greta.query"] for m in messages} == {name}
    assert _normalized([json.loads(m["value"]) for m in messages]) == _normalized(expected)
    assert _normalized(stored) == _normalized(expected)
    assert [json.loads(d["value"])["reason"] for d in consume_all(kafka_broker.bootstrap, dead)] == ["malformed"]


def _all_results(api: Any, query_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        r = api.get(f"/queries/{query_id}/results", params={"limit": 1000, "offset": offset})
        assert r.status_code == 200, r.text
        page = loads(r.text)
        rows += page["rows"]
        offset = page["next_offset"]
    return rows


def _normalized(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(dumps(loads(dumps(r))) for r in rows)
