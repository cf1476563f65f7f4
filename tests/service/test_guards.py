"""Hostile requests against a real server: queries that nest or window without
bound, sources and sinks that reach beyond path_roots or to other hosts, a
stop that would hang. Each is refused (422) with a clear message, or bounded.

Assert the status first, then the body (STYLE.md).
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from service_helpers import Q1, Service, sample_events, write_file

pytestmark = pytest.mark.service

DEEP = "RETURN COUNT(*)\nPATTERN " + "SEQ(A, " * 300 + "B" + ")" * 300 + "\nWITHIN 10 s"  # within max_query_chars
WIDE = "RETURN COUNT(*)\nPATTERN A+\nWITHIN 1 day SLIDE 1 ms"


def body(service: Service, name: str, **over: object) -> dict:
    src = service.root / f"in-{name}"
    src.mkdir(exist_ok=True)
    spec = {"name": name, "text": Q1, "source": {"format": "jsonl", "path": str(src)},
            "sinks": [{"format": "jsonl", "path": str(service.root / f"out-{name}")}], "options": {"shards": 2}}
    return {**spec, **over}


@pytest.mark.parametrize(("text", "words", "line"), [
    (DEEP, "nests too deeply", 2), (WIDE, "max_windows_per_event = 1,000", 3),
])
def test_unbounded_queries_answer_422_with_a_position(api: httpx.Client, service: Service, text: str, words: str,
                                                       line: int) -> None:
    for r in (api.post("/queries/validate", json={"text": text}), api.post("/queries", json=body(service, "deep",
                                                                                                text=text))):
        assert r.status_code == 422, r.text
        (err,) = r.json()["errors"]
        assert words in err["msg"] and err["line"] == line and err["column"] >= 1


def test_sources_and_sinks_cannot_escape_the_roots_or_reach_other_hosts(api: httpx.Client, service: Service) -> None:
    root = str(service.root)
    elsewhere = str(service.root.parent)  # outside path_roots
    src = {"format": "jsonl", "path": root}
    cases = [
        ({"source": {"format": "jsonl", "path": None, "options": {"path": elsewhere}}}, "option(s) path are not allowed"),
        ({"source": {"format": "jsonl", "path": None}}, "needs a path"),
        ({"source": {**src, "options": {"path": elsewhere}}}, "option(s) path are not allowed"),
        ({"source": {**src, "options": {"PATH": elsewhere}}}, "option(s) PATH are not allowed"),
        ({"source": {**src, "options": {"cleanSource": "archive", "sourceArchiveDir": elsewhere}}},
         "cleanSource, sourceArchiveDir are not allowed"),
        ({"source": {**src, "options": {"cleanSource": "delete"}}}, "cleanSource are not allowed"),
        ({"source": {"format": "parquet"}}, "needs a path"),
        ({"sinks": [{"format": "jsonl"}]}, "needs a path"),
        ({"sinks": [{"format": "jsonl", "path": root + "/o", "options": {"path": elsewhere}}]}, "not allowed"),
        ({"dead_letter": {"format": "parquet", "path": elsewhere}}, "path_roots"),
        ({"source": {"format": "kafka", "topic": "t", "bootstrap_servers": "evil.example.com:9092"}},
         "Kafka host 'evil.example.com' is not allowed"),
        ({"source": {"format": "kafka", "topic": "t", "bootstrap_servers": "127.0.0.1:9092,10.0.0.1:9092"}},
         "Kafka host '10.0.0.1' is not allowed"),
        ({"source": {"format": "kafka", "topic": "t", "bootstrap_servers": "127.0.0.1:1",
                     "options": {"kafka.bootstrap.servers": "evil.example.com:9092"}}}, "not allowed"),
        ({"sinks": [{"format": "kafka", "topic": "t", "bootstrap_servers": "[::1]:1",
                     "options": {"kafka.ssl.truststore.location": "/etc/passwd"}}]}, "not allowed"),
        ({"source": {"format": "text", "path": root}}, "'jsonl', 'parquet' or 'kafka'"),
    ]
    for i, (over, words) in enumerate(cases):
        r = api.post("/queries", json=body(service, f"escape{i}", **over))
        assert r.status_code == 422, (i, r.text)
        assert words in r.text, (i, r.text)
    assert not [q for q in api.get("/queries").json()["queries"] if q["name"].startswith("escape")]


def test_stop_is_bounded_when_a_sink_hangs(api: httpx.Client, service: Service) -> None:
    """A Kafka sink at a port where nothing listens blocks its micro-batch; stop
    still answers within the stop_timeout_s setting (4 s here), twice over."""
    with socket.socket() as s:  # a loopback port with no broker
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    spec = body(service, "hang", sinks=[{"format": "kafka", "topic": "t", "bootstrap_servers": f"127.0.0.1:{dead}",
                                          "options": {"kafka.max.block.ms": "120000"}}])
    write_file(service.root / "in-hang", "events.jsonl", sample_events()[:200])
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    qid = r.json()["id"]
    time.sleep(8)  # the stream starts and its first micro-batch blocks in the sink
    started = time.monotonic()
    r = api.post(f"/queries/{qid}/stop", timeout=60)
    took = time.monotonic() - started
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "stopped"
    assert took < 2 * 4.0 + 5, took
    assert api.delete(f"/queries/{qid}").status_code == 204
