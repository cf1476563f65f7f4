"""One micro-batch of one shard, as a plain function (no JVM needed).

Spark calls the stateful operator once per shard per micro-batch; a shard
holds every partition whose shard attributes hash to it (measured: per-group
calls cost 2-4 ms each, so many small partitions share one call and one state
blob). Each query shards by its own GROUP-BY attributes: the queries of a
stream that shard alike form a *slot* (`layout.py`), and a shard of a slot
holds whole groups of each of its queries, so the rollup to GROUP-BY groups
happens here and every emitted row is final.

A shard runs the queries of its slot with one `MultiRunner`
(`greta_stream.runtime.multi`): the micro-batch's records are handed over
once, the planner's units (a query's own runner, or a shared pass of
several) evaluate them, and rows and dead letters carry their query's name.
A query whose evaluation raises fails alone ("error" output); the others go
on.

Call order inside `step`:
  1. restore the runner from the state bytes (or start a new one);
  2. the shard's stream time: Spark's watermark (the latest event time),
     unless an event far in the future moved it (see "event time" below);
  3. declare each query's watermark (that time less the query's own
     lateness), so records behind it are dead-lettered as late;
  4. add the micro-batch's records (bad ones are dead-lettered);
  5. advance to the watermarks: rows of every window that ended;
  6. return outputs (rows, dead letters, failures, and each query's state
     size in this shard), the new state bytes (None when idle: no state
     kept) and the event-time timeout that wakes the shard for its next
     window.

State bytes: the shard's index, the shard count and the digest of its
slot's attributes (all checked on restore: a checkpoint read with another
layout would put partitions in the wrong shard), the shard's clock, then the
zlib'd `MultiRunner` snapshot (every query's state under its name).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import secrets
import struct
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import pandas as pd

from greta_stream.cet.distributed import DEFERRED, to_text
from greta_stream.connectors.jsonl import dumps_payload, dumps_row, loads_many
from greta_stream.engine import DeadLetter, FieldNames
from greta_stream.engine.columnar.kept import chunk_store, release_memory
from greta_stream.engine.ingest import reach
from greta_stream.engine.timebase import TIMESTAMP, US_PER_S, TimeError, parse_time
from greta_stream.errors import SnapshotError
from greta_stream.runtime import RunSpec
from greta_stream.runtime.multi import MultiRunner, QueryDeadLetter
from greta_stream.runtime.queryset import QuerySet, run_fingerprint
from greta_stream.spark.layout import MAX_SHARDS, attrs_id

log = logging.getLogger("greta_stream.spark")

# `greta-stream run --flush-at-end` (flush.py) ends a bounded input with one event of
# this type at this time (in 2153, inside the range of the operator's watermark
# column, up to 2156): the operator hands it to every shard, which then closes every
# window. A watermark past it is the end of input.
FLUSH_TYPE = "__greta_flush__"
FLUSH_TIME_S = 5_800_000_000


def end_of_input(fields: FieldNames = FieldNames(), timestamps: bool = False) -> dict[str, Any]:
    """The event that ends a bounded input: written to a stream's source (a file
    in its folder, a message on its topic) after the last event, it makes every
    shard emit every window it still holds. `timestamps`: the stream's times are
    ISO-8601 timestamps (a validator would dead-letter a number there). Input
    after it is late."""
    at: Any = FLUSH_TIME_S
    if timestamps:
        at = datetime.fromtimestamp(FLUSH_TIME_S, UTC).isoformat().replace("+00:00", "Z")
    return {fields.type: FLUSH_TYPE, fields.time: at}

# 2: the engine snapshot is zlib-compressed (level 1): scaled float sums and
# per-window slots compress about 30x, for a few ms per shard and batch.
# 3: a tag byte says which runner the snapshot is of (`RunSpec.snapshot`).
# 4: shards are keyed by `shard_keys` (spread evenly over Spark's partitions),
# and the state records its shard and the shard count (`Shard`), checked on
# restore. States of 2 and 3 were keyed by the shard number: not loadable.
# 5: one state per shard for every query of the stream (`MultiRunner`); a
# state of 4 (one query) becomes that of a stream of one query.
# 6: the header also records the digest of the shard attributes of the
# shard's slot (`layout.py`), checked on restore, and the shard's clock. A
# state of 5 is one of slot 0 of a checkpoint from before slots.
STATE_VERSION = 6

# One output per row of every kind, each column meaning one thing:
# - "row": a result row; `window_start`/`window_end` (seconds), `grp` (its GROUP-BY
#   values as a JSON list), `payload` (the row as JSON);
# - "deferred": a CET window whose rows the batch writer extracts (spark/cet_distributed.py);
#   the same columns, `payload` the window's graph;
# - "dead": a dead letter; `reason`, and `payload` (reason, detail, event as JSON);
# - "state": what a query's state takes in one shard; `payload` is JSON: bytes, the
#   shard's index and the query's time kind (null: not known yet);
# - "error": a query failed in this shard (the other queries go on): its one-line
#   reason in `payload`.
# Columns a kind does not use are null.
OUTPUT_COLUMNS = ("query", "kind", "window_start", "window_end", "grp", "payload", "reason")

_HEADER_FORMAT = ">HHQd"  # shard index, shard count, digest of the slot's attributes, clock (s)
_HEADER = struct.calcsize(_HEADER_FORMAT)
_V5_HEADER = 4


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` of a slot that shards by `attrs`: which partitions
    (hash of those GROUP-BY values mod count) it holds."""

    index: int = 0
    count: int = 1
    attrs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count <= MAX_SHARDS:
            raise ValueError(f"shard {self.index} of {self.count}: need 0 <= index < count <= {MAX_SHARDS}")

    def header(self, clock_s: float = -math.inf) -> bytes:
        return struct.pack(_HEADER_FORMAT, self.index, self.count, attrs_id(self.attrs), clock_s)

    def check(self, header: bytes) -> float:
        """The clock of a state with this header; raise unless this shard wrote it."""
        index, count, attrs, clock_s = struct.unpack(_HEADER_FORMAT, header)
        if count != self.count:
            raise SnapshotError(f"the checkpoint was written with {count} shards, this run has {self.count}: "
                                f"run with shards = {count}, or start from a new checkpoint")
        if index != self.index or attrs != attrs_id(self.attrs):
            raise SnapshotError(f"state of shard {index} handed to shard {self.index} of attributes "
                                f"{list(self.attrs)}: the checkpoint is from another shard layout; start from a "
                                "new checkpoint")
        return float(clock_s)


