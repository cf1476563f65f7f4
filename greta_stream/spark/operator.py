"""The only code that touches Spark's stateful operators: `transformWithStateInPandas`
(the default, `incremental_processor`: a shard's state kept as a value and chunks
that change only where the micro-batch changed them) and `applyInPandasWithState`
(`_shard_function`: a shard's state one binary blob).

`stream_outputs(events, queries)` turns a streaming DataFrame of events (a
JSON string column `value`, or typed columns) into a streaming DataFrame of
outputs of every query of a `QuerySet`, with the columns of
`shard.OUTPUT_COLUMNS`: `query` names the query, `kind` is "row" (a result
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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from greta_stream.engine import DeadLetter
from greta_stream.pipeline.model import default_shards, glob_base
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.control import CONTROL_COLUMN, ControlSets, control_rows, stamped, streaming_slots, unstamped
from greta_stream.spark.layout import INCREMENTAL, WHOLE, StreamLayout, open_layout
from greta_stream.spark.session import quiet_stateful_worker
from greta_stream.spark.shard import (
    FLUSH_TYPE,
    OUTPUT_COLUMNS,
    STATE_VERSION,
    Saved,
    Shard,
    dead_output,
    parse_json_records,
    step,
    step_bounded,
    step_incremental,
    upgrade_state,
)

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
# transformWithStateInPandas: a shard's value state (shard.Saved) and its map state of chunks
SAVED_SCHEMA = StructType([StructField("version", LongType()), StructField("blob", BinaryType())])
CHUNK_KEY_SCHEMA = StructType([StructField("key", StringType())])
CHUNK_SCHEMA = StructType([StructField("data", BinaryType())])

_TS = "__greta_ts"
FILE_COLUMN = "__greta_file"  # a file source's row: the file it was read from (`confined`)
_SECONDS = "__greta_s"  # the event time the watermark column holds, as double seconds (null: none)
SHARD_COLUMN = "__greta_shard"
_FLUSH = "__greta_flush"  # the row is --flush-at-end's event: every shard gets it
_BAD_UTF8 = "__greta_bad_utf8"  # JSON text that was not valid UTF-8 (repaired in `value`, dead-lettered)
# The watermark column is event time shifted by a horizon (see keyed_by_shard),
# null outside a range that keeps it inside pandas' nanosecond range (1677-2262)
# when Spark hands it to Python, and never overflows Spark's own timestamp math.
_HORIZON_S = 100 * 365 * 86_400  # rows later than this are dropped by Spark itself
_CLAMP_S = (-5_000_000_000, 5_900_000_000)  # about 1811 to 2156


SINGLE = "query"  # the name of the one query of `trend_aggregates`


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
        events = events.unionByName(rows, allowMissingColumns=True)
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
        records, _, _, _ = _batch(frame, json_input, _DROP, (queries.fields.time, *shard.attrs))
        return pd.DataFrame(step_bounded(queries, records, shard), columns=list(OUTPUT_COLUMNS))

    return keyed.groupBy(SHARD_COLUMN).applyInPandas(fn, OUTPUT_SCHEMA)


def keyed_by_shard(events: DataFrame, queries: QuerySet | RunSpec, layout: StreamLayout | None = None, *,
                   shards: int | None = None) -> tuple[DataFrame, bool]:
    """`events`, once per slot that some query of `queries` runs in, with its
    shard key (`SHARD_COLUMN`), the watermark column the operator groups by
    (the latest event time: each query subtracts its own lateness) and the
    flush flag; and whether the input is JSON text (`value`)."""
    if isinstance(queries, RunSpec):
        queries = QuerySet.of({SINGLE: queries})
    layout = layout or open_layout(None, queries, shards, default_shards())
    fields = queries.fields
    json_input = "value" in events.columns and isinstance(events.schema["value"].dataType, StringType)
    if json_input:
        # Text that is not valid UTF-8 would fail the hand-over to Python: repaired here, dead-lettered there
        events = events.withColumn(_BAD_UTF8, ~F.is_valid_utf8("value")).withColumn("value", F.make_valid_utf8("value"))

    def column(name: str) -> Column:
        if json_input:
            return F.get_json_object(F.col("value"), f"$.{name}")
        return F.col(f"`{name}`")

    seconds = _event_seconds(events, column(fields.time), json_input, fields.time)
    n = layout.shards
    slot_keys = []
    for slot in layout.members(queries):
        keys = layout.keys(slot)  # Spark puts shard s in partition s mod P (P dividing n)
        attrs = layout.slots[slot]
        if attrs:
            index = F.pmod(F.xxhash64(*[_normalized(column(g)) for g in attrs]), F.lit(n)).cast("int")
            slot_keys.append(F.element_at(F.array(*[F.lit(k) for k in keys]), index + 1))
        else:
            slot_keys.append(F.lit(keys[0]))
    every = [F.lit(k) for slot in layout.members(queries) for k in layout.keys(slot)]
    # a holding stream (`QuerySet.holding`): no query runs, no event goes on; typed as the keys are
    # (int, never null), as the state store's key schema was written by the stream's earlier runs
    none = F.filter(F.array(F.lit(layout.keys(0)[0])), lambda k: F.lit(False))
    routed = F.when(F.col(_FLUSH), F.array(*every) if every else none)
    if CONTROL_COLUMN in events.columns:  # a query-set change: to every shard of every slot
        routed = routed.when(F.col(CONTROL_COLUMN).isNotNull(),
                             F.array(*[F.lit(k) for slot in range(len(layout.slots)) for k in layout.keys(slot)]))
    shard = F.explode(routed.otherwise(F.array(*slot_keys) if slot_keys else none))
    # Spark drops rows at or behind the watermark before the operator sees them
    # (event-time timeout only), which would lose late events silently. Shifting
    # the watermark column and its delay by the same horizon leaves the watermark
    # at the latest event time but lets every row through: the engine then
    # dead-letters late events itself, with reason "late", against each query's
    # own lateness (so queries joining or leaving never move another's watermark).
    # A time outside the clamp range (NaN, infinities, 1e18: poison; far-future years) is no
    # watermark time: it would move the watermark past every later event; nor is one more
    # than max_future_s ahead of the wall clock (the batch's timestamp). The engine judges
    # the event itself (a bad_time, or late / future against the watermark).
    # --flush-at-end's event moves the watermark to the end of input, however far ahead it is.
    events = events.withColumn(_FLUSH, F.coalesce(column(fields.type) == F.lit(FLUSH_TYPE), F.lit(False)))
    in_range = seconds.isNotNull() & ~F.isnan(seconds) & seconds.between(_CLAMP_S[0], _CLAMP_S[1])
    if queries.max_future_s is not None:
        ahead = F.unix_micros(F.current_timestamp()) / 1e6 + F.lit(queries.max_future_s)
        in_range &= (seconds <= ahead) | F.col(_FLUSH)
    events = events.withColumn(_SECONDS, F.when(in_range, seconds))
    keyed = events.withColumn(_TS, F.timestamp_seconds(F.col(_SECONDS) + _HORIZON_S))
    keyed = keyed.withWatermark(_TS, f"{_HORIZON_S * 1000} milliseconds")
    return keyed.withColumn(SHARD_COLUMN, shard), json_input


def _event_seconds(events: DataFrame, col: Column, json_input: bool, time_field: str) -> Column:
    """Event time as double seconds since the epoch: numbers or ISO-8601 text; null when neither."""
    def from_text(c: Column) -> Column:
        return F.coalesce(c.try_cast("double"), F.unix_micros(F.try_to_timestamp(c)) / 1e6)

    if json_input:
        return from_text(col)
    dtype = events.schema[time_field].dataType
    if isinstance(dtype, TimestampType):
        return F.unix_micros(col) / 1e6
    if isinstance(dtype, NumericType):
        return col.cast("double")
    return from_text(col.cast("string"))


def _normalized(col: Column) -> Column:
    """Group values as text, numbers in one spelling (1 and 1.0 shard alike)."""
    text = col.cast("string")
    return F.coalesce(text.try_cast("double").cast("string"), text)


_DROP = [_TS, _SECONDS, SHARD_COLUMN, _FLUSH, FILE_COLUMN, CONTROL_COLUMN]
Live = tuple[ControlSets, int]  # a stream's query sets by version and the version it started with


def _at(layout: StreamLayout, slots: dict[int, QuerySet], key: Any) -> tuple[QuerySet, Shard] | None:
    """The queries and the shard of a grouping key; None for a slot none of the running queries needs
    now (its state waits as it is)."""
    at = layout.locate(int(key))
    queries = slots.get(at[0]) if at is not None else None
    if queries is None:
        return None
    return queries, Shard(at[1], layout.shards, layout.slots[at[0]])  # type: ignore[index]


def _joined_frames(pdfs: Iterator[pd.DataFrame]) -> pd.DataFrame | None:
    frames = list(pdfs)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True) if frames else None


def _named(frame: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame | None:
    """`frame` with the input's column names: pyspark (4.1 on) rebuilds the rows it hands
    transformWithStateInPandas with `DataFrame.itertuples`, which renames every column that
    starts with an underscore (all of the operator's own) to `_<position>`."""
    if frame is not None and len(frame.columns) == len(columns) and list(frame.columns) != columns:
        frame.columns = columns
    return frame


def incremental_processor(layout: StreamLayout, slots: dict[int, QuerySet], json_input: bool,
                          columns: list[str], confine: str | None = None, live: Live | None = None) -> Any:
    """The `transformWithStateInPandas` processor of a stream: per shard a small
    value state (`shard.Saved`: the version, the stream state with its kept
    events named by chunk key, the chunks' sizes) and a map state of chunks
    (key -> bytes), each written once and removed when its windows are
    reported (`shard.step_incremental`); an event-time timer wakes the shard
    for its next window."""
    from pyspark.sql.streaming import StatefulProcessor

    class ShardProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.handle = handle
            self.saved = handle.getValueState("saved", SAVED_SCHEMA)
            self.chunks = handle.getMapState("chunks", CHUNK_KEY_SCHEMA, CHUNK_SCHEMA)

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            yield self._step(key, _named(_joined_frames(rows), columns), timerValues.getCurrentWatermarkInMs())

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
            yield self._step(key, None, timerValues.getCurrentWatermarkInMs(), expiredTimerInfo.getExpiryTimeInMs())

        def _step(self, key: Any, frame: pd.DataFrame | None, watermark_ms: int, fired: int | None = None
                  ) -> pd.DataFrame:
            version, raw = self.saved.get() if self.saved.exists() else (0, None)
            turn = _turn(live, layout, slots, key[0], frame, raw)
            saved = Saved(int(version), turn.blob) if turn.blob is not None else None
            if turn.where is None:
                if turn.moved:
                    self.saved.update((int(version), stamped(turn.blob, turn.now)))
                return pd.DataFrame(_moved(turn), columns=list(OUTPUT_COLUMNS))
            queries, shard = turn.where
            records, times_s, flush, outside = _batch(turn.frame, json_input, _DROP,
                                                      (queries.fields.time, *shard.attrs), confine)
            out, new, written, removed, timer = step_incremental(
                queries, saved, self, records, max(int(watermark_ms), 0), shard, times_s=times_s, flush=flush)
            out += _outside_outputs(queries, outside)
            for k, data in written.items():
                self.chunks.updateValue((k,), (data,))
            for k in removed:
                self.chunks.removeKey((k,))
            kept = _kept(live, turn.now, new.blob if new is not None else None)
            if kept is None:
                self.saved.clear()
            else:
                self.saved.update((new.version if new is not None else 0, kept))
            # the timer that fired (`fired`) is pyspark's to delete once handleExpiredTimer returns: deleting
            # it here as well made Spark warn "Failed to delete timer ... since it does not exist"
            for t in list(self.handle.listTimers()):
                if t != fired:
                    self.handle.deleteTimer(t)
            if timer is not None and new is not None:
                self.handle.registerTimer(timer)
            return pd.DataFrame(out + _moved(turn), columns=list(OUTPUT_COLUMNS))

        def keys(self) -> Iterable[str]:  # the shard's chunks (shard.ChunkMap)
            return [k[0] for k in self.chunks.keys()]  # noqa: SIM118 - a MapState, not a dict

        def items(self) -> Iterable[tuple[str, bytes]]:
            return [(k[0], bytes(v[0])) for k, v in self.chunks.iterator()]

        def close(self) -> None:
            pass

        def __reduce__(self) -> tuple[Any, ...]:  # nothing to carry: the processor's state comes with init()
            return _unpickled_processor, (type(self),)

    return ShardProcessor()


def _unpickled_processor(cls: type) -> Any:
    """The stream's processor where pyspark unpickles it: first in its driver-side worker at the
    stream's start, whose debugging lines it quiets from there on (`session.quiet_stateful_worker`)."""
    quiet_stateful_worker()
    return cls()


def _shard_function(layout: StreamLayout, slots: dict[int, QuerySet], json_input: bool,
                    confine: str | None = None, live: Live | None = None) -> Any:
    """The `applyInPandasWithState` function of a stream: per shard one binary
    value, the whole stream state, rewritten every micro-batch (`shard.step`)."""
    empty = pd.DataFrame([], columns=list(OUTPUT_COLUMNS))

    def fn(key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        version, raw = state.get if state.exists else (STATE_VERSION, None)
        turn = _turn(live, layout, slots, key[0], _joined_frames(pdfs), raw)
        if turn.where is None:
            if turn.moved:
                state.update((version, stamped(turn.blob, turn.now)))
            yield pd.DataFrame(_moved(turn), columns=list(OUTPUT_COLUMNS)) if turn.moved else empty
            return
        queries, shard = turn.where
        blob = upgrade_state(version, turn.blob, queries, shard) if turn.blob is not None else None
        records, times_s, flush, outside = _batch(turn.frame, json_input, _DROP, (queries.fields.time, *shard.attrs),
                                                  confine)
        out, new_blob, timeout = step(queries, blob, records, state.getCurrentWatermarkMs(), shard,
                                      times_s=times_s, flush=flush)
        out += _outside_outputs(queries, outside)
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


def _batch(frame: pd.DataFrame | None, json_input: bool, drop: list[str],
           keyed_by: tuple[str, ...], confine: str | None = None) -> tuple[Any, np.ndarray, bool, list[DeadLetter]]:
    """A shard's records of one micro-batch (dicts from JSON text, or typed columns as one
    DataFrame), their event times as the watermark column reads them, whether
    --flush-at-end's event is among them, and the `outside_source` dead letters of typed
    rows (`_confined`: a typed frame holds no dead letter; JSON records carry theirs in
    place). JSON objects that give one of the fields Spark read (`keyed_by`: time, shard
    attributes) twice are dead letters."""
    if frame is None or frame.empty:  # a timeout: no input
        return [], np.empty(0), False, []
    times_s = frame[_SECONDS].to_numpy(dtype=float, na_value=np.nan)
    flush = bool(frame[_FLUSH].any())
    keep, outside = (None, {}) if confine is None or FILE_COLUMN not in frame.columns else \
        _confined(frame[FILE_COLUMN], confine)
    if not json_input:
        if keep is not None and not keep.all():  # typed rows: those from files out of the folder go as dead letters
            frame, times_s = frame[keep], times_s[keep]
        frame = frame.drop(columns=[c for c in drop if c in frame.columns]).reset_index(drop=True)
        return frame, times_s, flush, list(outside.values())
    records = parse_json_records(frame["value"], keyed_by)
    bad = frame[_BAD_UTF8].to_numpy(dtype=bool, na_value=False)
    if bad.any():
        for i in np.flatnonzero(bad):
            records[i] = DeadLetter("malformed", frame["value"].iat[i], "the line is not valid UTF-8 text")
    for at, dead in outside.items():  # JSON records carry their dead letter in place
        records[at] = dead
    if keep is not None:
        keep[np.fromiter(outside, dtype=np.intp, count=len(outside))] = True
        if not keep.all():
            records = [r for r, k in zip(records, keep, strict=True) if k]
            times_s = times_s[keep]
    return records, times_s, flush, []


def _confined(files: pd.Series, confine: str) -> tuple[np.ndarray, dict[int, DeadLetter]]:
    """For the rows of a file source confined to `confine` (`_judged`): which to keep (False: read from a
    file out of the folder, or once more through a link to a folder inside it) and, by row position, the
    `outside_source` dead letter of each row of a file out of the folder (its content unread)."""
    codes, uris = pd.factorize(files)  # a few files per batch: each judged once
    keep = np.ones(len(files), dtype=bool)
    outside: dict[int, DeadLetter] = {}
    for code, uri in enumerate(uris):
        judged = _judged(str(uri), confine)
        if judged is None:
            continue
        at = np.flatnonzero(codes == code)
        keep[at] = False
        if judged[0] == "outside":
            dead = DeadLetter("outside_source", judged[1], f"{Path(judged[1]).name} is a link to a file outside "
                              f"the source folder {confine}: not read")
            outside.update((int(i), dead) for i in at)
    return keep, outside


def _outside_outputs(queries: QuerySet, dead: list[DeadLetter]) -> list[dict[str, Any]]:
    """The `outside_source` dead letters of a shard's typed rows, for each of its queries (as the runner
    gives each query a JSON record's dead letter)."""
    return [dead_output(name, d) for d in dead for name, _ in queries.specs]


@lru_cache(maxsize=4096)
def _judged(uri: str, confine: str) -> tuple[str, str] | None:
    """What to make of the file at `uri` (a file source's) for a source confined to `confine` (a
    folder, or a glob: the folder before its first wildcard, `glob_base`): None to read it;
    ("outside", its path) when, links followed, it is outside the folder; ("again", its path) when
    Spark reached it through a link to a folder inside the folder (a loop, or a second way to a
    folder that recursive listing reads anyway): it is read where it is, and only there. Paths
    that are not local (an object store's) have no links to follow."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    path = Path(unquote(parsed.path))
    base = glob_base(Path(confine)).absolute()  # as Spark qualifies a relative path: links kept
    try:
        inside = path.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError):  # a link loop on the way: nowhere to read it from
        inside = False
    if not inside:
        return "outside", str(path)
    if path.is_relative_to(base):  # the folders between the source folder and the file, as Spark listed them
        folder = base
        for part in path.relative_to(base).parts[:-1]:
            folder = folder / part
            if folder.is_symlink():
                return "again", str(path)
    return None
