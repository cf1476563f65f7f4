"""Kafka in and out through Spark's own connector (spark-sql-kafka-0-10).

Source: `read_kafka` subscribes to a topic (or a comma-separated list) of JSON events, yielding the
message values as a string column `value`, the operator's JSON input.

Sink: `KafkaSink` writes the result rows (or dead letters) of one micro-batch
with `DataFrame.write.format("kafka")`, one message per row:

  key      JSON `[query, group values, window_start, window_end]` for a row
           (CET mode: `[..., n]`, the n-th trend of that group and window),
           `[query, "dead", batch_id, n]` for the n-th dead letter of a batch:
           unique per result, so a compacted topic keeps one copy of each;
  value    the row (or dead letter) as JSON, as the file sinks write it;
  headers  `greta.query`, `greta.batch` (micro-batch id), `greta.kind` (row | dead).

Delivery. `foreachBatch` alone is at-least-once: Spark replays the last
micro-batch after a crash when its commit did not reach the checkpoint, and
a Kafka topic cannot be overwritten. With a sink log (a folder inside the
query's checkpoint) the sink makes the replay idempotent:

  1. batch N already logged "done": skip it (the crash hit after the write);
  2. batch N logged "started" (the crash hit during the write): read back the
     messages of query and batch N written since it started (by timestamp,
     through Spark) and send only the keys that are missing;
  3. otherwise log "started" with the time, send, then log "done".

A replayed batch has the same input offsets and restored state, so it emits
the same keys (a restart from a checkpoint replays a batch deterministically). The
producer is idempotent (kafka-clients 3.x default), so its own retries, e.g.
across a broker restart, add no copies either. What remains: a Spark *task*
retry inside one batch attempt (`spark.task.maxFailures` > 1, i.e. not in
local mode) resends that task's messages. Such copies, and every replay when
no sink log is given, are byte-identical messages with the same key and
`greta.batch`: consumers drop them by key, and topic compaction removes them.
The sink log is written with plain file I/O: the checkpoint folder must be a
local (or mounted) path, as for the file sinks.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from greta_stream.errors import ConfigError, SinkError
from greta_stream.jvm import CONNECTOR_HINT, spark_kafka_jars
from greta_stream.pipeline.model import SourceConfig
from greta_stream.spark.session import need_package
from greta_stream.spark.sinks import SinkBatch, SinkPlace

log = logging.getLogger("greta_stream.kafka")

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
# How far before a batch's "started" time the replay read begins: covers clock
# skew between the driver (which logs the time) and the executors (whose
# producers stamp the messages).
REPLAY_MARGIN_MS = 5 * 60 * 1000
MESSAGE_SCHEMA = "key string, value string, headers array<struct<key: string, value: binary>>"


def bootstrap(servers: str | None) -> str:
    """The configured bootstrap servers, else $KAFKA_BOOTSTRAP_SERVERS."""
    found = servers or os.environ.get(BOOTSTRAP_ENV)
    if not found:
        raise ConfigError(f"a kafka source or sink needs bootstrap_servers (or ${BOOTSTRAP_ENV})")
    return found


def read_kafka(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """A streaming DataFrame with the message values of `src.topic` as JSON text in `value`, from
    `src.starting_offsets` (a new query's; a restarted one resumes from its checkpoint)."""
    if not src.topic:
        raise ConfigError("a kafka source needs a topic")
    need_connector(spark)
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap(src.bootstrap_servers))
              .option("subscribe", src.topic).option("startingOffsets", src.starting_offsets))
    for k, v in src.options.items():  # e.g. maxOffsetsPerTrigger, failOnDataLoss, kafka.security.protocol
        reader = reader.option(k, str(v))
    return reader.load().select(F.col("value").cast("string").alias("value"))


def need_connector(spark: SparkSession) -> None:
    """Fail clearly when Spark's Kafka connector is not on its classpath."""
    need_package(spark, bool(spark_kafka_jars()), "sql-kafka", "Spark's Kafka connector (spark-sql-kafka-0-10)",
                 CONNECTOR_HINT)