def upgrade_state(version: int, state: bytes, queries: QuerySet, shard: Shard = Shard()) -> bytes:
    """State bytes of an older STATE_VERSION in the current format.

    A state of 5 (a shard header without the slot, then the zlib'd stream
    state) is one of slot 0 of a checkpoint from before slots: the header of
    `shard` is put in front, with no clock yet. A state of 4 held one query's
    runner (a tag byte, the shard header, the zlib'd snapshot) and becomes
    the state of a stream whose one query it is. Formats 2 and 3 keyed shards
    differently: their states would land in the wrong shard."""
    if version == STATE_VERSION:
        return state
    if version == 5:
        index, count = struct.unpack(">HH", bytes(state[:_V5_HEADER]))
        old = Shard(index, count, shard.attrs) if index < count else shard
        return old.header() + bytes(state[_V5_HEADER:])
    if version == 4 and len(queries) == 1:
        name, spec = queries.specs[0]
        tagged = bytes(state[:1]) + zlib.decompress(state[5:])
        multi = pickle.dumps({"format": 1, "queries": {name: (run_fingerprint(spec), tagged)}},
                             protocol=pickle.HIGHEST_PROTOCOL)
        return upgrade_state(5, bytes(state[1:5]) + zlib.compress(multi, 1), queries, shard)
    raise SnapshotError(f"state format {version} is not {STATE_VERSION}: start from a new checkpoint")


