"""One micro-batch of one shard, as a plain function (no JVM needed).

Spark calls the stateful operator once per shard per micro-batch; a shard
holds every partition whose shard attributes hash to it (measured: per-group
calls cost 2-4 ms each, so many small partitions share one call and one state
blob). The shard attributes are GROUP-BY attributes of every query of the
stream (`QuerySet.shard_attrs`), so all partitions of a group of any query
live in one shard: the rollup to GROUP-BY groups happens here and every
emitted row is final.

A shard runs every query of its stream with one `MultiRunner`
(`greta_stream.runtime.multi`): the micro-batch's records are handed over
once, the planner's units (a query's own runner, or a shared pass of
several) evaluate them, and rows and dead letters carry their query's name.

Call order inside `step`:
  1. restore the runner from the state bytes (or start a new one);
  2. declare each query's watermark (Spark's, less the query's extra
     lateness), so records behind it are dead-lettered as late;
  3. add the micro-batch's records (bad ones are dead-lettered);
  4. advance to the watermarks: rows of every window that ended;
  5. return outputs (rows, dead letters, and each query's state size in
     this shard), the new state bytes (None when idle: no state kept) and
     the event-time timeout that wakes the shard for its next window.

State bytes: the shard's index and the shard count (checked on restore: a
checkpoint read with another count would put partitions in the wrong
shard), then the zlib'd `MultiRunner` snapshot (every query's state under
its name).
"""

from __future__ import annotations

import math
import pickle
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from greta_stream.cet.distributed import DEFERRED, to_text
from greta_stream.connectors.jsonl import dumps_payload, dumps_row
from greta_stream.engine import DeadLetter
from greta_stream.engine.timebase import TIMESTAMP
from greta_stream.errors import SnapshotError
from greta_stream.runtime import RunSpec
from greta_stream.runtime.multi import MultiRunner, QueryDeadLetter, QuerySet, run_fingerprint

# 2: the engine snapshot is zlib-compressed (level 1): scaled float sums and
# per-window slots compress about 30x, for a few ms per shard and batch.
# 3: a tag byte says which runner the snapshot is of (`RunSpec.snapshot`).
# 4: shards are keyed by `shard_keys` (spread evenly over Spark's partitions),
# and the state records its shard and the shard count (`Shard`), checked on
# restore. States of 2 and 3 were keyed by the shard number: not loadable.
# 5: one state per shard for every query of the stream (`MultiRunner`); a
# state of 4 (one query) becomes that of a stream of one query.
STATE_VERSION = 5

# kind: "row" (a result row), "deferred" (a CET window whose rows the batch writer
# extracts: spark/cet_distributed.py), "dead" or "state"
OUTPUT_COLUMNS = ("query", "kind", "window_start", "window_end", "grp", "payload")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: which partitions (hash of the GROUP-BY values mod count) it holds."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count <= _MAX_SHARDS:
            raise ValueError(f"shard {self.index} of {self.count}: need 0 <= index < count <= {_MAX_SHARDS}")

    def header(self) -> bytes:
        return struct.pack(">HH", self.index, self.count)

    def check(self, header: bytes) -> None:
        """Raise unless a state with this header was written by this shard."""
        index, count = struct.unpack(">HH", header)
        if count != self.count:
            raise SnapshotError(f"the checkpoint was written with {count} shards, this run has {self.count}: "
                                f"run with shards = {count}, or start from a new checkpoint")
        if index != self.index:
            raise SnapshotError(f"state of shard {index} handed to shard {self.index}: the checkpoint is "
                                "from another shard layout; start from a new checkpoint")


_MAX_SHARDS = 0xFFFF
_HEADER = 4  # Shard.header()


