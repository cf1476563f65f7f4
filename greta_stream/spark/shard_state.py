"""A shard's state bytes and the runners a worker keeps between micro-batches.

State bytes: the shard's index, the shard count and the digest of its slot's
attributes (all checked on restore: a checkpoint read with another layout would
put partitions in the wrong shard), the shard's clock (`Shard.header`), then the
zlib'd `MultiRunner` snapshot (every query's state under its name). States of an
older `STATE_VERSION` are read with `upgrade_state`. `RunnerCache` holds a
worker's runners by the state they last wrote, so that the next batch of a shard
goes on from them without restoring (`shard.step`, `shard.step_incremental`).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import shutil
import struct
import tempfile
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greta_stream.errors import SnapshotError
from greta_stream.runtime.multi import MultiRunner
from greta_stream.runtime.queryset import QuerySet, run_fingerprint
from greta_stream.spark.layout import MAX_SHARDS, attrs_id

log = logging.getLogger("greta_stream.spark")

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

_HEADER_FORMAT = ">HHQd"  # shard index, shard count, digest of the slot's attributes, clock (s)
HEADER_SIZE = struct.calcsize(_HEADER_FORMAT)
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


class RunnerCache:
    """A worker's cached runners, one per shard of a stream's run (`QuerySet.epoch`), each with the
    state it last wrote (`tag`: its bytes, or its version) and the bytes of state it stands for.
    Taken out while a step runs (a failed step is retried from the state, never from a half-run
    runner), put back after it; bounded by count and by those bytes: past either, the least
    recently written goes. A step with another query set of the same run (a query registered,
    stopped or changed since) takes the runner over to that set (`MultiRunner.reconfigure`): one
    runner per shard however often the set changes, and only what changed is read again."""

    def __init__(self, max_count: int, max_bytes: int, versions: HostVersions | None = None) -> None:
        self.max_count, self.max_bytes, self.versions = max_count, max_bytes, versions
        self.items: dict[tuple[int, Shard], tuple[Any, MultiRunner, int]] = {}

    def take(self, key: tuple[QuerySet, Shard], tag: Any) -> MultiRunner | None:
        """The cached runner of `key` (a query set, a shard) when the state it wrote is `tag` (it is
        taken out either way), maybe of another query set of the run (`taken_over`)."""
        queries, shard = key
        cached = self.items.pop((queries.epoch, shard), None)
        return cached[1] if cached is not None and cached[0] == tag else None

    def put(self, key: tuple[QuerySet, Shard], tag: Any, multi: MultiRunner, size: int) -> None:
        queries, shard = key
        self.items[(queries.epoch, shard)] = (tag, multi, size)
        if self.versions is not None:  # the other workers of this host drop theirs of this shard
            self.versions.wrote((queries.epoch, shard), tag)
            for other, (had, _, _) in list(self.items.items()):
                if other != (queries.epoch, shard) and self.versions.moved_past(other, had):
                    del self.items[other]  # another worker ran its shard since: never taken again
        while len(self.items) > self.max_count or (
                len(self.items) > 1 and sum(n for _, _, n in self.items.values()) > self.max_bytes):
            self.items.pop(next(iter(self.items)))  # the least recently written

    def clear(self) -> None:
        self.items.clear()

    def __iter__(self) -> Iterator[tuple[int, Shard]]:
        return iter(self.items)


class HostVersions:
    """The version each shard's state was last written at, by whichever Python worker of this host
    (of one pyspark daemon: the workers it forks) wrote it: a file of 8 bytes per (run, shard) in a
    directory of the temporary one. Spark hands a shard's task to any idle worker, so with two
    workers each would keep a runner of every shard, half of them behind the state store and never
    taken again, holding their kept events until evicted. A worker that caches a runner drops those
    another worker has gone past (`RunnerCache.put`). Only ever a cost: a worker that reads a
    version of a failed batch drops a runner it could have gone on with, and restores it."""

    def __init__(self, root: Path | None = None) -> None:
        base = root or Path(tempfile.gettempdir()) / f"greta-runner-versions-{os.getuid()}"
        self.dir = base / str(os.getppid())
        self._made = False

    def _path(self, key: tuple[int, Shard]) -> Path:
        epoch, shard = key
        return self.dir / f"{epoch}-{shard.index}-{shard.count}-{attrs_id(shard.attrs):x}"

    def wrote(self, key: tuple[int, Shard], version: int) -> None:
        try:
            if not self._made:
                self.dir.mkdir(parents=True, exist_ok=True)
                self._made = True
                self._clean()
            path = self._path(key)
            tmp = path.with_name(f"{path.name}.{os.getpid()}")
            tmp.write_bytes(struct.pack(">q", version))
            os.replace(tmp, path)
        except OSError:  # no shared directory: each worker keeps what it ran, as without this
            pass

    def _clean(self) -> None:
        """Remove the directories of daemons that are gone (what they wrote is of no use any more)."""
        for d in self.dir.parent.iterdir():
            if d.name.isdigit() and d != self.dir and not _alive(int(d.name)):
                shutil.rmtree(d, ignore_errors=True)

    def moved_past(self, key: tuple[int, Shard], version: Any) -> bool:
        """Whether some worker wrote the shard's state at a version other than `version` since."""
        try:
            return bool(struct.unpack(">q", self._path(key).read_bytes())[0] != version)
        except (OSError, struct.error):
            return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


RUNNER_CACHE_BYTES_ENV = "GRETA_RUNNER_CACHE_BYTES"
_OLD_RUNNER_CACHE_BYTES_ENV = "GRETA_LIVE_BYTES"  # its earlier name, still read


def runner_cache_bytes(default: int) -> int:
    """The bound a worker's runner cache of the incremental operator puts on the state bytes its
    runners stand for: $GRETA_RUNNER_CACHE_BYTES, else $GRETA_LIVE_BYTES (deprecated, same
    meaning: deployments that set it keep their bound), else `default`."""
    if RUNNER_CACHE_BYTES_ENV in os.environ:
        return int(os.environ[RUNNER_CACHE_BYTES_ENV])
    if _OLD_RUNNER_CACHE_BYTES_ENV in os.environ:
        warnings.warn(f"{_OLD_RUNNER_CACHE_BYTES_ENV} is deprecated: use {RUNNER_CACHE_BYTES_ENV} (same meaning)",
                      FutureWarning, stacklevel=2)
        return int(os.environ[_OLD_RUNNER_CACHE_BYTES_ENV])
    return default


def taken_over(multi: MultiRunner, queries: QuerySet) -> MultiRunner | None:
    """A cached runner taken over to `queries` (`MultiRunner.reconfigure`: a query registered, stopped
    or changed since it ran); None when it cannot be (restore from the state it wrote)."""
    if multi.queries == queries:
        return multi
    try:
        multi.reconfigure(queries)
    except Exception:  # noqa: BLE001 - the state it wrote is there: restore from it
        log.warning("a cached runner could not take the new query set; restoring it from the state", exc_info=True)
        return None
    return multi