class LiveRunners:
    """A worker's live runners, one per shard of a stream's run (`QuerySet.epoch`), each with the
    state it last wrote (`tag`: its bytes, or its version) and the bytes of state it stands for.
    Taken out while a step runs (a failed step is retried from the state, never from a half-run
    runner), put back after it; bounded by count and by those bytes: past either, the least
    recently written goes. A step with another query set of the same run (a query registered,
    stopped or changed since) takes the runner over to that set (`MultiRunner.reconfigure`): one
    runner per shard however often the set changes, and only what changed is read again."""

    def __init__(self, max_count: int, max_bytes: int) -> None:
        self.max_count, self.max_bytes = max_count, max_bytes
        self.items: dict[tuple[int, Shard], tuple[Any, MultiRunner, int]] = {}

    def take(self, key: tuple[QuerySet, Shard], tag: Any) -> MultiRunner | None:
        """The live runner of `key` (a query set, a shard) when the state it wrote is `tag` (it is
        taken out either way), maybe of another query set of the run (`taken_over`)."""
        queries, shard = key
        live = self.items.pop((queries.epoch, shard), None)
        return live[1] if live is not None and live[0] == tag else None

    def put(self, key: tuple[QuerySet, Shard], tag: Any, multi: MultiRunner, size: int) -> None:
        queries, shard = key
        self.items[(queries.epoch, shard)] = (tag, multi, size)
        while len(self.items) > self.max_count or (
                len(self.items) > 1 and sum(n for _, _, n in self.items.values()) > self.max_bytes):
            self.items.pop(next(iter(self.items)))  # the least recently written

    def clear(self) -> None:
        self.items.clear()

    def __iter__(self) -> Iterator[tuple[int, Shard]]:
        return iter(self.items)


def taken_over(multi: MultiRunner, queries: QuerySet) -> MultiRunner | None:
    """A live runner taken over to `queries` (`MultiRunner.reconfigure`: a query registered, stopped
    or changed since it ran); None when it cannot be (restore from the state it wrote)."""
    if multi.queries == queries:
        return multi
    try:
        multi.reconfigure(queries)
    except Exception:  # noqa: BLE001 - the state it wrote is there: restore from it
        log.warning("a live runner could not take the new query set; restoring it from the state", exc_info=True)
        return None
    return multi


# `step`'s, by the state bytes they last wrote. Spark reuses workers, so the next batch of a shard
# usually brings those very bytes back: the engine is used as is (no unpickling; a columnar stream
# keeps its typed columns, which restoring would build again). Bounded by their compressed state
# bytes (a live engine takes several times that in memory).
_LIVE = LiveRunners(64, 64 << 20)


def engine_watermark(kind: str | None, watermark_ms: float) -> Any:
    """A watermark in ms since the epoch (Spark's unit) in engine time units.

    Spark reports 0 before the first watermark exists; that means "none".
    """
    if watermark_ms <= 0:
        return -math.inf
    if kind == TIMESTAMP:
        return int(watermark_ms) * 1000
    return watermark_ms // 1000 if watermark_ms % 1000 == 0 else watermark_ms / 1000


def query_watermark_ms(spec: RunSpec, watermark_ms: float) -> float:
    """A query's watermark in ms: the stream's event time (Spark's watermark,
    which the operator keeps at the latest event time) less the query's own
    lateness; 0 means none. It never depends on the stream's other queries."""
    if watermark_ms <= 0:
        return 0
    return max(watermark_ms - round(spec.lateness_s * 1000), 0)


def timeout_ms(multi: MultiRunner, watermark_ms: int) -> int | None:
    """When Spark should call this shard again without data (None: never):
    when the stream's watermark lets some query's next window close."""
    kinds = multi.time_kinds()
    wake = None
    for name, end in multi.next_window_ends().items():
        ms = end // 1000 if kinds[name] == TIMESTAMP else math.ceil(end * 1000)
        ms = int(ms) + round(multi.queries[name].lateness_s * 1000)
        wake = ms if wake is None else min(wake, ms)
    return None if wake is None else max(wake, watermark_ms, 1)


# ------------------------------------------------------------------ event time
# Spark's watermark is the latest event time of the stream (the operator's watermark
# column has no delay of its own; each query subtracts its own lateness). Events
# further ahead than `max_future_s` are kept out of that column where Spark can tell
# (below, `max_future_s` is the step of `QuerySet.future_step_s`: a query's lateness when longer)
# (ahead of the wall clock), but an event ahead of the stream's time yet not of the
# wall clock (a replay of old input) still moves it. So each shard keeps its own
# clock: the latest time of the plausible events it has seen (those that steps of at
# most `max_future_s` through its batches' times reach from what it trusted then:
# a batch of history spanning a year is plausible, a jump of years is not). A Spark
# watermark more than `max_future_s` ahead of what the shard's clock reaches through
# the batch is not trusted: the shard goes by its clock until its events catch up.
# No event's time moves a query's watermark past `max_future_s` ahead of the events
# before it.

