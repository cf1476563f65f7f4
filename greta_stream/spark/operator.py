"""The only code that touches Spark's stateful operators: `transformWithStateInPandas`
(the default, `incremental_processor`: a shard's state kept as a value and chunks
that change only where the micro-batch changed them) and `applyInPandasWithState`
(`_shard_function`: a shard's state one binary blob).

`stream_outputs(events, queries)` turns a streaming DataFrame of events (a
JSON string column `value`, or typed columns) into a streaming DataFrame of
outputs of every query of a `QuerySet`, with the columns of
`outputs.OUTPUT_COLUMNS`: `query` names the query, `kind` is "row" (a result
row, JSON in `payload`), "dead" (a dead letter, its `reason`), "state" (the
bytes the query's state takes in a shard) or "error". One operator serves every
query of the stream: events are read, parsed and shuffled once.
`typed.trend_aggregates(events, query, ...)` runs one query on it and types its rows.

Layout (docs/DESIGN.md): events are keyed by a *shard*, a hash of their
shard attributes (GROUP-BY attributes of every query) modulo a small number,
not by partition: per-group calls cost
milliseconds each, so one call per shard handles many partitions with one
state (the engine snapshot plus a format version). Each shard's
grouping key is chosen so that Spark spreads the shards evenly over its
partitions (`layout.slot_keys`). Rows are final when emitted (a group never
spans shards). Event-time timeouts wake a
shard when the watermark passes the end of its next window.

Events are keyed by shard on Spark's side in `keying` (`keyed_by_shard`, the
operator's own columns); `records` turns the rows Spark hands a shard into its
records; `shard` runs them. Names of `keying` used elsewhere are importable from here too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from greta_stream.pipeline.model import default_shards
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.control import ControlSets, control_rows, stamped, streaming_slots, unstamped, with_rows
from greta_stream.spark.keying import FILE_COLUMN, OPERATOR_COLUMNS, SHARD_COLUMN, SINGLE, keyed_by_shard
from greta_stream.spark.layout import INCREMENTAL, WHOLE, StreamLayout, open_layout
from greta_stream.spark.processor import CHUNK_KEY_SCHEMA, CHUNK_SCHEMA, SAVED_SCHEMA, ShardProcessor
from greta_stream.spark.records import joined_frames, named_columns, outside_outputs, shard_records
from greta_stream.spark.shard import (
    OUTPUT_COLUMNS,
    STATE_VERSION,
    Saved,
    Shard,
    step,
    step_bounded,
    step_incremental,
    upgrade_state,
)

__all__ = [  # with the names of keying that other modules import from here
    "CHUNK_KEY_SCHEMA", "CHUNK_SCHEMA", "FILE_COLUMN", "OUTPUT_SCHEMA", "SAVED_SCHEMA", "SHARD_COLUMN", "SINGLE",
    "STATE_SCHEMA", "batch_outputs", "default_shards", "incremental_processor", "keyed_by_shard", "stream_outputs",
]

OUTPUT_SCHEMA = StructType([
    StructField("query", StringType()),
    StructField("kind", StringType()),
    StructField("window_start", DoubleType()),
    StructField("window_end", DoubleType()),
    StructField("grp", StringType()),
    StructField("payload", StringType()),
    StructField("reason", StringType()),
])
STATE_SCHEMA = StructType([StructField("version", IntegerType()), StructField("engine", BinaryType())])


def stream_outputs(events: DataFrame, queries: QuerySet, *, shards: int | None = None,
                   layout: StreamLayout | None = None, operator: str | None = None,
                   confine: str | None = None, control: tuple[DataFrame, ControlSets, int] | None = None
                   ) -> DataFrame:
    """Streaming outputs of every query of `queries` over `events`, with one
    stateful operator (see the module docstring). `layout`: where each query's
    state lives and with which operator (`layout.open_layout`, from the
    stream's checkpoint); None: a fresh layout of `shards` shards (default
    `default_shards()`) for `operator` (default `DEFAULT_OPERATOR`). `confine`:
    a file source's folder (or glob); a row read from a file whose real path
    is outside it (a symbolic link out) is a dead letter, its content unread.
    `control`: the stream's control rows, its query sets and the version it
    starts with (`spark.control`: query-set changes without a restart)."""
    layout = layout or open_layout(None, queries, shards, default_shards(), operator)
    # Each shard's kernels may use every core (the spec's kernel_threads, default one per core):
    # Spark runs a task per core, but shards hashed from a few groups are uneven, and the task
    # with the largest shard would otherwise run alone on one core while the other waits.
    # Measured at 1 hour / 1 minute, 2,000 ev/s, 4 shards: 4.54x real time, against 3.93x
    # with one kernel thread per call.
    slots = streaming_slots(layout, queries)
    live = None
    if control is not None:
        rows, sets, first = control
        events = with_rows(events, rows)
        live = (sets, first)
    keyed, json_input = keyed_by_shard(events, queries, layout)
    if layout.operator == INCREMENTAL:
        return keyed.groupBy(SHARD_COLUMN).transformWithStateInPandas(
            statefulProcessor=incremental_processor(layout, slots, json_input, keyed.columns, confine, live),
            outputStructType=OUTPUT_SCHEMA,
            outputMode="Append", timeMode="EventTime")
    fn = _shard_function(layout, slots, json_input, confine, live)
    return keyed.groupBy(SHARD_COLUMN).applyInPandasWithState(
        fn, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout
    )


def batch_outputs(events: DataFrame, queries: QuerySet, *, shards: int | None = None) -> DataFrame:
    """The outputs of every query of `queries` over the static DataFrame
    `events`, with `stream_outputs`' columns: every window, as `evaluate`
    gives them. Events are keyed by shard as a stream's are, and each shard
    is evaluated in one `applyInPandas` call (`shard.step_bounded`): its
    events are held by one task at a time, so the input as a whole need not
    fit one machine."""
    if events.isStreaming:
        raise ValueError("batch_outputs reads a static DataFrame; use stream_outputs for a streaming one")
    layout = open_layout(None, queries, shards, default_shards(), WHOLE)
    slots = layout.members(queries)
    keyed, json_input = keyed_by_shard(events, queries, layout)
    empty = pd.DataFrame([], columns=list(OUTPUT_COLUMNS))

    def fn(key: tuple[Any, ...], frame: pd.DataFrame) -> pd.DataFrame:
        where = _at(layout, slots, key[0])
        if where is None:
            return empty
        queries, shard = where
        records, _, _, _ = shard_records(frame, json_input, OPERATOR_COLUMNS, (queries.fields.time, *shard.attrs))
        return pd.DataFrame(step_bounded(queries, records, shard), columns=list(OUTPUT_COLUMNS))

    return keyed.groupBy(SHARD_COLUMN).applyInPandas(fn, OUTPUT_SCHEMA)


Live = tuple[ControlSets, int]  # a stream's query sets by version and the version it started with


def _at(layout: StreamLayout, slots: dict[int, QuerySet], key: Any) -> tuple[QuerySet, Shard] | None:
    """The queries and the shard of a grouping key; None for a slot none of the running queries needs
    now (its state waits as it is)."""
    at = layout.locate(int(key))
    queries = slots.get(at[0]) if at is not None else None
    if queries is None:
        return None
    return queries, Shard(at[1], layout.shards, layout.slots[at[0]])  # type: ignore[index]


def incremental_processor(layout: StreamLayout, slots: dict[int, QuerySet], json_input: bool,
                          columns: list[str], confine: str | None = None, live: Live | None = None) -> ShardProcessor:
    """The `transformWithStateInPandas` processor of a stream (`processor.ShardProcessor`): per shard a
    small value state (`shard.Saved`: the version, the stream state with its kept events named by chunk
    key, the chunks' sizes) and a map state of chunks (key -> bytes), each written once and removed when
    its windows are reported (`shard.step_incremental`); an event-time timer wakes the shard for its
    next window. The steps below travel inside it, pickled, and load on a shard's first call."""

    class ShardSteps:
        def rows(self, proc: ShardProcessor, key: Any, rows: Iterator[pd.DataFrame], watermark_ms: int
                 ) -> pd.DataFrame:
            return self.step(proc, key, named_columns(joined_frames(rows), columns), watermark_ms)

        def step(self, proc: ShardProcessor, key: Any, frame: pd.DataFrame | None, watermark_ms: int,
                 fired: int | None = None) -> pd.DataFrame:
            version, raw = proc.saved.get() if proc.saved.exists() else (0, None)
            turn = _turn(live, layout, slots, key[0], frame, raw)
            saved = Saved(int(version), turn.blob) if turn.blob is not None else None
            if turn.where is None:
                if turn.moved:
                    proc.saved.update((int(version), stamped(turn.blob, turn.now)))
                return pd.DataFrame(_moved(turn), columns=list(OUTPUT_COLUMNS))
            queries, shard = turn.where
            records, times_s, flush, outside = shard_records(turn.frame, json_input, OPERATOR_COLUMNS,
                                                             (queries.fields.time, *shard.attrs), confine)
            out, new, written, removed, timer = step_incremental(
                queries, saved, proc, records, max(int(watermark_ms), 0), shard, times_s=times_s, flush=flush)
            out += outside_outputs(queries, outside)
            for k, data in written.items():
                proc.chunks.updateValue((k,), (data,))
            for k in removed:
                proc.chunks.removeKey((k,))
            kept = _kept(live, turn.now, new.blob if new is not None else None)
            if kept is None:
                proc.saved.clear()
            else:
                proc.saved.update((new.version if new is not None else 0, kept))
            # the timer that fired (`fired`) is pyspark's to delete once handleExpiredTimer returns: deleting
            # it here as well made Spark warn "Failed to delete timer ... since it does not exist"
            for t in list(proc.handle.listTimers()):
                if t != fired:
                    proc.handle.deleteTimer(t)
            if timer is not None and new is not None:
                proc.handle.registerTimer(timer)
            return pd.DataFrame(out + _moved(turn), columns=list(OUTPUT_COLUMNS))

    return ShardProcessor(cloudpickle.dumps(ShardSteps()))


def _shard_function(layout: StreamLayout, slots: dict[int, QuerySet], json_input: bool,
                    confine: str | None = None, live: Live | None = None) -> Any:
    """The `applyInPandasWithState` function of a stream: per shard one binary
    value, the whole stream state, rewritten every micro-batch (`shard.step`)."""
    empty = pd.DataFrame([], columns=list(OUTPUT_COLUMNS))

    def fn(key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        version, raw = state.get if state.exists else (STATE_VERSION, None)
        turn = _turn(live, layout, slots, key[0], joined_frames(pdfs), raw)
        if turn.where is None:
            if turn.moved:
                state.update((version, stamped(turn.blob, turn.now)))
            yield pd.DataFrame(_moved(turn), columns=list(OUTPUT_COLUMNS)) if turn.moved else empty
            return
        queries, shard = turn.where
        blob = upgrade_state(version, turn.blob, queries, shard) if turn.blob is not None else None
        records, times_s, flush, outside = shard_records(turn.frame, json_input, OPERATOR_COLUMNS,
                                                         (queries.fields.time, *shard.attrs), confine)
        out, new_blob, timeout = step(queries, blob, records, state.getCurrentWatermarkMs(), shard,
                                      times_s=times_s, flush=flush)
        out += outside_outputs(queries, outside)
        kept = _kept(live, turn.now, new_blob)
        if kept is None:
            if state.exists:
                state.remove()
        else:
            state.update((STATE_VERSION, kept))
            if new_blob is not None and timeout is not None:
                state.setTimeoutTimestamp(timeout)
        yield pd.DataFrame(out + _moved(turn), columns=list(OUTPUT_COLUMNS))

    return fn


@dataclass(frozen=True)
class _Turn:
    """What one call of a shard starts from, on either operator: its input without control
    rows, the query-set version it runs (`now`, the newest of the stream's start, its state's
    and its control rows': `spark.control`), its state's blob unstamped, and its queries and
    shard under that version (None: its slot runs none now)."""

    frame: pd.DataFrame | None
    now: int
    moved: bool  # the version moved on from its state's: stamp it even when nothing else is kept
    blob: bytes | None
    where: tuple[QuerySet, Shard] | None


def _turn(live: Live | None, layout: StreamLayout, slots: dict[int, QuerySet], key: Any,
          frame: pd.DataFrame | None, raw: Any) -> _Turn:
    had, blob = unstamped(bytes(raw) if raw is not None else None)  # Spark hands binary state as a bytearray
    if live is None:
        return _Turn(frame, 0, False, blob, _at(layout, slots, key))
    frame, seen = control_rows(frame)
    sets, first = live
    now = max(first, had, seen)
    if now != first:
        now, (_, slots) = sets.read(now)
    return _Turn(frame, now, now != had, blob, _at(layout, slots, key))


def _moved(turn: _Turn) -> list[dict[str, Any]]:
    """A "control" output when the shard took a newer query-set version in this batch: the driver
    then knows every shard runs with it (a control row reaches every shard key) and removes the
    older sets (`ControlSets.prune`)."""
    if not turn.moved:
        return []
    return [{"query": "", "kind": "control", "window_start": None, "window_end": None, "grp": None,
             "payload": str(turn.now), "reason": None}]


def _kept(live: Live | None, now: int, blob: bytes | None) -> bytes | None:
    """What a shard keeps after its call (None: nothing): its new state's blob, stamped with
    the version it ran where query sets ride the stream; the stamp alone when it has nothing
    else to keep and the version is not the stream's start one (it must not fall back)."""
    if live is None or (blob is None and now == live[1]):
        return blob
    return stamped(blob, now)
