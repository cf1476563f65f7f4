"""The only code that touches `applyInPandasWithState`.

`stream_outputs(events, queries)` turns a streaming DataFrame of events (a
JSON string column `value`, or typed columns) into a streaming DataFrame of
outputs of every query of a `QuerySet`, with the columns of
`shard.OUTPUT_COLUMNS`: `query` names the query, `kind` is "row" (a result
row, JSON in `payload`), "dead" (a dead letter) or "state" (the bytes the
query's state takes in shard `window_start`). One operator serves every
query of the stream: events are read, parsed and shuffled once.
`typed.trend_aggregates(events, query, ...)` runs one query on it and types its rows.

Layout (docs/DESIGN.md): events are keyed by a *shard*, a hash of their
shard attributes (GROUP-BY attributes of every query) modulo a small number,
not by partition: per-group calls cost
milliseconds each, so one call per shard handles many partitions with one
binary state blob (the engine snapshot plus a format version). Each shard's
grouping key is chosen so that Spark spreads the shards evenly over its
partitions (`shard.shard_keys`). Rows are final when emitted (a group never
spans shards). Event-time timeouts wake a
shard when the watermark passes the end of its next window.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from greta_stream.runtime import RunSpec
from greta_stream.runtime.multi import QuerySet
from greta_stream.spark.shard import (
    OUTPUT_COLUMNS,
    STATE_VERSION,
    Shard,
    parse_json_records,
    shard_keys,
    step,
    upgrade_state,
)

OUTPUT_SCHEMA = StructType([
    StructField("query", StringType()),
    StructField("kind", StringType()),
    StructField("window_start", DoubleType()),
    StructField("window_end", DoubleType()),
    StructField("grp", StringType()),
    StructField("payload", StringType()),
])
STATE_SCHEMA = StructType([StructField("version", IntegerType()), StructField("engine", BinaryType())])

_TS = "__greta_ts"
SHARD_COLUMN = "__greta_shard"
# The watermark column is event time shifted by a horizon (see trend_aggregates),
# null outside a range that keeps it inside pandas' nanosecond range (1677-2262)
# when Spark hands it to Python, and never overflows Spark's own timestamp math.
_HORIZON_S = 100 * 365 * 86_400  # rows later than this are dropped by Spark itself
_CLAMP_S = (-5_000_000_000, 5_900_000_000)  # about 1811 to 2156


def default_shards(spark_cores: int | None = None) -> int:
    """A small multiple of the cores: enough shards to keep both tasks of a core busy, few enough calls per batch."""
    return 2 * (spark_cores or os.cpu_count() or 2)


SINGLE = "query"  # the name of the one query of `trend_aggregates`


def stream_outputs(events: DataFrame, queries: QuerySet, *, shards: int | None = None) -> DataFrame:
    """Streaming outputs of every query of `queries` over `events`, with one
    stateful operator (see the module docstring)."""
    n = shards or default_shards()
    # Spark runs a task per core, each with some shards: one kernel thread per call keeps
    # the cores from being shared. Without shard attributes every event is in one shard: all cores.
    threads = max(1, (os.cpu_count() or 1) // n) if queries.shard_attrs else None
    queries = QuerySet.of([(name, spec.for_streaming().with_options(kernel_threads=threads))
                           for name, spec in queries], paused=queries.paused, sharing=queries.sharing)
    keyed, json_input = keyed_by_shard(events, queries, shards=n)
    fn = _shard_function(queries, json_input, {k: Shard(s, n) for s, k in enumerate(shard_keys(n))})
    return keyed.groupBy(SHARD_COLUMN).applyInPandasWithState(
        fn, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout
    )


def keyed_by_shard(events: DataFrame, queries: QuerySet | RunSpec, *, shards: int) -> tuple[DataFrame, bool]:
    """`events` with the shard key column (`SHARD_COLUMN`) and the watermark
    the operator groups by (the stream's delay: the smallest lateness of its
    queries); and whether the input is JSON text (`value`)."""
    if isinstance(queries, RunSpec):
        queries = QuerySet.of({SINGLE: queries})
    fields, watermark_delay_s, shard_attrs = queries.fields, queries.lateness_s, queries.shard_attrs
    json_input = "value" in events.columns and isinstance(events.schema["value"].dataType, StringType)
    n = shards

    def column(name: str) -> Column:
        if json_input:
            return F.get_json_object(F.col("value"), f"$.{name}")
        return F.col(f"`{name}`")

    seconds = _event_seconds(events, column(fields.time), json_input, fields.time)
    keys = shard_keys(n)  # Spark puts shard s in partition s mod P (P dividing n)
    if shard_attrs:
        parts = [_normalized(column(g)) for g in shard_attrs]
        index = F.pmod(F.xxhash64(*parts), F.lit(n)).cast("int")
        shard = F.element_at(F.array(*[F.lit(k) for k in keys]), index + 1)
    else:
        shard = F.lit(keys[0])
    # Spark drops rows at or behind the watermark before the operator sees them
    # (event-time timeout only), which would lose late events silently. Shifting
    # the watermark column and its delay by the same horizon leaves the watermark
    # unchanged (max(ts) - delay) but lets every row through: the engine then
    # dead-letters late events itself, with reason "late".
    # A time outside the clamp range (NaN, infinities, 1e18: poison; far-future years) is no
    # watermark time: it would move the watermark past every later event. The engine judges
    # the event itself (a bad_time, or late / future against the watermark).
    in_range = seconds.isNotNull() & ~F.isnan(seconds) & seconds.between(_CLAMP_S[0], _CLAMP_S[1])
    shifted = F.when(in_range, F.timestamp_seconds(seconds + _HORIZON_S))
    delay_ms = int(round(watermark_delay_s * 1000)) + _HORIZON_S * 1000
    keyed = events.withColumn(_TS, shifted).withWatermark(_TS, f"{delay_ms} milliseconds")
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


def _shard_function(queries: QuerySet, json_input: bool, shards: dict[int, Shard]) -> Any:
    drop = [_TS, SHARD_COLUMN]

    def records(pdfs: Iterator[pd.DataFrame]) -> Iterable[Any] | pd.DataFrame:
        if json_input:
            return [rec for pdf in pdfs for rec in parse_json_records(pdf["value"])]
        frames = [pdf.drop(columns=drop) for pdf in pdfs]  # typed columns: handed on as one DataFrame
        if not frames:  # a timeout: no input
            return []
        return pd.concat(frames, ignore_index=True) if len(frames) != 1 else frames[0].reset_index(drop=True)

    def fn(key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        blob = None
        if state.exists:
            version, blob = state.get
            blob = upgrade_state(version, blob, queries)
        shard = shards[int(key[0])]
        out, new_blob, timeout = step(queries, blob, records(pdfs), state.getCurrentWatermarkMs(), shard)
        if new_blob is None:
            if state.exists:
                state.remove()
        else:
            state.update((STATE_VERSION, new_blob))
            if timeout is not None:
                state.setTimeoutTimestamp(timeout)
        yield pd.DataFrame(out, columns=list(OUTPUT_COLUMNS))

    return fn
