"""The only code that touches `applyInPandasWithState`.

`trend_aggregates(events, query, watermark_delay_s=...)` turns a streaming
DataFrame of events (a JSON string column `value`, or typed columns) into a
streaming DataFrame of outputs with the columns of `shard.OUTPUT_COLUMNS`:
`kind` is "row" (a result row, JSON in `payload`) or "dead" (a dead letter).

Layout (see SPARK_NOTES.md): events are keyed by a *shard*, a hash of their
GROUP-BY values modulo a small number, not by partition: per-group calls cost
milliseconds each, so one call per shard handles many partitions with one
binary state blob (the engine snapshot plus a format version). Rows are
final when emitted (a group never spans shards). Event-time timeouts wake a
shard when the watermark passes the end of its next window.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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

from greta_stream.compiler.compiled import compile_query
from greta_stream.engine import FieldNames
from greta_stream.errors import SnapshotError
from greta_stream.spark.shard import OUTPUT_COLUMNS, STATE_VERSION, ShardConfig, parse_json_records, step

OUTPUT_SCHEMA = StructType([
    StructField("kind", StringType()),
    StructField("window_start", DoubleType()),
    StructField("window_end", DoubleType()),
    StructField("grp", StringType()),
    StructField("payload", StringType()),
])
STATE_SCHEMA = StructType([StructField("version", IntegerType()), StructField("engine", BinaryType())])

_TS = "__greta_ts"
_SHARD = "__greta_shard"


def default_shards(spark_cores: int | None = None) -> int:
    """A small multiple of the cores (SPARK_NOTES: sharding)."""
    return 2 * (spark_cores or os.cpu_count() or 2)


def trend_aggregates(
    events: DataFrame,
    query: str,
    *,
    watermark_delay_s: float,
    shards: int | None = None,
    fields: FieldNames = FieldNames(),
) -> DataFrame:
    """Streaming outputs (rows and dead letters) of `query` over `events`."""
    cq = compile_query(query)
    json_input = "value" in events.columns and isinstance(events.schema["value"].dataType, StringType)
    n = shards or default_shards()

    def column(name: str) -> Column:
        if json_input:
            return F.get_json_object(F.col("value"), f"$.{name}")
        return F.col(f"`{name}`")

    ts = _event_time(events, column(fields.time), json_input, fields.time)
    if cq.group_by:
        parts = [_normalized(column(g)) for g in cq.group_by]
        shard = F.pmod(F.xxhash64(*parts), F.lit(n)).cast("int")
    else:
        shard = F.lit(0)
    keyed = events.withColumn(_TS, ts).withWatermark(_TS, f"{int(watermark_delay_s * 1000)} milliseconds")
    keyed = keyed.withColumn(_SHARD, shard)
    cfg = ShardConfig(cq.text, fields)
    fn = _shard_function(cfg, json_input)
    return keyed.groupBy(_SHARD).applyInPandasWithState(
        fn, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout
    )


def _event_time(events: DataFrame, col: Column, json_input: bool, time_field: str) -> Column:
    """A timestamp column for Spark's watermark: seconds or ISO-8601 text."""
    if json_input:
        return F.coalesce(F.timestamp_seconds(col.try_cast("double")), F.try_to_timestamp(col))
    dtype = events.schema[time_field].dataType
    if isinstance(dtype, TimestampType):
        return col
    if isinstance(dtype, NumericType):
        return F.timestamp_seconds(col.cast("double"))
    return F.coalesce(F.timestamp_seconds(col.try_cast("double")), F.try_to_timestamp(col.cast("string")))


def _normalized(col: Column) -> Column:
    """Group values as text, numbers in one spelling (1 and 1.0 shard alike)."""
    text = col.cast("string")
    return F.coalesce(text.try_cast("double").cast("string"), text)


def _shard_function(cfg: ShardConfig, json_input: bool) -> Any:
    drop = [_TS, _SHARD]

    def records(pdfs: Iterator[pd.DataFrame]) -> Iterator[Any]:
        for pdf in pdfs:
            if json_input:
                yield from parse_json_records(pdf["value"])
            else:
                for rec in pdf.drop(columns=drop).to_dict("records"):
                    yield {k: v for k, v in rec.items() if not _missing(v)}

    def fn(key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        blob = None
        if state.exists:
            version, blob = state.get
            if version != STATE_VERSION:
                raise SnapshotError(f"state format {version} is not {STATE_VERSION}: start from a new checkpoint")
        out, new_blob, timeout = step(cfg, blob, records(pdfs), state.getCurrentWatermarkMs())
        if new_blob is None:
            if state.exists:
                state.remove()
        else:
            state.update((STATE_VERSION, new_blob))
            if timeout is not None:
                state.setTimeoutTimestamp(timeout)
        yield pd.DataFrame(out, columns=list(OUTPUT_COLUMNS))

    return fn


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or v is pd.NaT