def spark_partition(key: int, partitions: int) -> int:
    """The shuffle partition Spark's hash partitioning gives an int grouping
    key: pmod(Murmur3_x86_32.hashInt(key, seed 42), partitions)."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k = rotl((key & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h = (rotl(42 ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4  # length in bytes
    h ^= h >> 16
    h = h * 0x85EBCA6B & 0xFFFFFFFF
    h ^= h >> 13
    h = h * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return (h - (1 << 32) if h >= 1 << 31 else h) % partitions


@lru_cache(maxsize=64)
def shard_keys(count: int) -> tuple[int, ...]:
    """The grouping key of each of `count` shards: the smallest int that
    Spark hashes to partition s of `count`. So with P shuffle partitions, P a
    divisor of `count` (the default: 2 shards per core), shard s runs in
    partition s mod P and every core gets as many shards. Keying by the shard
    number itself put 3 of 4 shards on one core of two."""
    keys: list[int] = []
    for s in range(count):
        k = 0
        while spark_partition(k, count) != s or k in keys:
            k += 1
        keys.append(k)
    return tuple(keys)


def upgrade_state(version: int, state: bytes, queries: QuerySet) -> bytes:
    """State bytes of an older STATE_VERSION in the current format: a state
    of 4 held one query's runner (a tag byte, the shard header, the zlib'd
    snapshot) and becomes the state of a stream whose one query it is.
    Formats 2 and 3 keyed shards differently: their states would land in the
    wrong shard."""
    if version == STATE_VERSION:
        return state
    if version == 4 and len(queries) == 1:
        name, spec = queries.specs[0]
        tagged = bytes(state[:1]) + zlib.decompress(state[5:])
        multi = pickle.dumps({"format": 1, "queries": {name: (run_fingerprint(spec), tagged)}},
                             protocol=pickle.HIGHEST_PROTOCOL)
        return bytes(state[1:5]) + zlib.compress(multi, 1)
    raise SnapshotError(f"state format {version} is not {STATE_VERSION}: start from a new checkpoint")


# The engines of this Python worker, by shard, with the state bytes they last
# wrote. Spark reuses workers, so the next batch of a shard usually brings
# those very bytes back: the engine is used as is (no unpickling; a columnar
# stream keeps its typed columns, which restoring would build again). Taken
# out while a step runs: a failed step is retried from the bytes, never from
# a half-run engine.
_LIVE: dict[tuple[QuerySet, Shard], tuple[bytes, MultiRunner]] = {}
_LIVE_MAX = 64  # engines
_LIVE_BYTES = 64 << 20  # of their (compressed) state bytes: a live engine takes several times that


def engine_watermark(kind: str | None, watermark_ms: int) -> Any:
    """Spark's watermark (ms since the epoch) in engine time units.

    Spark reports 0 before the first watermark exists; that means "none".
    """
    if watermark_ms <= 0:
        return -math.inf
    if kind == TIMESTAMP:
        return watermark_ms * 1000
    return watermark_ms // 1000 if watermark_ms % 1000 == 0 else watermark_ms / 1000


def query_watermark_ms(queries: QuerySet, spec: RunSpec, watermark_ms: int) -> int:
    """A query's watermark in ms: the stream's (Spark's, with the smallest
    lateness as its delay) less the query's extra lateness; 0 means none."""
    if watermark_ms <= 0:
        return 0
    return max(watermark_ms - round(queries.extra_lateness_s(spec) * 1000), 0)


def timeout_ms(multi: MultiRunner, watermark_ms: int) -> int | None:
    """When Spark should call this shard again without data (None: never):
    when the stream's watermark lets some query's next window close."""
    queries, kinds = multi.queries, multi.time_kinds()
    wake = None
    for name, end in multi.next_window_ends().items():
        ms = end // 1000 if kinds[name] == TIMESTAMP else math.ceil(end * 1000)
        ms = int(ms) + round(queries.extra_lateness_s(queries[name]) * 1000)
        wake = ms if wake is None else min(wake, ms)
    return None if wake is None else max(wake, watermark_ms, 1)


