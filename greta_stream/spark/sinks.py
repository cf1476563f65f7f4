"""Where a query's output goes: one `Sink` protocol for every format.

A query's sinks and its dead-letter output are made by their format's class
(a `SinkClass`, which `greta_stream.spark.formats` registers for each sink
format of `greta_stream.choices.FORMATS`; `formats.make_sink`): its
`create(place)` builds the sink from a `SinkPlace`. Each micro-batch, the
query's `BatchWriter` hands every sink a `SinkBatch` through the one method
`write(spark, batch)`, whatever the format: the file sinks write payloads,
Kafka keyed messages, Delta typed rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import SparkSession

from greta_stream.pipeline.model import QueryConfig, SinkConfig


@dataclass(frozen=True)
class SinkBatch:
    """One micro-batch of one query's output for a sink: result rows (a sink of kind "row":
    operator outputs sorted by window and group, with `window_start`, `window_end`, `grp`
    and the row as JSON in `payload`) or dead letters (kind "dead": outputs sorted by their
    JSON `payload`, so that a replayed batch comes in the same order)."""

    batch_id: int
    outputs: list[Any]

    @property
    def payloads(self) -> list[str]:
        return [o.payload for o in self.outputs]


@dataclass(frozen=True)
class SinkPlace:
    """What a sink is made for: its query, what it writes ("row" or "dead"), its settings, and
    a path in the query's checkpoint where it may keep what it needs across restarts (None:
    no local checkpoint)."""

    query: QueryConfig
    kind: str
    cfg: SinkConfig
    log: Path | None


class Sink(Protocol):
    def write(self, spark: SparkSession, batch: SinkBatch) -> None:
        """Write one micro-batch; a replayed batch (the same id again) must not show twice."""


class SinkClass(Protocol):
    """A format's sink class, as `greta_stream.spark.formats` registers it: it makes a query's sink."""

    def create(self, place: SinkPlace) -> Sink:
        """The sink of `place` (its settings checked: a `ConfigError` says what is missing)."""