def trusted_watermark_s(spark_s: float, clock_s: float, times_s: Any, max_future_s: float | None) -> float:
    """The stream time a shard goes by (seconds): Spark's watermark, unless it is
    more than `max_future_s` ahead of what the shard's clock (or, in a shard with
    no clock yet, the median time of its batch) reaches through the batch's
    times (`reach`): then the clock."""
    if max_future_s is None or spark_s == -math.inf:
        return spark_s
    ref = clock_s if clock_s > -math.inf else _median(times_s)
    if ref == -math.inf or spark_s <= reach(ref, _finite(times_s), max_future_s) + max_future_s:
        return spark_s
    return clock_s


def next_clock_s(clock_s: float, times_s: Any, trusted_s: float, max_future_s: float | None) -> float:
    """The shard's clock after a batch with event times `times_s` (NaN: no time)."""
    if times_s is None or len(times_s) == 0:
        return clock_s
    finite = _finite(times_s)
    if max_future_s is not None and finite.size:
        base = trusted_s if trusted_s > -math.inf else clock_s if clock_s > -math.inf else _median(finite)
        finite = finite[finite <= reach(base, finite, max_future_s)]
    return max(clock_s, float(finite.max())) if finite.size else clock_s


def _finite(times_s: Any) -> np.ndarray:
    return np.zeros(0) if times_s is None else times_s[np.isfinite(times_s)]


def _median(times_s: Any) -> float:
    if times_s is None:
        return -math.inf
    finite = times_s[np.isfinite(times_s)]
    return float(np.median(finite)) if finite.size else -math.inf


def record_seconds(records: Any, time_field: str) -> np.ndarray:
    """Each record's event time in seconds since the epoch (NaN where it has none), as the
    operator's watermark column reads it (for callers that have no such column)."""
    if hasattr(records, "columns"):
        if time_field not in records.columns:
            return np.full(len(records), np.nan)
        values = records[time_field].tolist()
    else:
        values = [r.get(time_field) if isinstance(r, dict) else None for r in records]
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if v is None:
            continue
        try:
            kind, t = parse_time(v)
        except TimeError:
            continue
        out[i] = t / US_PER_S if kind == TIMESTAMP else t
    return out


def step(
    queries: QuerySet | RunSpec, state: bytes | None, records: Iterable[Any] | pd.DataFrame, watermark_ms: int,
    shard: Shard = Shard(), *, times_s: np.ndarray | None = None, flush: bool = False,
) -> tuple[list[dict[str, Any]], bytes | None, int | None]:
    """Run one micro-batch of one shard whose state is one value (the
    `applyInPandasWithState` operator); see the module docstring. `records`
    are dicts, or a DataFrame of typed columns (NaN, None and NaT missing);
    `times_s` their event times as Spark's watermark column reads them
    (None: read here); `flush`: the batch holds `--flush-at-end`'s event
    (the end of input). A `RunSpec` stands for a stream of that one query,
    named "query"."""
    queries, records = _query_set(queries), _listed(records)
    dead: list[tuple[str, DeadLetter]] = []
    multi, clock_s = _runner(queries, state, shard, lambda name, dl: dead.append((name, dl)))
    out, clock_s = _run(queries, multi, clock_s, records, watermark_ms, shard, times_s, flush, dead)
    if multi.idle and not multi.failed:
        return out + _state_outputs(queries, multi, shard, records, None), None, None
    blob = shard.header(clock_s) + zlib.compress(multi.snapshot(), 1)
    out += _state_outputs(queries, multi, shard, records, multi.state_sizes)
    _LIVE.put((queries, shard), blob, multi, len(blob))
    return out, blob, timeout_ms(multi, watermark_ms)


def step_bounded(queries: QuerySet | RunSpec, records: Iterable[Any] | pd.DataFrame,
                 shard: Shard = Shard()) -> list[dict[str, Any]]:
    """Every output of one shard of a bounded input given at once (a batch
    DataFrame's shard): its records in any order, every window closed at the
    end, as `evaluate` gives them; no state is kept."""
    queries, records = _query_set(queries), _listed(records)
    dead: list[tuple[str, DeadLetter]] = []
    multi = MultiRunner(queries, dead_letter=lambda name, dl: dead.append((name, dl)))
    multi.add_many(records)
    rows = multi.finish()
    release_memory()
    specs = dict(queries.specs)
    out = [_row_output(specs[name], name, r) for name, r in rows] + [dead_output(n, d) for n, d in dead]
    return out + [_error_output(name, reason) for name, reason in multi.failed.items()]


