"""One micro-batch of one shard, as a plain function (no JVM needed).

Spark calls the stateful operator once per shard per micro-batch; a shard
holds every partition whose GROUP-BY values hash to it (SPARK_NOTES: per-group
calls cost 2-4 ms each, so many small partitions share one call and one state
blob). All partitions of a group live in one shard, so the rollup to
GROUP-BY groups happens here and every emitted row is final.

The runner of a shard is the one the run's `RunSpec` builds (the columnar
stream, the general engine or CET extraction); `step` calls it through the
runner interface only (`greta_stream.runtime.Runner`).

Call order inside `step`:
  1. restore the runner from the state bytes (or start a new one);
  2. declare the watermark, so records behind it are dead-lettered as late;
  3. add the micro-batch's records (bad ones are dead-lettered);
  4. advance to the watermark: rows of every window that ended;
  5. return outputs, the new state bytes (None when idle: no state kept)
     and the event-time timeout that wakes the shard for its next window.

State bytes: a tag byte (the runner, `RunSpec.snapshot`), the shard's index
and the shard count (checked on restore: a checkpoint read with another
count would put partitions in the wrong shard), the zlib'd runner snapshot.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from greta_stream.connectors.jsonl import dumps, dumps_row
from greta_stream.engine import DeadLetter
from greta_stream.engine.timebase import TIMESTAMP
from greta_stream.errors import SnapshotError
from greta_stream.runtime import Runner, RunSpec

# 2: the engine snapshot is zlib-compressed (level 1): scaled float sums and
# per-window slots compress about 30x, for a few ms per shard and batch.
# 3: a tag byte says which runner the snapshot is of (`RunSpec.snapshot`).
# 4: shards are keyed by `shard_keys` (spread evenly over Spark's partitions),
# and the state records its shard and the shard count (`Shard`), checked on
# restore. States of 2 and 3 were keyed by the shard number: not loadable.
STATE_VERSION = 4

OUTPUT_COLUMNS = ("kind", "window_start", "window_end", "grp", "payload")


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
_HEADER = 1 + 4  # tag byte, Shard.header()


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


def upgrade_state(version: int, state: bytes) -> bytes:
    """State bytes of an older STATE_VERSION in the current format (none so
    far: formats 2 and 3 keyed shards differently, their states would land
    in the wrong shard)."""
    if version != STATE_VERSION:
        raise SnapshotError(f"state format {version} is not {STATE_VERSION}: start from a new checkpoint")
    return state


# The engines of this Python worker, by shard, with the state bytes they last
# wrote. Spark reuses workers, so the next batch of a shard usually brings
# those very bytes back: the engine is used as is (no unpickling; a columnar
# stream keeps its typed columns, which restoring would build again). Taken
# out while a step runs: a failed step is retried from the bytes, never from
# a half-run engine.
_LIVE: dict[tuple[RunSpec, Shard], tuple[bytes, Runner]] = {}
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


def timeout_ms(runner: Runner, watermark_ms: int) -> int | None:
    """When Spark should call this shard again without data (None: never)."""
    end = runner.next_window_end()
    if end is None:
        return None
    ms = end // 1000 if runner.time_kind == TIMESTAMP else math.ceil(end * 1000)
    return max(int(ms), watermark_ms, 1)


def step(
    spec: RunSpec, state: bytes | None, records: Iterable[Any] | pd.DataFrame, watermark_ms: int,
    shard: Shard = Shard(),
) -> tuple[list[dict[str, Any]], bytes | None, int | None]:
    """Run one micro-batch of one shard; see the module docstring. `records`
    are dicts, or a DataFrame of typed columns (NaN, None and NaT missing)."""
    dead: list[DeadLetter] = []
    runner = _runner(spec, state, shard, dead.append)

    def declared(kind: str | None) -> Any:  # Spark's watermark in the runner's time unit
        return engine_watermark(kind, watermark_ms)

    runner.expect(declared(runner.time_kind))
    runner.add_many(records, declared)  # a DataFrame as it is: typed columns all the way
    rows = runner.advance(declared(runner.time_kind))
    out = [_row_output(spec, r) for r in rows] + [_dead_output(d) for d in dead]
    if runner.idle:
        return out, None, None
    tagged = spec.snapshot(runner)
    blob = tagged[:1] + shard.header() + zlib.compress(tagged[1:], 1)
    _LIVE[(spec, shard)] = (blob, runner)
    while len(_LIVE) > _LIVE_MAX or (len(_LIVE) > 1 and sum(len(b) for b, _ in _LIVE.values()) > _LIVE_BYTES):
        _LIVE.pop(next(iter(_LIVE)))  # the least recently written
    return out, blob, timeout_ms(runner, watermark_ms)


def _runner(spec: RunSpec, state: bytes | None, shard: Shard, dead_letter: Any) -> Runner:
    """The shard's runner: new, the live one of this worker, or restored from the state bytes."""
    if not state:
        return spec.build(dead_letter=dead_letter)
    shard.check(bytes(state[1:_HEADER]))
    live = _LIVE.pop((spec, shard), None)
    if live is not None and live[0] == state:
        runner = live[1]  # this worker wrote these very bytes: its runner, caches and typed columns too
        runner.dead_letter = dead_letter
        return runner
    # Spark hands binary state over as a bytearray
    return spec.restore(bytes(state[:1]) + zlib.decompress(state[_HEADER:]), dead_letter=dead_letter)


def _row_output(spec: RunSpec, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "row",
        "window_start": _seconds(row["window_start"]),
        "window_end": _seconds(row["window_end"]),
        "grp": dumps_row([row[c] for c in spec.group_columns]),
        "payload": dumps_row(row),
    }


def _dead_output(d: DeadLetter) -> dict[str, Any]:
    return {"kind": "dead", "window_start": None, "window_end": None, "grp": d.reason, "payload": dumps(d.to_dict())}


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

