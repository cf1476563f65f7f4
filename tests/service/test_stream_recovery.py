"""A stream that dies (its Spark Python workers killed mid-batch, as a loaded machine loses them) restarts
from its checkpoint after a back-off: its query is `starting` meanwhile, then `running` again, and the
results store ends with exactly the rows of `evaluate`, none lost, none twice; the progress counts the
restarts and the log says what happened."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from service_helpers import (
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

pytestmark = pytest.mark.service


def _under(service: Service, wanted: Callable[[str], bool]) -> list[int]:
    """The pids of the processes under the service's process whose command line is `wanted`."""
    assert service.proc is not None
    parent: dict[int, int] = {}
    cmdline: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, IndexError, ValueError):
                continue

    def under(pid: int) -> bool:
        while pid > 1:
            if pid == service.proc.pid:  # type: ignore[union-attr]
                return True
            pid = parent.get(pid, 0)
        return False

    return [p for p, c in cmdline.items() if wanted(c) and under(p)]


def _python_workers(service: Service) -> list[int]:
    """The pids of the Spark Python workers (and their daemon) under the service's process."""
    return _under(service, lambda c: ("pyspark.daemon" in c or "pyspark.worker" in c) and "java" not in c)


def _jvm(service: Service) -> list[int]:
    """The pid of Spark's JVM under the service's process."""
    return _under(service, lambda c: c.split(" ", 1)[0].endswith("java"))


def _one_jvm(service: Service) -> int:
    """The pid of Spark's JVM once it is the only java process under the service (while Spark starts, its
    launcher is a second one for a moment)."""
    (java,) = wait_for(lambda: (lambda pids: pids if len(pids) == 1 else None)(_jvm(service)), "one JVM", service)
    return java


def _registered(api: Any, service: Service, spec: dict[str, Any]) -> str:
    """`spec` registered (201), once its stream has run a first batch: its id."""
    r = api.post("/queries", json=spec)
    assert r.status_code == 201, r.text
    query_id: str = r.json()["id"]
    wait_for(batches_over(api, query_id, 0), "a first batch", service)
    return query_id


def test_a_stream_that_dies_restarts_from_its_checkpoint_with_no_row_lost(tmp_path: Path, subprocesses: None) -> None:
    service = Service(tmp_path)
    service.start()
    try:
        events = sorted(sample_events(), key=lambda e: e["time"])
        expected = evaluate(Q1, events)
        chunks = [events[k * 250:(k + 1) * 250] for k in range(8)]
        src, base = tmp_path / "in", time.time() - 3600
        write_file(src, "events-0.jsonl", chunks[0], stamp=base)
        spec = {"name": "q1-recovers", "text": Q1,
                "source": {"format": "jsonl", "path": str(src), "max_files_per_trigger": 1}}
        with service.client() as api:
            query_id = _registered(api, service, spec)
            for k in range(1, 8):  # a file a micro-batch: batches run while the workers go
                write_file(src, f"events-{k}.jsonl", chunks[k], stamp=base + k)
            deadline = time.monotonic() + 120
            while "died" not in service.log.read_text(errors="replace") and time.monotonic() < deadline:
                for pid in _python_workers(service):
                    os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
            assert "died" in service.log.read_text(errors="replace"), "the stream never died: this proves nothing"
            wait_for(lambda: "restarts from its checkpoint" in service.log.read_text(errors="replace"),
                     "the restart", service)
            write_file(src, "flush.jsonl", [FLUSH], stamp=base + 9)
            wait_for(settled(api, query_id, len(expected)), "every window of Q1", service)  # fails if failed
            info = api.get(f"/queries/{query_id}").json()
            assert info["status"] == "running", info
            assert info["progress"]["stream_restarts"] >= 1, info["progress"]
            got = all_results(api, query_id)
            assert normalized(got) == normalized(expected)  # none lost, none twice
    finally:
        service.stop(hard=True)


