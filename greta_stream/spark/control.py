"""Query-set changes that ride the stream: a running stream takes a new query set at its next micro-batch.

A service stream's query set changes all day (queries registered, stopped,
started, patched, deleted). Restarting the Spark stream for each change
interrupts every query of the stream and costs seconds that grow with the
queries already there. Instead, as in Flink's dynamic-rules pattern
(broadcast state), a change is a *control record* in the stream's own input:

1. the driver writes the new query set (its `QuerySet` and the stream's
   `StreamLayout`, pickled) as version N into the checkpoint's
   `control/sets/` folder, then a one-line file `{"version": N}` into
   `control/rows/`, a second file source of the stream, unioned with the
   events (`ControlSets.write`, `LiveSet.change`);
2. Spark reads that line in its next micro-batch and sends it to every shard
   key of every slot, as `--flush-at-end`'s event is;
3. each shard runs that batch, and every later one, with the newest version
   it has seen (the stream's start version, the one its state carries, or a
   control row's: versions only grow), reading the set from `control/sets/`;
   it stamps the version onto its state (`stamped`), kept even when the
   shard has nothing else to keep, so that it never falls back to an older
   set.

Nothing piles up under churn: a shard that takes a newer version says so
(a "control" output), and the driver then removes the sets before it (every
shard runs with it from that batch on, a replay of the batch too), as a
stream's start removes the sets before its own version
(`ControlSets.prune`); Spark deletes a row file once the batch that read it
is committed (`cleanSource`); a worker keeps the last few sets it read.

A `greta-stream run` stream reads control rows too, though its query set
changes only between runs: each start's set (step 1) wakes every shard of
every slot in the first batch, so a restart whose settings close windows
sooner (a lowered lateness) closes them in every shard there, not only in
those its events or the timers of its last run reach.

Control rows are part of a micro-batch's input, so a batch that Spark
replays sees the same changes in the same place: exactly-once holds as for
events. A change that needs events routed where the stream does not send
them (a query in a slot with no running query when the stream started, or a
new slot) is refused (`LiveSet.change` returns None) and the caller restarts
the stream. Checkpoints from before control rows keep restarting: Spark
cannot add a source to a checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import struct
from pathlib import Path
from typing import Any

import pandas as pd

from greta_stream.errors import SnapshotError
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.layout import StreamLayout

CONTROL_COLUMN = "__greta_control"  # a control row's version (null on events)
CONTROL_FOLDER = "control"
_CACHED_VERSIONS = 4  # query sets a worker keeps read, per stream
_MAGIC = b"GRETA-CTL\x00"  # a state stamped with its query-set version
_STAMP = struct.Struct(">q")


class ControlSets:
    """The query sets of one stream by version: `sets/qs-<version>.pkl` (read by the
    shards) and `rows/qs-<version>.jsonl` (the control rows Spark reads)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._cache: dict[int, tuple[StreamLayout, dict[int, QuerySet]]] = {}

    @property
    def rows(self) -> Path:
        return self.folder / "rows"

    @property
    def sets(self) -> Path:
        return self.folder / "sets"

    def _versions(self) -> dict[int, Path]:
        """The sets written, by version."""
        return {int(p.stem[3:]): p for p in self.sets.glob("qs-*.pkl")} if self.sets.is_dir() else {}

    def latest(self) -> int:
        """The newest version written (0: none)."""
        return max(self._versions(), default=0)

    def write(self, version: int, queries: QuerySet, layout: StreamLayout) -> None:
        """Version `version` of the query set: its set first, then its control row (both atomically)."""
        self.sets.mkdir(parents=True, exist_ok=True)
        self.rows.mkdir(parents=True, exist_ok=True)
        _atomic(self.sets / f"qs-{version:010d}.pkl", pickle.dumps((queries, layout), protocol=pickle.HIGHEST_PROTOCOL))
        _atomic(self.rows / f"qs-{version:010d}.jsonl", (json.dumps({"version": version}) + "\n").encode())

    def prune(self, below: int) -> int:
        """Remove the sets of versions before `below` (the version a stream starts with: no shard
        of it reads an older one, `spark.operator._turn`); how many were removed."""
        old = [path for version, path in self._versions().items() if version < below]
        for path in old:
            path.unlink(missing_ok=True)
        return len(old)

    def read(self, version: int) -> tuple[int, tuple[StreamLayout, dict[int, QuerySet]]]:
        """(the version read, its `slots`): `version`'s, or when its set is not there (control files
        deleted or damaged while the service was stopped, a stray control row) the newest one written,
        which is the query set the driver runs now (it writes versions in order, from its registry)."""
        damaged = (OSError, pickle.UnpicklingError, EOFError, ValueError)
        try:
            return version, self.slots(version)
        except damaged:
            newest = self.latest()
            gone = SnapshotError(f"the stream's query set {version} is gone from {self.sets} and no other "
                                 "is there: restart the stream (its queries' registry holds them)")
            if newest == 0 or newest == version:
                raise gone from None
            try:
                return newest, self.slots(newest)
            except damaged:  # the newest one is damaged too
                raise gone from None

    def slots(self, version: int) -> tuple[StreamLayout, dict[int, QuerySet]]:
        """The layout and each slot's queries (as `operator.stream_outputs` runs them) of a version."""
        found = self._cache.get(version)
        if found is None:
            data = (self.sets / f"qs-{version:010d}.pkl").read_bytes()
            queries, layout = pickle.loads(data)  # noqa: S301 - the stream's own checkpoint
            found = self._cache[version] = (layout, streaming_slots(layout, queries))
            for old in sorted(self._cache)[:-_CACHED_VERSIONS]:  # versions only grow: the newest are the ones read
                del self._cache[old]
        return found