@dataclass(frozen=True)
class Saved:
    """What the incremental operator keeps of a shard besides its chunks: the
    state's version (a random 63-bit number drawn at every micro-batch: a
    worker's live runner goes on only from the very state it wrote, never
    from another stream's or an earlier checkpoint's that counted to the same
    number), and the shard header and the zlib'd stream state whose kept
    events are chunks named by key."""

    version: int
    blob: bytes


class ChunkMap(Protocol):
    """A shard's chunks as its state store holds them (key -> bytes)."""

    def keys(self) -> Iterable[str]: ...

    def items(self) -> Iterable[tuple[str, bytes]]: ...


def step_incremental(
    queries: QuerySet | RunSpec, saved: Saved | None, stored: ChunkMap, records: Iterable[Any] | pd.DataFrame,
    watermark_ms: int, shard: Shard = Shard(), *, times_s: np.ndarray | None = None, flush: bool = False,
) -> tuple[list[dict[str, Any]], Saved | None, dict[str, bytes], list[str], int | None]:
    """Run one micro-batch of one shard whose state is a small value and
    chunks of kept events (the `transformWithStateInPandas` operator): what
    `step` does, writing what changed only. Returns the outputs, the new
    `Saved` (None: idle, keep nothing), the chunks to write (key -> bytes),
    the chunk keys to remove, and the timer. The stored chunks are read
    (`stored.items()`) only when this worker has no live runner of the saved
    version (after a restart, or when another worker ran the shard's last
    batch); their keys every batch."""
    queries, records = _query_set(queries), _listed(records)
    dead: list[tuple[str, DeadLetter]] = []
    multi, clock_s = _incremental_runner(queries, saved, stored, shard, lambda name, dl: dead.append((name, dl)))
    out, clock_s = _run(queries, multi, clock_s, records, watermark_ms, shard, times_s, flush, dead)
    before = set(stored.keys()) if saved is not None else set()
    if multi.idle and not multi.failed:
        return out + _state_outputs(queries, multi, shard, records, None), None, {}, sorted(before), None
    with chunk_store() as store:
        snapshot = multi.snapshot()
    referred = set().union(*multi.refs.values()) if multi.refs else set()
    new = Saved(secrets.randbits(63), shard.header(clock_s) + zlib.compress(snapshot, 1))
    written = {k: v for k, v in store.written.items() if k not in before and k in referred}
    sizes_of = chunk_shares(multi.refs)
    out += _state_outputs(queries, multi, shard, records,
                          {name: size + sizes_of.get(name, 0) for name, size in multi.state_sizes.items()})
    # the state bytes it stands for: the value and the stored chunks it refers to
    _LIVE_INCREMENTAL.put((queries, shard), new.version, multi, len(new.blob) + sum(sizes_of.values()))
    return out, new, written, sorted(set(before) - referred), timeout_ms(multi, watermark_ms)


def chunk_shares(refs: dict[str, dict[str, int]]) -> dict[str, int]:
    """Each query's part of the chunks' stored bytes: a chunk several queries
    refer to (a family's) counted once, split between them."""
    holders: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    for name, keys in refs.items():
        for k, size in keys.items():
            holders.setdefault(k, []).append(name)
            sizes[k] = size
    out: dict[str, int] = {}
    for k, names in holders.items():
        each = sizes[k] // len(names)
        for name in names:
            out[name] = out.get(name, 0) + each
    return out


# A worker's live runners of the incremental operator, by the bytes of the state they stand for (their kept
# events, about what they take in memory): past it the least recently run is dropped and rebuilt from the
# state store when its shard comes back (reading its window once). $GRETA_LIVE_BYTES sets another bound.
_LIVE_INCREMENTAL = LiveRunners(64, int(os.environ.get("GRETA_LIVE_BYTES", 2 << 30)))


