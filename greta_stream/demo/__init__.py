"""`greta-stream demo`: the topology of docker-compose.yml as local processes.

  1. a single-node KRaft broker on 127.0.0.1 (`greta_stream.demo.broker`),
     with the topics stock, cluster, traffic, results and dead-letters;
  2. the producer (`python -m greta_stream.demo.producer`), replaying the
     generated samples of the three workloads;
  3. the pipeline (`greta-stream run --config configs/demo/pipeline.yaml`,
     its checkpoint moved into the work folder), Kafka in and Kafka out;
     the paper's queries and this pipeline are package data
     (`greta_stream/demo/configs/`, found through importlib.resources, so an
     installed wheel has them; a checkout's `configs/` links to them);
  4. this process reads the results topic and prints each row, until it has
     seen `rows` rows, `seconds` passed, Ctrl-C, or a child process died;
     then it stops the children in reverse order.

Logs of every process are in the work folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from greta_stream.demo.broker import KafkaBroker, client_config, create_topics

CONFIGS = Path(str(resources.files("greta_stream.demo") / "configs"))  # q1_stock.greta ... and demo/
DEFAULT_CONFIG = CONFIGS / "demo" / "pipeline.yaml"
TOPICS = {"stock": 2, "cluster": 2, "traffic": 2, "results": 2, "dead-letters": 1}


def demo_config(config: Path, workdir: Path) -> Path:
    """The demo pipeline config with its checkpoint in `workdir` and absolute query files."""
    raw = yaml.safe_load(config.read_text())
    raw["checkpoint"] = str(workdir / "checkpoint")
    for q in raw["queries"]:
        if "file" in q:
            q["file"] = str((config.parent / q["file"]).resolve())
    out = workdir / "pipeline.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def run_demo(workdir: Path, config: Path = DEFAULT_CONFIG, rate: float = 200.0, seconds: float | None = None,
             rows: int | None = None, echo: Callable[[str], None] = print) -> int:
    """Run steps 1-4 of the module docstring; 0 when it ended as asked, 1 when something failed."""
    workdir = workdir.resolve()
    for sub in ("kafka", "checkpoint"):  # a fresh broker and pipeline each time
        shutil.rmtree(workdir / sub, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    broker = KafkaBroker(workdir / "kafka")
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        echo(f"demo: starting Kafka (KRaft) in {workdir / 'kafka'} ...")
        broker.start()
        for name, parts in TOPICS.items():
            create_topics(broker.bootstrap, [name], partitions=parts)
        echo(f"demo: broker at {broker.bootstrap}; topics {', '.join(TOPICS)}")
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap}
        children.append(("producer", _spawn([sys.executable, "-m", "greta_stream.demo.producer", "--bootstrap",
                                             broker.bootstrap, "--rate", str(rate)], workdir / "producer.log", env)))
        children.append(("pipeline", _spawn([sys.executable, "-m", "greta_stream", "run", "--config",
                                             str(demo_config(config, workdir))], workdir / "pipeline.log", env)))
        echo(f"demo: producer and pipeline started (logs: {workdir}/producer.log, pipeline.log); waiting for results")
        return _follow(broker.bootstrap, children, seconds, rows, echo, workdir)
    except KeyboardInterrupt:
        echo("demo: stopping ...")
        return 0
    finally:
        # SIGTERM, not SIGINT: a KeyboardInterrupt inside a py4j call does not always reach
        # `greta-stream run`. Ending the pipeline abruptly is safe: it resumes from its
        # checkpoint, and its Kafka sinks skip or complete a replayed batch (spark/kafka.py).
        for _, proc in reversed(children):
            _stop(proc, signal.SIGTERM)
        broker.stop()


def _spawn(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes], sig: int, grace_s: float = 30.0) -> None:
    """Ask the child to stop; end its process group (it and the JVM it started) if it does not."""
    if proc.poll() is None:
        proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # our own session: the child and the JVM it started
    proc.wait()


def _follow(bootstrap: str, children: list[tuple[str, subprocess.Popen[bytes]]], seconds: float | None,
            rows: int | None, echo: Callable[[str], None], workdir: Path) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer(client_config(bootstrap, **{"group.id": f"greta-demo-{uuid.uuid4().hex[:8]}",
                                                    "auto.offset.reset": "earliest"}))
    consumer.subscribe(["results"])
    seen: Counter[str] = Counter()
    keys: set[str] = set()
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        while rows is None or sum(seen.values()) < rows:
            for name, proc in children:
                if proc.poll() is not None:
                    echo(f"demo: the {name} exited with status {proc.returncode}; see {workdir / (name + '.log')}")
                    return 1
            if deadline is not None and time.monotonic() > deadline:
                break
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            raw_key, value = msg.key(), msg.value()
            assert raw_key is not None and value is not None  # the pipeline writes keyed result rows
            key = raw_key.decode()
            query = json.loads(key)[0]
            seen[query] += 1
            if key in keys:
                echo(f"demo: duplicate result {key}")
            keys.add(key)
            echo(f"{query:<11} {_row_text(json.loads(value))}")
    finally:
        consumer.close()
    echo("demo: " + (", ".join(f"{q} {n} rows" for q, n in sorted(seen.items())) or "no rows yet"))
    return 0 if rows is None or sum(seen.values()) >= rows else 1


def _row_text(row: dict[str, Any]) -> str:
    window = f"[{row.pop('window_start')}, {row.pop('window_end')})"
    return f"{window:<16} " + " ".join(f"{k}={round(v, 3) if isinstance(v, float) else v}" for k, v in row.items())