def row_key(query: str, grp: str, window_start: float, window_end: float, n: int | None = None) -> str:
    """The key of a result row: query, group values (the operator's JSON list), window.

    CET mode reports many trends per group and window: `n` numbers them (in
    payload order, the same on a replay).
    """
    key = [query, json.loads(grp), _number(window_start), _number(window_end)]
    return json.dumps(key if n is None else [*key, n], separators=(",", ":"))


def dead_key(query: str, batch_id: int, n: int) -> str:
    """The key of the n-th dead letter of a micro-batch (dead letters come sorted: the same n on replay)."""
    return json.dumps([query, "dead", batch_id, n], separators=(",", ":"))


def _number(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


@dataclass(frozen=True)
class Message:
    key: str
    value: str


class SinkLog:
    """Per-batch "started"/"done" marks of one Kafka sink, in the query's checkpoint folder."""

    KEEP = 10

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def get(self, batch_id: int) -> dict[str, Any] | None:
        path = self.folder / f"{batch_id}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def put(self, batch_id: int, entry: dict[str, Any]) -> None:
        tmp = self.folder / f".{batch_id}.json.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(entry, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.folder / f"{batch_id}.json")
        for old in self.folder.glob("*.json"):  # Spark replays at most the last batch
            if old.stem.isdigit() and int(old.stem) < batch_id - self.KEEP:
                old.unlink(missing_ok=True)


class KafkaSink:
    """Writes one query's rows (or dead letters) of each micro-batch to a topic; see the module docstring."""

    def __init__(self, query: str, kind: str, topic: str | None, servers: str | None,
                 options: dict[str, Any] | None = None, log_dir: Path | None = None, per_trend: bool = False) -> None:
        if not topic:
            raise ConfigError("a kafka sink needs a topic")
        self.query, self.kind, self.topic = query, kind, topic
        self.servers = bootstrap(servers)
        self.options = {k: str(v) for k, v in (options or {}).items()}
        self.log = SinkLog(log_dir) if log_dir is not None else None
        self.skipped = 0  # messages not sent again on a replay
        self.per_trend = per_trend  # CET mode: one row per trend, many per (group, window): keys add a number

    @classmethod
    def create(cls, place: SinkPlace) -> KafkaSink:
        cfg, spec = place.cfg, place.query.spec
        return cls(place.query.name, place.kind, cfg.topic, cfg.bootstrap_servers, cfg.options, place.log,
                   per_trend=spec is not None and spec.mode == "cet")

    def write(self, spark: SparkSession, batch: SinkBatch) -> None:
        self.send(spark, batch.batch_id, self.messages(batch))

    def messages(self, batch: SinkBatch) -> list[Message]:
        """A batch's messages: rows keyed by (query, group, window[, n-th trend of it]), dead letters by
        (query, batch, n-th of the batch)."""
        if self.kind == "dead":
            return [Message(dead_key(self.query, batch.batch_id, n), p) for n, p in enumerate(batch.payloads)]
        rows = batch.outputs
        if not self.per_trend:
            return [Message(row_key(self.query, o.grp, o.window_start, o.window_end), o.payload) for o in rows]
        seen: dict[tuple[Any, ...], int] = {}
        out = []
        for o in sorted(rows, key=lambda o: (o.window_start, o.grp, o.payload)):  # the same order on a replay
            n = seen[(o.window_start, o.grp)] = seen.get((o.window_start, o.grp), -1) + 1
            out.append(Message(row_key(self.query, o.grp, o.window_start, o.window_end, n), o.payload))
        return out

    def send(self, spark: SparkSession, batch_id: int, messages: Sequence[Message]) -> int:
        """Send the messages of micro-batch `batch_id` (at most once each with a sink log); return how many."""
        entry = self.log.get(batch_id) if self.log else None
        if entry is not None and entry["done"]:  # step 1
            self.skipped += len(messages)
            log.info("[%s] batch %d already in %s: skipped", self.query, batch_id, self.topic)
            return 0
        if entry is not None:  # step 2
            try:
                present = self.keys_written(spark, batch_id, entry["since_ms"])
            except Exception as exc:  # noqa: BLE001
                raise self._failed("cannot read back", exc) from exc
            todo = [m for m in messages if m.key not in present]
            self.skipped += len(messages) - len(todo)
            log.warning("[%s] batch %d replayed after a partial write to %s: %d of %d message(s) already there",
                        self.query, batch_id, self.topic, len(messages) - len(todo), len(messages))
            messages = todo
        since_ms = entry["since_ms"] if entry is not None else int(time.time() * 1000)
        if self.log is not None and entry is None:  # step 3
            self.log.put(batch_id, {"since_ms": since_ms, "done": False})
        if messages:
            try:
                self._send(spark, batch_id, messages)
            except Exception as exc:  # noqa: BLE001 - said as the sink, its broker and Kafka's reason
                raise self._failed("cannot write to", exc) from exc
        if self.log is not None:
            self.log.put(batch_id, {"since_ms": since_ms, "done": True})
        return len(messages)

    def _failed(self, what: str, exc: Exception) -> SinkError:
        return SinkError(f"kafka sink of query {self.query}: {what} topic {self.topic} at {self.servers}: "
                         f"{kafka_reason(exc)}")

    def _send(self, spark: SparkSession, batch_id: int, messages: Sequence[Message]) -> None:
        headers = [("greta.query", self.query.encode()), ("greta.batch", str(batch_id).encode()),
                   ("greta.kind", self.kind.encode())]
        need_connector(spark)
        df = spark.createDataFrame([(m.key, m.value, headers) for m in messages], MESSAGE_SCHEMA).coalesce(1)
        writer = df.write.format("kafka").option("kafka.bootstrap.servers", self.servers).option("topic", self.topic)
        for k, v in self.options.items():
            writer = writer.option(k, v)
        writer.save()

    def keys_written(self, spark: SparkSession, batch_id: int, since_ms: int) -> set[str]:
        """Keys of this query's messages of `batch_id` in the topic, written since `since_ms` (minus a margin)."""
        kafka_opts = {k: v for k, v in self.options.items() if k.startswith("kafka.")}
        raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", self.servers)
               .option("subscribe", self.topic).option("includeHeaders", "true")
               .option("startingTimestamp", str(max(0, since_ms - REPLAY_MARGIN_MS)))
               .option("startingOffsetsByTimestampStrategy", "latest").options(**kafka_opts).load())
        mine = raw.where((_header("greta.query") == self.query) & (_header("greta.batch") == str(batch_id)))
        return {r.key for r in mine.select(F.col("key").cast("string").alias("key")).collect()}


def _header(name: str) -> Any:
    """The first value of header `name` as text (null when absent)."""
    return F.element_at(F.filter("headers", lambda h: h["key"] == name), 1)["value"].cast("string")


_KAFKA_ERROR = re.compile(r"(?:Caused by: )?((?:org\.apache\.kafka|java\.(?:net|io|util\.concurrent))[\w.$]*"
                          r"(?:Exception|Error)): ?(.*)")


def kafka_reason(exc: BaseException) -> str:
    """Kafka's own reason in a (Java-wrapped) failure: the innermost Kafka, network or
    timeout exception named in its text, as `ShortName: message`; else its first line."""
    found = [m for m in map(_KAFKA_ERROR.search, str(exc).splitlines()) if m is not None]
    kafka = [m for m in found if m.group(1).startswith("org.apache.kafka")] or found
    if not kafka:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return first if len(first) <= 300 else first[:297] + "..."
    name, message = kafka[-1].group(1).rsplit(".", 1)[-1], kafka[-1].group(2).strip()
    line = f"{name}: {message}" if message else name
    return line if len(line) <= 300 else line[:297] + "..."