def _incremental_runner(queries: QuerySet, saved: Saved | None, stored: ChunkMap, shard: Shard,
                        dead_letter: QueryDeadLetter) -> tuple[MultiRunner, float]:
    """The shard's runner (new, the live one of this worker at the saved version, or
    rebuilt from the saved state and its chunks) and its clock."""
    if saved is None:
        return MultiRunner(queries, dead_letter=dead_letter), -math.inf
    clock_s = shard.check(bytes(saved.blob[:_HEADER]))
    multi = _LIVE_INCREMENTAL.take((queries, shard), saved.version)
    if multi is not None and multi.queries != queries:
        with chunk_store(dict(stored.items())):  # what changed starts from its saved state and chunks
            multi = taken_over(multi, queries)
    if multi is not None:
        multi.dead_letter = dead_letter
        return multi, clock_s
    with chunk_store(dict(stored.items())):
        multi = MultiRunner.restore(queries, zlib.decompress(saved.blob[_HEADER:]), dead_letter=dead_letter)
    return multi, clock_s


def _query_set(queries: QuerySet | RunSpec) -> QuerySet:
    return QuerySet.of({"query": queries}) if isinstance(queries, RunSpec) else queries


def _listed(records: Iterable[Any] | pd.DataFrame) -> Any:
    return records if isinstance(records, list) or hasattr(records, "columns") else list(records)


def _run(queries: QuerySet, multi: MultiRunner, clock_s: float, records: Any, watermark_ms: int, shard: Shard,
         times_s: np.ndarray | None, flush: bool, dead: list[tuple[str, DeadLetter]]) -> tuple[list[Any], float]:
    """Steps 2-5 of the module docstring: the outputs (rows, dead letters, failures) and the shard's new clock."""
    if times_s is None:
        times_s = record_seconds(records, queries.fields.time)
    max_future_s = queries.future_step_s
    spark_s = watermark_ms / 1000 if watermark_ms > 0 else -math.inf
    trusted_s = trusted_watermark_s(spark_s, clock_s, times_s, max_future_s)
    clock_s = next_clock_s(clock_s, times_s, trusted_s, max_future_s)
    # Going by its clock, the shard moves on with its own events at once (what Spark's
    # watermark does at the end of a batch): no later call may come while Spark's stands still.
    until_s = trusted_s if trusted_s == spark_s else clock_s
    if flush:  # the end of input: every window closes
        until_s = clock_s = max(clock_s, FLUSH_TIME_S)

    def watermark_of(stream_s: float) -> Any:  # a query's watermark in its runner's time unit
        ms = math.floor(stream_s * 1000) if stream_s > -math.inf else 0
        return lambda spec, kind: engine_watermark(kind, query_watermark_ms(spec, ms))

    failed_before = set(multi.failed)
    multi.expect(watermark_of(trusted_s))
    multi.add_many(records, watermark_of(trusted_s))  # a DataFrame as it is: typed columns all the way
    rows = multi.advance(watermark_of(until_s))
    release_memory()
    specs = dict(queries.specs)
    out = [_row_output(specs[name], name, r) for name, r in rows] + [dead_output(n, d) for n, d in dead]
    out += [_error_output(name, reason) for name, reason in multi.failed.items() if name not in failed_before]
    return out, clock_s


def _runner(queries: QuerySet, state: bytes | None, shard: Shard,
            dead_letter: QueryDeadLetter) -> tuple[MultiRunner, float]:
    """The shard's runner (new, the live one of this worker, or restored from the state bytes) and its clock."""
    if not state:
        return MultiRunner(queries, dead_letter=dead_letter), -math.inf
    clock_s = shard.check(bytes(state[:_HEADER]))
    multi = _LIVE.take((queries, shard), state)  # this worker wrote these very bytes: its runners, caches, columns
    multi = taken_over(multi, queries) if multi is not None else None
    if multi is not None:
        multi.dead_letter = dead_letter
        return multi, clock_s
    # Spark hands binary state over as a bytearray
    return MultiRunner.restore(queries, zlib.decompress(state[_HEADER:]), dead_letter=dead_letter), clock_s


def _row_output(spec: RunSpec, name: str, row: dict[str, Any]) -> dict[str, Any]:
    deferred = row.get(DEFERRED)
    if deferred is not None:  # a CET window that the batch writer extracts as a Spark job (cet_distributed.py)
        return {"query": name, "kind": "deferred", "window_start": _seconds(row["window_start"]),
                "window_end": _seconds(row["window_end"]), "grp": dumps_row([row[c] for c in spec.group_columns]),
                "payload": to_text(deferred), "reason": None}
    return {
        "query": name,
        "kind": "row",
        "window_start": _seconds(row["window_start"]),
        "window_end": _seconds(row["window_end"]),
        "grp": dumps_row([row[c] for c in spec.group_columns]),
        "payload": dumps_payload(row),
        "reason": None,
    }


