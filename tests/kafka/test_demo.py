"""`greta-stream demo`: the docker-compose.yml topology as local processes, run briefly.

The demo starts its own KRaft broker, the producer and the pipeline (three
queries, Kafka in and out), prints result rows as they arrive and stops
everything once it has seen a few. docker-compose.yml itself must validate.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
QUERIES = {"q1_stock", "q2_cluster", "q3_traffic"}


@pytest.mark.usefixtures("subprocesses")
def test_demo_prints_results_and_stops_everything(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "greta_stream", "demo", "--workdir", str(tmp_path), "--rows", "3",
           "--seconds", "420", "--rate", "150"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=540, cwd=ROOT)
    logs = "".join(f"\n--- {p.name}\n" + p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("*.log"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + logs
    rows = [line for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in QUERIES]
    assert len(rows) >= 3
    assert all(re.search(r"\[-?\d+(\.\d+)?, -?\d+(\.\d+)?\) .*count=\d+", r) for r in rows), rows
    assert "duplicate" not in proc.stdout
    port = int(re.search(r"PLAINTEXT://127\.0\.0\.1:(\d+)", (tmp_path / "kafka" / "server.properties").read_text())[1])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # the broker is gone


@pytest.mark.usefixtures("subprocesses")
def test_compose_file_validates() -> None:
    docker = shutil.which("docker")
    plugin = docker is not None and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    if plugin:
        cmd = ["docker", "compose", "config", "-q"]
    elif shutil.which("docker-compose"):  # Debian's Compose v1 validates the same file offline
        cmd = ["docker-compose", "config", "-q"]
    else:
        pytest.skip("neither the docker compose plugin nor docker-compose is installed")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    kafka = re.search(r"<kafka.version>([^<]+)</kafka.version>", (ROOT / "jvm" / "pom.xml").read_text())[1]
    compose = (ROOT / "docker-compose.yml").read_text()
    assert set(re.findall(r"apache/kafka:(\S+)", compose)) == {kafka}  # the image runs the broker we test with


def test_cluster_ids_never_read_as_options() -> None:
    """A cluster id that starts with "-" (one in 64 of random ones) is an option to the storage tool:
    the broker would not start. Over 2,000 draws about 31 would; none may."""
    from greta_stream.demo.broker import cluster_id

    ids = [cluster_id() for _ in range(2_000)]
    assert not [i for i in ids if i.startswith("-")] and all(len(i) == 22 for i in ids)
