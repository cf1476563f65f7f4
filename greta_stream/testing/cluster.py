"""A Spark standalone cluster on 127.0.0.1 from the pyspark package: one master, N workers.

`sbin/start-master.sh` is not in the pip package, so the
daemons start through `bin/spark-class`. Used by the cluster test and handy
for trying `greta-stream run --master spark://127.0.0.1:PORT` by hand:

    python -m greta_stream.testing.cluster --workers 2
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StandaloneCluster:
    """Start with `start()`, stop with `stop()` (or use as a context manager,
    which also removes the work folder when the block ends without an error;
    after an error the daemons' logs stay there)."""

    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    master_port: int = field(default_factory=free_port)
    webui_port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="greta-spark-cluster-")))

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _spawn(self, name: str, *args: str) -> None:
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
                   PYSPARK_PYTHON=sys.executable, SPARK_WORKER_DIR=str(self.workdir / "work"))
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))

    def start(self, timeout_s: float = 90) -> StandaloneCluster:
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.master_port), "--webui-port", str(self.webui_port))
        taken = {self.master_port, self.webui_port}  # a port free now may be the master's a moment later
        for i in range(self.workers):
            port = free_port()
            while port in taken:
                port = free_port()
            taken.add(port)
            self._spawn(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", str(self.cores_per_worker), "--memory", self.memory_per_worker,
                        "--webui-port", str(port))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.alive_workers() >= self.workers:
                return self
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(1)
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.workdir.glob("*.log")))
        self.stop()
        raise RuntimeError(f"standalone cluster did not come up with {self.workers} workers:\n{logs}")

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as r:
                info = json.load(r)
        except (OSError, ValueError):  # not up yet, or another page on the port (not JSON)
            return 0
        return sum(1 for w in info.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.stop()
        if exc_type is None:
            shutil.rmtree(self.workdir, ignore_errors=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with StandaloneCluster(workers=args.workers) as cluster:
        print(f"master {cluster.url} (web UI http://127.0.0.1:{cluster.webui_port}); Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