def _state_outputs(queries: QuerySet, multi: MultiRunner, shard: Shard, records: Any,
                   sizes: dict[str, int] | None) -> list[dict[str, Any]]:
    """Each query's state output of the batch (both operators): its state bytes (`sizes`; None: the
    shard keeps nothing, every query 0), its time kind and the types its events had."""
    kinds, seen, engines = multi.time_kinds(), types_seen(queries, records), multi.engines()
    sizes = dict.fromkeys(queries.names, 0) if sizes is None else sizes
    return [_state_output(name, shard, size, kinds.get(name), seen.get(name), engines.get(name))
            for name, size in sizes.items()]


def _state_output(name: str, shard: Shard, size: int, time_kind: str | None,
                  seen: tuple[dict[str, int], dict[str, int]] | None = None,
                  engine: tuple[str, str | None] | None = None) -> dict[str, Any]:
    """How many bytes (uncompressed) a query's state takes in this shard now, the
    query's time kind as its runner knows it ("": not known yet), what this
    batch's records were to it (`types_seen`) and the engine it ran on (with why,
    for the general engine: `MultiRunner.engines`)."""
    return {"query": name, "kind": "state", "window_start": None, "window_end": None, "grp": None,
            "payload": state_payload(size, shard.index, time_kind, seen, engine), "reason": None}


def state_payload(size: int, shard: int, time_kind: str | None,
                  seen: tuple[dict[str, int], dict[str, int]] | None = None,
                  engine: tuple[str, str | None] | None = None) -> str:
    doc: dict[str, Any] = {"bytes": size, "shard": shard, "time_kind": time_kind or None}
    if seen is not None and (any(seen[0].values()) or seen[1]):
        doc["typed"], doc["other_types"] = seen
    if engine is not None:
        doc["engine"] = list(engine)
    return dumps_row(doc)


OTHER_TYPES_SAID = 8  # the other types a shard reports per batch (the most frequent)


def types_seen(queries: QuerySet, records: Any) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per running query: how many of the batch's records are of each of its
    types, and the other types by count (some): what tells a query whose
    types match no event (a misspelled or miscased type) from a quiet one."""
    field = queries.fields.type
    if isinstance(records, pd.DataFrame):
        counts = records[field].value_counts() if field in records.columns and len(records) else {}
        by_type = {str(t): int(n) for t, n in counts.items()}
    else:
        tally: Counter[str] = Counter(t for t in (r.get(field) for r in records if isinstance(r, dict))
                                      if isinstance(t, str))
        by_type = dict(tally)
    by_type.pop(FLUSH_TYPE, None)  # the end of input's event is no one's
    if not by_type:
        return {}
    out: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for name, spec in queries:
        mine = spec.query.by_type
        others = Counter({t: n for t, n in by_type.items() if t not in mine})
        out[name] = ({t: by_type[t] for t in mine if t in by_type}, dict(others.most_common(OTHER_TYPES_SAID)))
    return out


def _error_output(name: str, reason: str) -> dict[str, Any]:
    """A query failed in this shard (the others go on): its one-line reason."""
    return {"query": name, "kind": "error", "window_start": None, "window_end": None, "grp": None, "payload": reason,
            "reason": None}


def dead_output(name: str, d: DeadLetter) -> dict[str, Any]:
    # compact JSON, as result rows are (orjson: fast when a replay makes every event late)
    return {"query": name, "kind": "dead", "window_start": None, "window_end": None, "grp": None,
            "payload": dumps_payload(d.to_dict()), "reason": d.reason}


def _seconds(x: Any) -> float:
    """A window bound as float seconds since the epoch (for sorting and filters)."""
    if hasattr(x, "timestamp"):
        return float(x.timestamp())
    return float(x)


def parse_json_records(values: Iterable[str | None], unique: tuple[str, ...] = ()) -> list[Any]:
    """Records from JSON text; text that is not JSON, nests too deeply or gives a
    key of `unique` twice becomes a `malformed` dead letter (`jsonl.checked`)."""
    lines = values.tolist() if hasattr(values, "tolist") else list(values)
    return loads_many([v if isinstance(v, str) else None for v in lines], unique)

