"""The Spark operator without Spark: a stream's micro-batches through `shard.step`.

`OperatorSim` does what `spark.operator.stream_outputs` asks of Spark, in
plain Python: each record goes to the shard of each slot of the stream's
layout (`spark.layout`) by a hash of that slot's attributes (to every shard
of every slot: --flush-at-end's event), `step` runs once per shard with
records or with a timeout that the watermark passed, the state of each
shard is kept between batches, and the watermark of the next batch is the
latest event time of the earlier ones, as the operator's watermark column
has it. The query set may change between batches (as a restarted stream's
does): the layout grows as Spark's would from the checkpoint's. With
`live=True` a new set reaches every shard of every slot in the batch it
first runs in, as the control row of a stream that takes query-set changes
(`spark.control`: the service's) does: a shard that no event and no timer
would wake yet runs with it (a lowered lateness closes its windows then).

Property tests drive it over random streams, splits and query sets and
compare each query's rows with `evaluate`. With `incremental=True` the
shards keep their state as the `transformWithStateInPandas` operator does
(`shard.step_incremental`: a small value and a map of chunks, written as
they change), and `rebuild=True` drops the worker's cached runners before
every call, so each step rebuilds its shard from the chunks.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Iterable
from typing import Any

from greta_stream.connectors import loads
from greta_stream.engine.timebase import TIMESTAMP, US_PER_S, TimeError, parse_time
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark import shard as shard_step
from greta_stream.spark.layout import StreamLayout
from greta_stream.spark.shard import FLUSH_TYPE, STATE_VERSION, Saved, Shard, step, step_incremental, upgrade_state

_CLAMP_S = (-5_000_000_000, 5_900_000_000)  # the operator's watermark column's range


class OperatorSim:
    """One stream's shards and their state over micro-batches (module docstring)."""

    def __init__(self, shards: int = 4, *, incremental: bool = False, rebuild: bool = False,
                 live: bool = False) -> None:
        self.layout = StreamLayout(shards)
        self.incremental, self.rebuild, self.live = incremental, rebuild, live
        self.queries: QuerySet | None = None  # the set of the last batch (live: a new one wakes every shard)
        self.states: dict[int, tuple[int, bytes]] = {}  # key -> (state version, bytes), as Spark keeps them
        self.saved: dict[int, Saved] = {}  # incremental: key -> value state
        self.chunks: dict[int, dict[str, bytes]] = {}  # incremental: key -> map state of chunks
        self.written: list[int] = []  # incremental: bytes written per call (value state and new chunks)
        self.timeouts: dict[int, int] = {}  # key -> ms
        self.watermark_ms = 0  # Spark's: the latest event time of earlier batches (0: none yet)
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.dead: dict[str, list[dict[str, Any]]] = {}
        self.errors: dict[str, str] = {}

    def finish(self, queries: QuerySet) -> None:
        """--flush-at-end: one flush event, which every shard takes for the end of input."""
        fields = queries.fields
        self.batch(queries, [{fields.type: FLUSH_TYPE, fields.time: 5_800_000_000}])

    def batch(self, queries: QuerySet, records: Iterable[Any]) -> None:
        """One micro-batch of `records` for `queries` (a new set: as a stream restarted with it)."""
        records = list(records)
        self.layout = self.layout.with_queries(queries)
        slots = self.layout.members(queries)
        fields = queries.fields
        routed: dict[int, list[Any]] = {}
        flushed: set[int] = set()
        every = [k for slot in slots for k in self.layout.keys(slot)]
        for rec in records:
            if isinstance(rec, dict) and rec.get(fields.type) == FLUSH_TYPE:
                for k in every:
                    routed.setdefault(k, []).append(rec)
                flushed.update(every)
                continue
            for slot in slots:
                attrs = self.layout.slots[slot]
                values = repr([_normalized(rec.get(a)) for a in attrs]) if isinstance(rec, dict) else "None"
                key = self.layout.keys(slot)[zlib.crc32(values.encode()) % self.layout.shards] if attrs else \
                    self.layout.keys(slot)[0]
                routed.setdefault(key, []).append(rec)
        due = {k for k, t in self.timeouts.items() if self.watermark_ms > t}
        if self.live and queries != self.queries:  # the control row of the new set
            due.update(every)
        self.queries = queries
        for key in sorted(set(routed) | due):
            self._call(key, slots, routed.get(key, []), key in flushed)
        horizon = time.time() + (queries.max_future_s if queries.max_future_s is not None else math.inf)
        times = [t for t in (_seconds(r, fields.time) for r in records) if t is not None and t <= horizon]
        max_ms = max((math.floor(t * 1000) for t in times), default=0)
        self.watermark_ms = max(self.watermark_ms, max_ms)

    def _call(self, key: int, slots: dict[int, QuerySet], records: list[Any], flush: bool) -> None:
        at = self.layout.locate(key)
        queries = slots.get(at[0]) if at is not None else None
        if queries is None:
            return  # no running query needs this slot: its state waits
        shard = Shard(at[1], self.layout.shards, self.layout.slots[at[0]])  # type: ignore[index]
        if self.incremental:
            out, timeout, kept = self._incremental(key, queries, records, shard, flush)
        else:
            saved = self.states.get(key)
            blob = upgrade_state(saved[0], saved[1], queries, shard) if saved is not None else None
            out, state, timeout = step(queries, blob, records, self.watermark_ms, shard, flush=flush)
            kept = state is not None
            if state is not None:
                self.states[key] = (STATE_VERSION, state)
            else:
                self.states.pop(key, None)
        for o in out:
            if o["kind"] == "row":
                self.rows.setdefault(o["query"], []).append(loads(o["payload"]))
            elif o["kind"] == "dead":
                self.dead.setdefault(o["query"], []).append(loads(o["payload"]))
            elif o["kind"] == "error":
                self.errors.setdefault(o["query"], o["payload"])
        self.timeouts.pop(key, None)
        if kept and timeout is not None:
            self.timeouts[key] = timeout

    def _incremental(self, key: int, queries: QuerySet, records: list[Any], shard: Shard,
                     flush: bool) -> tuple[list[dict[str, Any]], int | None, bool]:
        if self.rebuild:
            shard_step._INCREMENTAL_RUNNERS.clear()
        chunks = self.chunks.setdefault(key, {})
        out, new, written, removed, timeout = step_incremental(
            queries, self.saved.get(key), chunks, records, self.watermark_ms, shard, flush=flush)
        chunks.update(written)
        for k in removed:
            del chunks[k]
        if new is None:
            self.saved.pop(key, None)
            assert not chunks, "an idle shard keeps no chunks"
            self.chunks.pop(key)
        else:
            self.saved[key] = new
        self.written.append((len(new.blob) if new else 0) + sum(map(len, written.values())))
        return out, timeout, new is not None

    @property
    def holds_state(self) -> bool:
        return bool(self.states or self.saved)


def _normalized(v: Any) -> Any:
    """Group values as the operator hashes them: numbers in one spelling (1 and 1.0 alike)."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    return v


def _seconds(record: Any, time_field: str) -> float | None:
    """A record's time in seconds as the operator's watermark column reads it (None: no watermark time)."""
    if not isinstance(record, dict) or record.get(time_field) is None:
        return None
    try:
        kind, t = parse_time(record[time_field])
    except TimeError:
        return None
    s = t / US_PER_S if kind == TIMESTAMP else float(t)
    return s if _CLAMP_S[0] <= s <= _CLAMP_S[1] else None
