"""`greta-stream serve` as a subprocess for the Kafka tests (its own process group, so a kill takes the JVM too)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx


@contextlib.contextmanager
def serving(tmp_path: Path, api_key: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """The service on a free loopback port with `api_key` (and `env`); yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "service.toml").write_text("trigger_interval_s = 1.0\nmonitor_interval_s = 0.5\n")
    cmd = [sys.executable, "-m", "greta_stream", "serve", "--config", str(tmp_path / "service.toml"), "--port",
           str(port), "--data-dir", str(tmp_path / "data"), "--log-level", "warning"]
    log = tmp_path / "service.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
                                env={**os.environ, "GRETA_API_KEY": api_key, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "service not ready:\n" + log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(120)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what is left of its group (the JVM, Python workers)
        proc.wait(30)
