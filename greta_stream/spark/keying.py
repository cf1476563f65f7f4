"""Events keyed by shard for the stateful operator (`keyed_by_shard`), on Spark's side: the shard key of
each slot a row's queries run in, the watermark column (the latest event time, every row let through),
the flush flag; and the names of the columns the operator adds (dropped again before the engine sees
typed rows: `OPERATOR_COLUMNS`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType, StringType, TimestampType

from greta_stream.pipeline.model import default_shards
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.control import CONTROL_COLUMN
from greta_stream.spark.eventtime import FLUSH_TYPE
from greta_stream.spark.layout import StreamLayout, open_layout

TS_COLUMN = "__greta_ts"
FILE_COLUMN = "__greta_file"  # a file source's row: the file it was read from (`confined`)
SECONDS_COLUMN = "__greta_s"  # the event time the watermark column holds, as double seconds (null: none)
SHARD_COLUMN = "__greta_shard"
FLUSH_COLUMN = "__greta_flush"  # the row is --flush-at-end's event: every shard gets it
BAD_UTF8_COLUMN = "__greta_bad_utf8"  # JSON text that was not valid UTF-8 (repaired in `value`, dead-lettered)
# the operator's own columns, dropped from a shard's typed rows (`records.shard_records`)
OPERATOR_COLUMNS = [TS_COLUMN, SECONDS_COLUMN, SHARD_COLUMN, FLUSH_COLUMN, FILE_COLUMN, CONTROL_COLUMN]
# The watermark column is event time shifted by a horizon (see keyed_by_shard),
# null outside a range that keeps it inside pandas' nanosecond range (1677-2262)
# when Spark hands it to Python, and never overflows Spark's own timestamp math.
_HORIZON_S = 100 * 365 * 86_400  # rows later than this are dropped by Spark itself
_CLAMP_S = (-5_000_000_000, 5_900_000_000)  # about 1811 to 2156


SINGLE = "query"  # the name of the one query of `trend_aggregates`


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
        events = events.withColumn(BAD_UTF8_COLUMN, ~F.is_valid_utf8("value")).withColumn("value", F.make_valid_utf8("value"))

    def column(name: str) -> Column:
        if json_input:
            # get_json_object, not json_tuple or from_json: of a key given twice (a dead letter, `hostile`) it
            # reads the first value, where json_tuple reads the last: `"time": 5, ..., "time": 900` would
            # move the watermark to 900 and make the events after it late
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
    routed = F.when(F.col(FLUSH_COLUMN), F.array(*every) if every else none)
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
    events = events.withColumn(FLUSH_COLUMN, F.coalesce(column(fields.type) == F.lit(FLUSH_TYPE), F.lit(False)))
    in_range = seconds.isNotNull() & ~F.isnan(seconds) & seconds.between(_CLAMP_S[0], _CLAMP_S[1])
    if CONTROL_COLUMN in events.columns:  # a control row's time (0 where times are integers: `with_rows`) is none
        in_range &= F.col(CONTROL_COLUMN).isNull()
    if queries.max_future_s is not None:
        in_range &= (seconds <= _wall_bound(queries.max_future_s)) | F.col(FLUSH_COLUMN)
    events = events.withColumn(SECONDS_COLUMN, F.when(in_range, seconds))
    keyed = events.withColumn(TS_COLUMN, F.timestamp_seconds(F.col(SECONDS_COLUMN) + _HORIZON_S))
    keyed = keyed.withWatermark(TS_COLUMN, f"{_HORIZON_S * 1000} milliseconds")
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


def _wall_bound(max_future_s: float) -> Column:
    """The batch's wall clock plus `max_future_s`, in seconds. Spark writes the batch's timestamp (which
    stands for `current_timestamp` in a stream) into the generated code as a number, so the stage's code
    would differ at every micro-batch and be compiled again: 2-3 compilations of 25-30 ms each per batch.
    Under a higher-order function (`transform`), which Spark evaluates without generating code, the
    stage's code holds the expression by reference and is compiled once per run."""
    ahead = F.unix_micros(F.current_timestamp()) / 1e6 + F.lit(max_future_s)
    return F.element_at(F.transform(F.array(F.lit(0)), lambda _: ahead), 1)


def _normalized(col: Column) -> Column:
    """Group values as text, numbers in one spelling (1 and 1.0 shard alike)."""
    text = col.cast("string")
    return F.coalesce(text.try_cast("double").cast("string"), text)

