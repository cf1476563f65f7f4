"""A real single-node Apache Kafka (KRaft) on 127.0.0.1, for tests and `greta-stream demo`.

`KafkaBroker(folder)` runs one JVM that is both broker and controller, from
the jars that `scripts/setup_jvm.sh` fetched (`greta_stream.jvm`), with its
data, config and `server.log` in `folder`:

  1. `start()` picks free ports (once; a restart keeps them), writes
     `server.properties`, formats the storage the first time
     (`kafka.tools.StorageTool format`, what `kafka-storage.sh` runs), starts
     `kafka.Kafka` and waits until the broker answers a metadata request;
  2. `stop()` shuts it down cleanly (SIGTERM), `kill()` does not (SIGKILL);
     `restart()` is stop + start on the same ports and data.

Clients (admin, produce, consume) use confluent-kafka. Imports nothing from
the rest of the package but `greta_stream.jvm`.
"""

from __future__ import annotations

import base64
import json
import logging
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from greta_stream.jvm import kafka_classpath

# librdkafka's own log lines (e.g. "connection refused" while a broker restarts)
# go to Python logging instead of stderr.
CLIENT_LOG = logging.getLogger("greta_stream.kafka.client")

JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]

LOG4J2 = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
"""


class BrokerError(RuntimeError):
    """The broker did not start, or stopped on its own."""


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """confluent-kafka settings: the bootstrap servers, logging through Python."""
    return {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG, **extra}


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding (as `random-uuid` prints).
    Never one that starts with "-", which the storage tool would read as an option (Kafka's own
    `Uuid.randomUuid` draws again too): one id in 64 did, and the broker did not start."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaBroker:
    """One KRaft node (broker + controller) on 127.0.0.1; see the module docstring."""

    def __init__(self, folder: str | Path, port: int | None = None, controller_port: int | None = None) -> None:
        self.folder = Path(folder)
        self.port = port
        self.controller_port = controller_port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise BrokerError("the broker was never started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.folder / "server.log"

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- lifecycle

    def start(self, timeout_s: float = 90.0) -> None:
        """Start the node (formatting its storage the first time) and wait until it serves requests."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        props = self._write_config()
        cp = kafka_classpath()
        if not (self.folder / "data" / "meta.properties").exists():
            subprocess.run(
                ["java", *JVM_OPTS, *self._log_opts(), "-cp", cp, "kafka.tools.StorageTool", "format",
                 "--cluster-id", cluster_id(), "--config", str(props), "--ignore-formatted"],
                check=True, capture_output=True, timeout=timeout_s,
            )
        out = open(self.folder / "stdout.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTS, *self._log_opts(), "-cp", cp, "kafka.Kafka", str(props)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        out.close()
        self._wait_ready(timeout_s)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Controlled shutdown (SIGTERM); SIGKILL if it does not end in time."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """Crash: SIGKILL, no shutdown."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self, *, crash: bool = False) -> None:
        self.kill() if crash else self.stop()
        self.start()

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _log_opts(self) -> list[str]:
        cfg = self.folder / "log4j2.properties"
        if not cfg.exists():
            cfg.write_text(LOG4J2.format(log=self.log_file))
        return [f"-Dlog4j2.configurationFile={cfg}", f"-Dkafka.logs.dir={self.folder}"]

    def _write_config(self) -> Path:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.folder / "data"),
            "num.partitions": "1",
            # one node: every internal topic has one replica
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",  # a topic that nobody created is a mistake
        }
        path = self.folder / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _wait_ready(self, timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        admin = None
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise BrokerError(f"Kafka exited during startup; see {self.folder}/stdout.log and {self.log_file}:\n"
                                  + self._tail())
            if admin is None and _listening(self.port or 0):
                admin = AdminClient(client_config(self.bootstrap))
            if admin is not None:
                try:
                    if admin.list_topics(timeout=2).brokers:
                        return
                except Exception:  # noqa: BLE001, S110 - not up yet
                    pass
            if time.monotonic() > deadline:
                raise BrokerError(f"Kafka did not become ready in {timeout_s:.0f} s:\n{self._tail()}")
            time.sleep(0.3)

    def _tail(self, lines: int = 30) -> str:
        text = ""
        for f in (self.folder / "stdout.log", self.log_file):
            if f.exists():
                text += "\n".join(f.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    # ---------------------------------------------------------------- clients

    def create_topics(self, names: Iterable[str], partitions: int = 1, config: dict[str, str] | None = None) -> None:
        create_topics(self.bootstrap, names, partitions, config)


def create_topics(bootstrap: str, names: Iterable[str], partitions: int = 1,
                  config: dict[str, str] | None = None) -> None:
    """Create topics (one replica); ones that exist already are left as they are."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_config(bootstrap))
    futures = admin.create_topics([NewTopic(n, partitions, 1, config=config or {}) for n in names],
                                  operation_timeout=30)
    for fut in futures.values():
        try:
            fut.result(60)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def produce(bootstrap: str, topic: str, records: Iterable[Any], key: Any = None) -> int:
    """Send records (dicts as JSON, strings as they are) to `topic`; wait until all are acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(client_config(bootstrap, **{"enable.idempotence": True, "linger.ms": 5}))
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    n = 0
    for rec in records:
        value = rec if isinstance(rec, str) else json.dumps(rec)
        k = key(rec) if callable(key) else key
        while True:
            try:
                producer.produce(topic, value=value.encode(), key=None if k is None else str(k).encode(),
                                 on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        n += 1
        producer.poll(0)
    remaining = producer.flush(120)
    if remaining or errors:
        raise BrokerError(f"{remaining} message(s) not delivered to {topic}; errors: {errors[:3]}")
    return n


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> high watermark (the offset the next message gets)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(client_config(bootstrap, **{"group.id": f"greta-offsets-{uuid.uuid4().hex}"}))
    try:
        parts = c.list_topics(topic, timeout=30).topics[topic].partitions
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
    finally:
        c.close()


def consume_all(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Every message in `topic` up to its current end, as {partition, offset, key, value, headers} dicts."""
    return list(_read_to_end(bootstrap, topic, end_offsets(bootstrap, topic), timeout_s))


def _read_to_end(bootstrap: str, topic: str, ends: dict[int, int], timeout_s: float) -> Iterator[dict[str, Any]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    todo = {p for p, end in ends.items() if end > 0}
    if not todo:
        return
    c = Consumer(client_config(bootstrap, **{"group.id": f"greta-read-{uuid.uuid4().hex}",
                                             "enable.auto.commit": False, "enable.partition.eof": True}))
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        deadline = time.monotonic() + timeout_s
        while todo:
            if time.monotonic() > deadline:
                raise BrokerError(f"could not read {topic} to its end in {timeout_s:.0f} s (left: {sorted(todo)})")
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                continue  # partition EOF or a transient error; the offsets decide when we are done
            p, off = msg.partition(), msg.offset()
            assert p is not None and off is not None  # set on every message without an error
            if off < ends[p]:
                # a consumed message's headers are a list of (name, bytes or None), not any HeadersType
                headers = cast(list[tuple[str, bytes | None]], msg.headers() or [])
                yield {
                    "partition": p, "offset": off, "key": _text(msg.key()), "value": _text(msg.value()),
                    "headers": {k: _text(v) for k, v in headers},
                }
            if off >= ends[p] - 1:
                todo.discard(p)
    finally:
        c.close()



def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode()