def test_a_lost_jvm_is_replaced_and_every_stream_resumes_with_no_row_lost(tmp_path: Path, subprocesses: None) -> None:
    """Spark's JVM killed (as one out of heap goes): `/readyz` says so (503), a registration meanwhile is
    kept (202) and runs once a new JVM is up, and both queries end with exactly `evaluate`'s rows."""
    service = Service(tmp_path)
    service.start()
    try:
        events = sorted(sample_events(), key=lambda e: e["time"])
        expected = evaluate(Q1, events)
        chunks = [events[k * 500:(k + 1) * 500] for k in range(4)]
        src, other, base = tmp_path / "in", tmp_path / "other", time.time() - 3600
        write_file(src, "events-0.jsonl", chunks[0], stamp=base)
        spec = {"name": "q1-jvm", "text": Q1, "source": {"format": "jsonl", "path": str(src)}}
        with service.client() as api:
            query_id = _registered(api, service, spec)
            write_file(src, "events-1.jsonl", chunks[1], stamp=base + 1)
            wait_for(batches_over(api, query_id, 1), "a second batch", service)
            java = _one_jvm(service)
            os.kill(java, signal.SIGKILL)
            ready = wait_for(lambda: (r := api.get("/readyz")).status_code == 503 and r.json(), "/readyz 503",
                             service)
            assert "JVM" in ready["detail"], ready
            assert api.get(f"/queries/{query_id}").json()["status"] in ("starting", "running")
            write_file(other, "events.jsonl", [*events, FLUSH], stamp=base)
            r = api.post("/queries", json={**spec, "name": "q1-jvm-meanwhile",
                                           "source": {"format": "jsonl", "path": str(other)}})
            assert r.status_code in (201, 202, 503), r.text  # never a 500
            if r.status_code == 503:  # found before the monitor did: retried, as the answer says
                wait_for(lambda: api.get("/readyz").status_code == 200, "a new JVM", service)
                r = api.post("/queries", json={**spec, "name": "q1-jvm-meanwhile",
                                               "source": {"format": "jsonl", "path": str(other)}})
            other_id = r.json()["id"]
            wait_for(lambda: api.get("/readyz").status_code == 200, "a new JVM", service)
            assert _jvm(service) and _jvm(service) != [java]
            for k in (2, 3):
                write_file(src, f"events-{k}.jsonl", chunks[k], stamp=base + k)
            write_file(src, "flush.jsonl", [FLUSH], stamp=base + 9)
            for qid in (query_id, other_id):
                wait_for(settled(api, qid, len(expected)), "every window of Q1", service)
                info = api.get(f"/queries/{qid}").json()
                assert info["status"] == "running", info
                assert normalized(all_results(api, qid)) == normalized(expected)  # none lost, none twice
        assert "Spark's JVM exited" in service.log.read_text(errors="replace")
    finally:
        service.stop(hard=True)


def test_a_jvm_lost_more_often_than_spark_restarts_leaves_the_service_down_saying_so(tmp_path: Path,
                                                                                    subprocesses: None) -> None:
    service = Service(tmp_path)
    service.config.write_text(service.config.read_text() + "spark_restarts = 0\n")
    service.start()
    try:
        src = tmp_path / "in"
        write_file(src, "events-0.jsonl", sample_events()[:50])
        with service.client() as api:
            r = api.post("/queries", json={"name": "q1-down", "text": Q1, "source": {"format": "jsonl", "path": str(src)}})
            assert r.status_code == 201, r.text
            java = _one_jvm(service)
            os.kill(java, signal.SIGKILL)
            down = wait_for(lambda: (r := api.get("/readyz")).json()["status"] == "failed" and r, "the service down",
                            service)
            assert down.status_code == 503 and "stays down" in down.json()["detail"], down.text
            info = api.get("/queries/q1-down").json()
            assert info["status"] == "failed" and "spark_driver_memory" in info["error"], info
            r = api.post("/queries", json={"name": "q1-later", "text": Q1, "source": {"format": "jsonl", "path": str(src)}})
            assert r.status_code == 503 and "stays down" in r.json()["detail"], r.text
            assert not _jvm(service)  # no new JVM
    finally:
        service.stop(hard=True)
