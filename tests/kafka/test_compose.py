"""docker-compose.yml's `register` step, run as it is written against the same topology as local processes.

The shell script of the compose file's one-shot `register` container runs
with the service's address and key in its environment (as compose sets
them) against `greta-stream serve` and a KRaft broker on loopback. It must
register the paper's three queries over the REST API, and, run twice, leave
them as they are; the sample events produced to the demo's topics must come
out as result rows in the service and on the `results` topic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from service_process import serving

from greta_stream.client import ServiceClient
from greta_stream.connectors.jsonl import loads
from greta_stream.demo.broker import KafkaBroker, consume_all, produce

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
QUERIES = {"q1_stock": "stock", "q2_cluster": "cluster", "q3_traffic": "traffic"}


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_the_service_container_serves_the_api_with_its_data_on_a_volume() -> None:
    svc = compose()["services"]["service"]
    assert svc["command"][:2] == ["greta-stream", "serve"] and "8000:8000" in svc["ports"]
    assert any(v.endswith(":" + svc["environment"]["GRETA_DATA_DIR"]) for v in svc["volumes"])
    register = compose()["services"]["register"]
    assert register["environment"]["GRETA_API_KEY"] == svc["environment"]["GRETA_API_KEY"]


@contextmanager
def registered(tmp_path: Path, kafka_broker: KafkaBroker) -> Iterator[ServiceClient]:
    """A service on loopback (with the broker's address) to which the `register` script has run twice: a
    second run (a `docker compose up` again) must change nothing."""
    spec = compose()["services"]["register"]
    script = spec["command"][0].replace("$$", "$")  # compose's escape of a literal $
    for topic in ("stock", "cluster", "traffic", "results", "dead-letters"):
        kafka_broker.create_topics([topic], partitions=1)
    with serving(tmp_path, spec["environment"]["GRETA_API_KEY"],
                 {"KAFKA_BOOTSTRAP_SERVERS": kafka_broker.bootstrap}) as url:
        env = {**os.environ, **spec["environment"], "GRETA_URL": url,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        for _ in range(2):
            done = subprocess.run(["/bin/sh", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
        client = ServiceClient(url, api_key=spec["environment"]["GRETA_API_KEY"])  # reads need the key too
        assert sorted(q["name"] for q in client.queries()) == sorted(QUERIES)
        yield client


def test_register_step_registers_the_three_queries_once(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    with registered(tmp_path, kafka_broker) as client:
        for q in client.queries():  # as the script wrote them: Kafka in, Kafka out, running
            assert (q["source"]["format"], q["source"]["topic"]) == ("kafka", QUERIES[q["name"]])
            assert [(k["format"], k["topic"]) for k in q["sinks"]] == [("kafka", "results")]
            assert (q["dead_letter"]["format"], q["dead_letter"]["topic"]) == ("kafka", "dead-letters")
            assert q["options"]["lateness_s"] == 5 and q["status"] in ("starting", "running"), q


# The samples through Kafka to rows is test_service_kafka's path (a Kafka source and sink through the service)
# and test_demo's (the three queries, Kafka in and out): here it is a second look, in the nightly tier.
@pytest.mark.nightly
def test_the_registered_queries_turn_the_samples_into_rows(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    with registered(tmp_path, kafka_broker) as client:
        for topic in QUERIES.values():
            sample = ROOT / "samples" / topic / "events.jsonl"
            events = [loads(line) for line in sample.read_text().splitlines() if line.strip()]
            produce(kafka_broker.bootstrap, topic, events)  # windows close as the watermark passes them
        for name in QUERIES:
            client.wait(name, rows=1, timeout_s=300)
    queries = {json.loads(m["value"]).get("query") or m["headers"].get("greta.query")
               for m in consume_all(kafka_broker.bootstrap, "results")}
    assert set(QUERIES) <= queries
