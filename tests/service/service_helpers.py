"""Helpers of the service tests: `greta-stream serve` in a subprocess on a free loopback port, waits, files.

Starting Spark costs ~10 s, so every test module shares one server (session
scope); the restart test restarts that same process in place (same data
folder, same port). Tests register queries with unique names and look only
at their own. Waits poll the API with a generous deadline; nothing asserts
on time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from greta_stream.connectors.jsonl import dumps, loads

REPO = Path(__file__).resolve().parents[2]
SAMPLE_EVENTS = REPO / "samples" / "stock" / "events.jsonl"
Q1 = (REPO / "configs" / "q1_stock.greta").read_text()
API_KEY = "test-key-0123456789"
READY_DEADLINE_S = 180
RESULT_DEADLINE_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    """`greta-stream serve` as a subprocess in its own process group (so a kill takes the JVM too)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root / "service.log"
        self.config = root / "service.toml"
        self.config.write_text(
            f'path_roots = ["{root}"]\n'
            "max_query_chars = 4000\nmax_request_bytes = 16384\nmax_shards = 8\n"
            "trigger_interval_s = 1.0\nmonitor_interval_s = 0.5\nsse_poll_s = 0.2\nstop_timeout_s = 4.0\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, ready: bool = True) -> None:
        """Start the server; wait until it is ready (`ready`), else only until it answers /healthz."""
        env = {**os.environ, "GRETA_API_KEY": API_KEY, "GRETA_SPARK_LOG_LEVEL": "ERROR"}
        cmd = [sys.executable, "-m", "greta_stream", "serve", "--config", str(self.config), "--port", str(self.port),
               "--data-dir", str(self.data), "--log-level", "info", "--log-json"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                                         start_new_session=True, env=env)
        self.wait_ready("/readyz" if ready else "/healthz")

    def wait_ready(self, probe: str = "/readyz") -> None:
        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"service exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + probe, timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        pytest.fail(f"service not ready after {READY_DEADLINE_S} s:\n{self.log_tail()}")

    def stop(self, hard: bool = False) -> None:
        """SIGTERM (graceful: lifespan shutdown) or SIGKILL of the whole process group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if hard:
                os.killpg(self.proc.pid, signal.SIGKILL)
            else:  # the server alone: its lifespan stops the streams and then the JVM
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=120)
        with contextlib.suppress(ProcessLookupError):  # what is left of the group (JVM, Python workers)
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def restart(self, hard: bool = False) -> None:
        self.stop(hard=hard)
        self.start()

    def client(self, key: str | None = API_KEY) -> httpx.Client:
        headers = {"X-API-Key": key} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""


def sample_events() -> list[dict[str, Any]]:
    return [loads(line) for line in SAMPLE_EVENTS.read_text().splitlines() if line.strip()]


def write_file(folder: Path, name: str, records: list[Any], stamp: float | None = None) -> Path:
    """A JSON lines file appearing atomically (Spark must never list a half-written file)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}-{name}.tmp"
    tmp.write_text("".join((r if isinstance(r, str) else dumps(r)) + "\n" for r in records))
    if stamp is not None:
        os.utime(tmp, (stamp, stamp))
    shutil.move(tmp, folder / name)
    return folder / name


FLUSH = {"type": "Flush", "time": 10**6}  # a type the query ignores, far ahead: every window closes


def normalized(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(dumps(r) for r in rows)


def wait_for(check: Callable[[], Any], what: str, service: Service, deadline_s: float = RESULT_DEADLINE_S) -> Any:
    """Poll `check` until it returns something truthy; fail with the service log after the deadline."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}\n{service.log_tail()}")


def all_results(api: httpx.Client, query_id: str, **params: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        r = api.get(f"/queries/{query_id}/results", params={**params, "limit": 1000, "offset": offset})
        assert r.status_code == 200, r.text
        page = loads(r.text)
        rows += page["rows"]
        offset = page["next_offset"]
    return rows


def query_progress(api: httpx.Client, query_id: str) -> dict[str, Any]:
    """The query's progress; fails the test at once if the query failed."""
    info = api.get(f"/queries/{query_id}").json()
    if info["status"] == "failed":
        pytest.fail(f"query failed: {info['error']}")
    return info["progress"]  # type: ignore[no-any-return]


def settled(api: httpx.Client, query_id: str, n_rows: int) -> Callable[[], Any]:
    """A check for `wait_for`: the query stored n_rows (fails at once if the query failed)."""
    def check() -> Any:
        return query_progress(api, query_id)["result_rows"] >= n_rows and api.get(f"/queries/{query_id}").json()

    return check


def batches_over(api: httpx.Client, query_id: str, n: int) -> Callable[[], bool]:
    """A check for `wait_for`: the query stored more than n micro-batches."""
    return lambda: query_progress(api, query_id)["batches"] > n
