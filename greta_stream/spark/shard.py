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

The pieces `step` is made of are modules of their own: `eventtime` (watermarks,
the shard's clock, the end of input), `shard_state` (the state bytes, cached
runners) and `outputs` (the output rows). Their names used by other modules are
importable from here too.
"""

from __future__ import annotations

import math
import secrets
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from greta_stream.engine import DeadLetter
from greta_stream.engine.chunks import referred as chunk_keys
from greta_stream.engine.columnar.kept import chunk_store, release_memory
from greta_stream.runtime import RunSpec
from greta_stream.runtime.multi import MultiRunner, QueryDeadLetter
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.eventtime import (
    FLUSH_TIME_S,
    FLUSH_TYPE,
    end_of_input,
    engine_watermark,
    next_clock_s,
    query_watermark,
    record_seconds,
    spark_seconds,
    timeout_ms,
    trusted_watermark_s,
)
from greta_stream.spark.outputs import (
    OTHER_TYPES_SAID,
    OUTPUT_COLUMNS,
    dead_output,
    error_output,
    parse_json_records,
    row_output,
    state_outputs,
    state_payload,
    types_seen,
)
from greta_stream.spark.shard_state import (
    HEADER_SIZE,
    STATE_VERSION,
    HostVersions,
    RunnerCache,
    Shard,
    runner_cache_bytes,
    taken_over,
    upgrade_state,
)

__all__ = [  # with the names of eventtime, outputs and shard_state that other modules import from here
    "FLUSH_TIME_S", "FLUSH_TYPE", "OTHER_TYPES_SAID", "OUTPUT_COLUMNS", "STATE_VERSION", "ChunkMap", "RunnerCache",
    "Saved", "Shard", "chunk_shares", "dead_output", "end_of_input", "engine_watermark", "next_clock_s",
    "parse_json_records", "query_watermark", "record_seconds", "state_payload", "step", "step_bounded",
    "step_incremental", "taken_over", "timeout_ms", "trusted_watermark_s", "types_seen", "upgrade_state",
]

_HEADER = HEADER_SIZE  # the state header's size (bytes)

# `step`'s, by the state bytes they last wrote. Spark reuses workers, so the next batch of a shard
# usually brings those very bytes back: the engine is used as is (no unpickling; a columnar stream
# keeps its typed columns, which restoring would build again). Bounded by their compressed state
# bytes (a cached engine takes several times that in memory).
_RUNNERS = RunnerCache(64, 64 << 20)


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
        return out + state_outputs(queries, multi, shard, records, None), None, None
    blob = shard.header(clock_s) + zlib.compress(multi.snapshot(), 1)
    out += state_outputs(queries, multi, shard, records, multi.state_sizes)
    _RUNNERS.put((queries, shard), blob, multi, len(blob))
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
    out = [row_output(specs[name], name, r) for name, r in rows] + [dead_output(n, d) for n, d in dead]
    return out + [error_output(name, reason) for name, reason in multi.failed.items()]


@dataclass(frozen=True)
class Saved:
    """What the incremental operator keeps of a shard besides its chunks: the
    state's version (a random 63-bit number drawn at every micro-batch: a
    worker's cached runner goes on only from the very state it wrote, never
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
    (`stored.items()`) only when this worker has no cached runner of the saved
    version (after a restart, or when another worker ran the shard's last
    batch); their keys every batch."""
    queries, records = _query_set(queries), _listed(records)
    dead: list[tuple[str, DeadLetter]] = []
    multi, clock_s = _incremental_runner(queries, saved, stored, shard, lambda name, dl: dead.append((name, dl)))
    out, clock_s = _run(queries, multi, clock_s, records, watermark_ms, shard, times_s, flush, dead)
    before = set(stored.keys()) if saved is not None else set()
    if multi.idle and not multi.failed:
        return out + state_outputs(queries, multi, shard, records, None), None, {}, sorted(before), None
    with chunk_store() as store:
        snapshot = multi.snapshot()
    referred = chunk_keys(set().union(*multi.refs.values()) if multi.refs else set(), stored)
    new = Saved(secrets.randbits(63), shard.header(clock_s) + zlib.compress(snapshot, 1))
    written = {k: v for k, v in store.written.items() if k not in before and k in referred}
    sizes_of = chunk_shares(multi.refs)
    out += state_outputs(queries, multi, shard, records,
                         {name: size + sizes_of.get(name, 0) for name, size in multi.state_sizes.items()})
    # the state bytes it stands for: the value and the stored chunks it refers to
    _INCREMENTAL_RUNNERS.put((queries, shard), new.version, multi, len(new.blob) + sum(sizes_of.values()))
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


# A worker's cached runners of the incremental operator, by the bytes of the state they stand for (their kept
# events, about what they take in memory): past it the least recently run is dropped and rebuilt from the
# state store when its shard comes back (reading its window once). $GRETA_RUNNER_CACHE_BYTES sets another bound.
_INCREMENTAL_RUNNERS = RunnerCache(64, runner_cache_bytes(2 << 30), HostVersions())


def _incremental_runner(queries: QuerySet, saved: Saved | None, stored: ChunkMap, shard: Shard,
                        dead_letter: QueryDeadLetter) -> tuple[MultiRunner, float]:
    """The shard's runner (new, the cached one of this worker at the saved version, or
    rebuilt from the saved state and its chunks) and its clock."""
    if saved is None:
        return MultiRunner(queries, dead_letter=dead_letter), -math.inf
    clock_s = shard.check(bytes(saved.blob[:_HEADER]))
    multi = _INCREMENTAL_RUNNERS.take((queries, shard), saved.version)
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
    spark_s = spark_seconds(watermark_ms)
    trusted_s = trusted_watermark_s(spark_s, clock_s, times_s, max_future_s)
    clock_s = next_clock_s(clock_s, times_s, trusted_s, max_future_s)
    # Windows close by the shard's clock, which has this batch's events, not by Spark's watermark, which
    # has the batches' before it only: a window that this batch's events close is emitted in this batch,
    # a micro-batch before Spark's own windowed aggregation would emit it. No event can still reach it:
    # the next batch's watermark (the latest event time over every shard) is at least this clock, so an
    # event behind it less the lateness is late then. And a shard whose Spark watermark is not trusted
    # moves on by its clock at once: no later call may come while Spark's stands still.
    until_s = max(trusted_s, clock_s)
    if flush:  # the end of input: every window closes
        until_s = clock_s = max(clock_s, FLUSH_TIME_S)

    def watermark_of(stream_s: float) -> Any:  # a query's watermark in its runner's time unit
        return lambda spec, kind: query_watermark(spec, kind, stream_s)

    failed_before = set(multi.failed)
    multi.expect(watermark_of(trusted_s))
    multi.add_many(records, watermark_of(trusted_s))  # a DataFrame as it is: typed columns all the way
    rows = multi.advance(watermark_of(until_s))
    release_memory()
    specs = dict(queries.specs)
    out = [row_output(specs[name], name, r) for name, r in rows] + [dead_output(n, d) for n, d in dead]
    out += [error_output(name, reason) for name, reason in multi.failed.items() if name not in failed_before]
    return out, clock_s


def _runner(queries: QuerySet, state: bytes | None, shard: Shard,
            dead_letter: QueryDeadLetter) -> tuple[MultiRunner, float]:
    """The shard's runner (new, the cached one of this worker, or restored from the state bytes) and its clock."""
    if not state:
        return MultiRunner(queries, dead_letter=dead_letter), -math.inf
    clock_s = shard.check(bytes(state[:_HEADER]))
    multi = _RUNNERS.take((queries, shard), state)  # this worker wrote these very bytes: its runners, caches, columns
    multi = taken_over(multi, queries) if multi is not None else None
    if multi is not None:
        multi.dead_letter = dead_letter
        return multi, clock_s
    # Spark hands binary state over as a bytearray
    return MultiRunner.restore(queries, zlib.decompress(state[_HEADER:]), dead_letter=dead_letter), clock_s