def streaming_slots(layout: StreamLayout, queries: QuerySet) -> dict[int, QuerySet]:
    """Each slot's queries as the operator runs them: each spec `for_streaming`."""
    return {slot: QuerySet.of([(name, spec.for_streaming()) for name, spec in qs], paused=qs.paused,
                              sharing=qs.sharing, epoch=qs.epoch)
            for slot, qs in layout.members(queries).items()}


@dataclasses.dataclass
class LiveSet:
    """A running stream's query set, changed without a restart (module docstring)."""

    sets: ControlSets
    checkpoint: Path
    layout: StreamLayout
    queries: QuerySet
    routed: frozenset[int]  # the slots the stream sends events to (fixed when it started)
    version: int

    def change(self, queries: QuerySet) -> int | None:
        """Write `queries` as the next version and return it; None when the change needs
        events routed where this stream does not send them (restart the stream)."""
        queries = dataclasses.replace(queries, epoch=self.queries.epoch)
        layout = self.layout.with_queries(queries)
        if layout.slots != self.layout.slots or any(layout.slot_of(n) not in self.routed for n in queries.names):
            return None
        version = max(self.version, self.sets.latest()) + 1
        self.sets.write(version, queries, layout)
        if layout != self.layout:
            layout.save(self.checkpoint)
        self.layout, self.queries, self.version = layout, queries, version
        return version


def stamped(blob: bytes | None, version: int) -> bytes:
    """A shard's state blob (None: nothing to keep) carrying the query-set version it ran with."""
    return _MAGIC + _STAMP.pack(version) + (blob or b"")


def unstamped(blob: bytes | None) -> tuple[int, bytes | None]:
    """(version, the state blob) of a stamped blob; (0, blob) of one that is not."""
    if blob is None or bytes(blob[:len(_MAGIC)]) != _MAGIC:
        return 0, blob
    (version,) = _STAMP.unpack(bytes(blob[len(_MAGIC):len(_MAGIC) + _STAMP.size]))
    rest = bytes(blob[len(_MAGIC) + _STAMP.size:])
    return version, rest or None


def control_rows(frame: pd.DataFrame | None) -> tuple[pd.DataFrame | None, int]:
    """A shard's input without its control rows, and the newest version among them (0: none)."""
    if frame is None or CONTROL_COLUMN not in frame.columns:
        return frame, 0
    versions = frame[CONTROL_COLUMN]
    mask = versions.notna().to_numpy()
    if not mask.any():
        return frame, 0
    newest = int(versions[mask].max())
    rest = frame[~mask].reset_index(drop=True)
    return (rest if len(rest) else None), newest


def _atomic(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp")  # a hidden name: Spark's file source skips it
    temp.write_bytes(data)
    os.replace(temp, path)


def read_rows(spark: Any, sets: ControlSets) -> Any:
    """The control rows as a stream: one column, the version (`CONTROL_COLUMN`)."""
    from pyspark.sql import functions as F

    sets.rows.mkdir(parents=True, exist_ok=True)
    # a row file is read once: Spark deletes it once its batch is committed (a replayed batch is not)
    return (spark.readStream.format("text").option("cleanSource", "delete").load(str(sets.rows))
            # try_cast: a version that is no whole number in range is a null (no control row), as for
            # `{}`; `cast` fails the whole stream on it under Spark 4's ANSI mode
            .select(F.get_json_object("value", "$.version").try_cast("long").alias(CONTROL_COLUMN)))


def with_rows(events: Any, rows: Any) -> Any:
    """`events` and the control rows (`read_rows`) as one stream. A control row gives the events'
    integral and boolean columns a value, never read (a shard drops it first: `control_rows`):
    with nulls there, pyspark hands every shard whose batch holds a control row those columns as
    floats and objects, so its events' integers would read as 1.0 (a group "1.0" beside "1") and
    lose their digits past 2**53."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, IntegralType

    filled = [F.lit(False if isinstance(f.dataType, BooleanType) else 0).cast(f.dataType).alias(f.name)
              for f in events.schema.fields if isinstance(f.dataType, (IntegralType, BooleanType))]
    return events.unionByName(rows.select("*", *filled), allowMissingColumns=True)
