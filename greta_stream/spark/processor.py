"""The processor pyspark runs for `transformWithStateInPandas`: `ShardProcessor`, light to load.

At a stream's first plan, pyspark loads the processor in a Python process of its own on the driver
(`STATEFUL_WORKER`) only to learn its state variables from `init`. The stream's operator (its
queries, layout and steps: `operator.incremental_processor`) travels inside the processor as bytes
and is loaded on a shard's first rows or timer, in the executors' workers. Loaded with the
processor, it took that first plan 1.2 s of imports (the engine, pandas, numba) and the
compilation of every query; this module imports pyspark's types and nothing of greta-stream's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

# a shard's value state (shard.Saved) and its map state of chunks
SAVED_SCHEMA = StructType([StructField("version", LongType()), StructField("blob", BinaryType())])
CHUNK_KEY_SCHEMA = StructType([StructField("key", StringType())])
CHUNK_SCHEMA = StructType([StructField("data", BinaryType())])
STATEFUL_WORKER = "pyspark.sql.streaming.transform_with_state_driver_worker"  # that worker's main module


class ShardProcessor(StatefulProcessor):
    """A shard's processor: its state (`init`), and `steps` (the pickled operator, whose `rows` and
    `step` take this processor for its handle and state) loaded on first use. The processor is
    also the shard's chunk map (`keys`, `items`: `shard.ChunkMap`)."""

    def __init__(self, steps: bytes) -> None:
        self.steps = steps
        self._loaded: Any = None

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.saved = handle.getValueState("saved", SAVED_SCHEMA)
        self.chunks = handle.getMapState("chunks", CHUNK_KEY_SCHEMA, CHUNK_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        yield self.loaded().rows(self, key, rows, timerValues.getCurrentWatermarkInMs())

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
        yield self.loaded().step(self, key, None, timerValues.getCurrentWatermarkInMs(),
                                 expiredTimerInfo.getExpiryTimeInMs())

    def loaded(self) -> Any:
        if self._loaded is None:
            from pyspark import cloudpickle

            self._loaded = cloudpickle.loads(self.steps)
        return self._loaded

    def keys(self) -> Iterable[str]:
        return [k[0] for k in self.chunks.keys()]  # noqa: SIM118 - a MapState, not a dict

    def items(self) -> Iterable[tuple[str, bytes]]:
        return [(k[0], bytes(v[0])) for k, v in self.chunks.iterator()]

    def close(self) -> None:
        pass

    def __reduce__(self) -> tuple[Any, ...]:  # the steps travel as bytes; the state comes with init()
        return _unpickled, (self.steps,)


def _unpickled(steps: bytes) -> ShardProcessor:
    """The processor where pyspark unpickles it: first in its driver-side worker at the stream's
    start, whose debugging lines it quiets from there on (`quiet_stateful_worker`)."""
    quiet_stateful_worker()
    return ShardProcessor(steps)


def quiet_stateful_worker() -> None:
    """In pyspark's driver-side transformWithStateInPandas worker only (`STATEFUL_WORKER`, one process
    per stream start), send what it prints from now on to /dev/null: its stdout carries nothing but
    pyspark's debugging lines (it talks to the JVM over a socket and reports errors through it, its
    tracebacks go to stderr), which Spark copies to the JVM's stderr. `session.get_session` drops them
    there; a session built elsewhere (the PySpark API) has nobody to."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(spec, "name", None) == STATEFUL_WORKER:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rest of that short-lived process