def step(
    queries: QuerySet | RunSpec, state: bytes | None, records: Iterable[Any] | pd.DataFrame, watermark_ms: int,
    shard: Shard = Shard(),
) -> tuple[list[dict[str, Any]], bytes | None, int | None]:
    """Run one micro-batch of one shard; see the module docstring. `records`
    are dicts, or a DataFrame of typed columns (NaN, None and NaT missing).
    A `RunSpec` stands for a stream of that one query, named "query"."""
    if isinstance(queries, RunSpec):
        queries = QuerySet.of({"query": queries})
    dead: list[tuple[str, DeadLetter]] = []
    multi = _runner(queries, state, shard, lambda name, dl: dead.append((name, dl)))

    def declared(spec: RunSpec, kind: str | None) -> Any:  # a query's watermark in its runner's time unit
        return engine_watermark(kind, query_watermark_ms(queries, spec, watermark_ms))

    multi.expect(declared)
    multi.add_many(records, declared)  # a DataFrame as it is: typed columns all the way
    rows = multi.advance(declared)
    specs = dict(queries.specs)
    out = [_row_output(specs[name], name, r) for name, r in rows] + [_dead_output(n, d) for n, d in dead]
    if multi.idle:
        kinds = multi.time_kinds()
        return out + [_state_output(name, shard, 0, kinds.get(name)) for name in queries.names], None, None
    blob = shard.header() + zlib.compress(multi.snapshot(), 1)
    kinds = multi.time_kinds()
    out += [_state_output(name, shard, size, kinds.get(name)) for name, size in multi.state_sizes.items()]
    _LIVE[(queries, shard)] = (blob, multi)
    while len(_LIVE) > _LIVE_MAX or (len(_LIVE) > 1 and sum(len(b) for b, _ in _LIVE.values()) > _LIVE_BYTES):
        _LIVE.pop(next(iter(_LIVE)))  # the least recently written
    return out, blob, timeout_ms(multi, watermark_ms)


def _runner(queries: QuerySet, state: bytes | None, shard: Shard, dead_letter: QueryDeadLetter) -> MultiRunner:
    """The shard's runner: new, the live one of this worker, or restored from the state bytes."""
    if not state:
        return MultiRunner(queries, dead_letter=dead_letter)
    shard.check(bytes(state[:_HEADER]))
    live = _LIVE.pop((queries, shard), None)
    if live is not None and live[0] == state:
        multi = live[1]  # this worker wrote these very bytes: its runners, caches and typed columns too
        multi.dead_letter = dead_letter
        return multi
    # Spark hands binary state over as a bytearray
    return MultiRunner.restore(queries, zlib.decompress(state[_HEADER:]), dead_letter=dead_letter)


def _row_output(spec: RunSpec, name: str, row: dict[str, Any]) -> dict[str, Any]:
    deferred = row.get(DEFERRED)
    if deferred is not None:  # a CET window that the batch writer extracts as a Spark job (cet_distributed.py)
        return {"query": name, "kind": "deferred", "window_start": _seconds(row["window_start"]),
                "window_end": _seconds(row["window_end"]), "grp": dumps_row([row[c] for c in spec.group_columns]),
                "payload": to_text(deferred)}
    return {
        "query": name,
        "kind": "row",
        "window_start": _seconds(row["window_start"]),
        "window_end": _seconds(row["window_end"]),
        "grp": dumps_row([row[c] for c in spec.group_columns]),
        "payload": dumps_payload(row),
    }


def _state_output(name: str, shard: Shard, size: int, time_kind: str | None) -> dict[str, Any]:
    """How many bytes (uncompressed) a query's state takes in this shard now, and
    the query's time kind as its runner knows it ("": not known yet)."""
    return {"query": name, "kind": "state", "window_start": float(shard.index), "window_end": None,
            "grp": time_kind or "", "payload": str(size)}


def _dead_output(name: str, d: DeadLetter) -> dict[str, Any]:
    # `dumps_row`: the text of `dumps` (records here come from JSON or typed columns: text keys), through the
    # json module's C encoder where it takes the record (4-5x faster: a replay that makes every event late)
    return {"query": name, "kind": "dead", "window_start": None, "window_end": None, "grp": d.reason,
            "payload": dumps_row(d.to_dict())}


def _seconds(x: Any) -> float:
    """A window bound as float seconds since the epoch (for sorting and filters)."""
    if hasattr(x, "timestamp"):
        return float(x.timestamp())
    return float(x)


def parse_json_records(values: Iterable[str | None]) -> list[Any]:
    """Records from JSON text; unparseable text becomes a `malformed` dead letter."""
    from greta_stream.connectors.jsonl import loads_many

    lines = values.tolist() if hasattr(values, "tolist") else list(values)
    return loads_many([v if isinstance(v, str) else None for v in lines])

