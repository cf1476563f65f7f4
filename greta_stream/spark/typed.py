"""`trend_aggregates`: one query over a DataFrame, streaming or static, as typed DataFrames.

The operator (`operator.stream_outputs`) emits one row per output with the
row's JSON text, which keeps counts of any size exact through Spark; this
module turns that into what a PySpark user expects: a `rows` DataFrame with a
column per result column, and the skipped events with their reasons in a
second DataFrame, `dead_letters`.

Column types of `rows`:

- `window_start`, `window_end`: timestamps when event times are timestamps
  (a timestamp column, or `time_kind="timestamp"`), else doubles (seconds);
- GROUP-BY columns: the input column's type for typed input, strings for
  JSON text input (`value`);
- `COUNT`: `decimal(38,0)`; `SUM`: `decimal(38,0)` over an integer
  column, double over a floating one or over JSON text; `AVG`: double;
  `MIN`/`MAX`: the attribute's type for typed input, double for JSON text.
  Trend counts grow exponentially: one past 38 digits comes out null, so
  where counts may grow that large ask for `counts="text"`, which gives
  COUNT and SUM as their exact decimal text at any size.

CET mode (`RETURN TRENDS`): `rows` has the bounds, the group, `trend` (the
event ids as strings), `total` (`decimal(38,0)`, or text with
`counts="text"`) and `truncated`.

`rows` and `dead_letters` come from the same operator: each started query
runs it once, so start one of them per input unless both are wanted.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    IntegralType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from greta_stream.choices import COUNTS
from greta_stream.engine import DeadLetter, FieldNames
from greta_stream.query.aggregates import function
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.layout import DEFAULT_OPERATOR, INCREMENTAL, WHOLE
from greta_stream.spark.operator import SINGLE, batch_outputs, default_shards, stream_outputs
from greta_stream.spark.session import ROCKSDB_CONF

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
log = logging.getLogger("greta_stream.spark")


class TrendOutputs(NamedTuple):
    rows: DataFrame
    dead_letters: DataFrame  # reason, detail, event (the record as JSON text)


def trend_aggregates(
    events: DataFrame,
    query: str | RunSpec,
    *,
    lateness_s: float | None = None,
    shards: int | None = None,
    operator: str | None = None,
    fields: FieldNames = FieldNames(),
    mode: str | None = None,
    trends: str = "complete",
    max_trends: int | None = None,
    with_events: bool = False,
    engine: str = "auto",
    time_kind: str | None = None,
    counts: str = "decimal",
    watermark_delay_s: float | None = None,
) -> TrendOutputs:
    """`query` over `events` (JSON text in a `value` column, or typed
    columns): its result rows and its dead letters (module docstring).

    A streaming `events` gives a streaming result: windows are emitted as
    the watermark passes them (a bounded input's last ones when
    `end_of_input` is written to it). A static `events` gives every window,
    as `evaluate` does, computed by shard on the cluster: the way to
    backfill history that does not fit one machine (`operator` and
    `lateness_s` do not apply; lateness has no meaning there).

    `query` is a `RunSpec` or query text with the options of `RunSpec.create`:
    `lateness_s` (allowed lateness, default 0), `fields`, `mode`,
    `trends`, `max_trends`, `with_events`, `engine`, `time_kind`
    (`watermark_delay_s` is the old name of `lateness_s`). `operator` is the
    stateful operator (`transformWithStateInPandas`, the default, or
    `applyInPandasWithState`); a checkpoint keeps the one it started with.
    `counts`: "decimal" (COUNT and integer SUM as `decimal(38,0)`) or
    "text" (their exact decimal text). Spark's settings are checked first
    (`check_session`).
    """
    if counts not in COUNT_TYPES:
        raise ValueError(f"counts must be one of {', '.join(COUNT_TYPES)}, got {counts!r}")
    if watermark_delay_s is not None:
        warnings.warn("watermark_delay_s is deprecated: use lateness_s (same meaning)", FutureWarning, stacklevel=2)
        if lateness_s is not None:
            raise ValueError("watermark_delay_s is the old name of lateness_s: give lateness_s only")
        lateness_s = watermark_delay_s
    if isinstance(query, RunSpec):
        spec = query
        if lateness_s is not None and lateness_s != spec.lateness_s:
            raise ValueError("lateness_s given with a RunSpec: set lateness_s on the spec")
    else:
        spec = RunSpec.create(query, mode=mode, engine=engine, fields=fields, trends=trends, max_trends=max_trends,
                              with_events=with_events, lateness_s=lateness_s or 0.0, time_kind=time_kind)
    n = shards or default_shards()
    if events.isStreaming:
        check_session(events, n, operator or DEFAULT_OPERATOR)
        outputs = stream_outputs(events, QuerySet.of({SINGLE: spec}), shards=n, operator=operator)
    else:  # a static DataFrame (a backfill): every window, computed by shard
        check_session(events, n, WHOLE)
        outputs = batch_outputs(events, QuerySet.of({SINGLE: spec}), shards=n)
    types = column_types(events)
    timestamps = spec.time_kind == "timestamp" or types.get(spec.fields.time) == TimestampType()
    typed = typed_rows(outputs.where(F.col("kind") == "row"), spec, types, timestamps, counts)
    dead = outputs.where(F.col("kind") == "dead").select(
        F.from_json("payload", DEAD_LETTER_SCHEMA).alias("d")).select("d.*")
    return TrendOutputs(typed, dead)


DEAD_LETTER_SCHEMA = DeadLetter.ddl()  # the columns of a dead-letter output, one schema everywhere


def typed_rows(rows: DataFrame, spec: RunSpec, types: dict[str, DataType], timestamps: bool,
               counts: str = "decimal") -> DataFrame:
    """Result rows (`window_start`, `window_end` in seconds and the row's JSON
    `payload`) as typed columns (module docstring): `types` are the input's
    column types ({} for JSON text), `timestamps` makes the bounds timestamps."""
    schema, exact = _payload_schema(spec, types)
    bounds = [_bound(F.col(c), timestamps).alias(c) for c in ("window_start", "window_end")]
    parsed = rows.select(*bounds, F.from_json("payload", schema).alias("r"))
    return parsed.select("window_start", "window_end", *[
        _exact(F.col("r").getField(c), counts).alias(c) if c in exact else F.col("r").getField(c).alias(c)
        for c in schema.names])


def column_types(events: DataFrame) -> dict[str, DataType]:
    """The input's column types by name; {} for JSON text in `value` (every attribute read from text)."""
    if _json_input(events):
        return {}
    return {f.name: f.dataType for f in events.schema.fields}


def exact_columns(spec: RunSpec, types: dict[str, DataType]) -> set[str]:
    """The result columns kept exact (counts, integer sums, a CET record's total)."""
    return _payload_schema(spec, types)[1]


COUNT_TYPES = COUNTS
EXACT = DecimalType(38, 0)


def _exact(text: Column, counts: str) -> Column:
    """A count's or an integer sum's exact text, as `decimal(38,0)` (null past 38 digits) or as it is."""
    return text if counts == "text" else text.try_cast(EXACT)


def _bound(col: Column, timestamps: bool) -> Column:
    return F.timestamp_seconds(col) if timestamps else col


def _json_input(events: DataFrame) -> bool:
    return "value" in events.columns and isinstance(events.schema["value"].dataType, StringType)


def _payload_schema(spec: RunSpec, types: dict[str, DataType]) -> tuple[StructType, set[str]]:
    """The schema `from_json` reads a row's JSON text with (types as in the
    module docstring), and the columns read as exact text (counts, integer sums)."""
    fields = [StructField(g, types.get(g) or StringType()) for g in spec.group_columns]
    if spec.mode == "cet":
        fields += [StructField("trend", ArrayType(StringType())), StructField("total", StringType()),
                   StructField("truncated", BooleanType())]
        return StructType(fields), {"total"}
    query = spec.query
    exact = set()
    for out in query.outputs:
        typing = function(out.func).spark  # query/aggregates.py
        attr = query.fields[out.value_field].attr if out.value_field is not None else None
        source = types.get(attr) if attr is not None else None
        dtype: DataType = DoubleType()
        if typing == "exact" or (typing == "exact_if_integral" and isinstance(source, IntegralType)):
            dtype = StringType()  # the JSON number's text: exact at any size
            exact.add(out.column)
        elif typing == "source" and attr is not None:
            dtype = source or DoubleType()
        fields.append(StructField(out.column, dtype))
    return StructType(fields), exact


def check_session(events: DataFrame, shards: int, operator: str = WHOLE) -> None:
    """Fail with what to set when Spark's Python workers cannot import
    greta_stream; bring the shuffle partitions (Spark's default 200: hundreds
    of tasks per micro-batch) down to the shard count; for the
    transformWithStateInPandas operator, use the RocksDB state store (which it
    needs) where the session has Spark's default, and keep its state server's
    warning at the end of each connection out of Spark's log."""
    spark = events.sparkSession
    context = spark.sparkContext
    python = context.pythonExec or "python3"
    if context.master.startswith("local") and python != sys.executable:  # type: ignore[union-attr]
        probe = subprocess.run([python, "-c", "import greta_stream"], capture_output=True, timeout=60)
        if probe.returncode != 0:
            raise RuntimeError(
                f"Spark's Python workers run {python!r}, which cannot import greta_stream: set "
                f"PYSPARK_PYTHON={sys.executable} before the SparkSession starts (or build the session with "
                f"greta_stream.spark.get_session())")
    if spark.conf.get("spark.sql.shuffle.partitions") == "200" and shards != 200:
        log.info("spark.sql.shuffle.partitions 200 -> %d (the operator's shards)", shards)
        spark.conf.set("spark.sql.shuffle.partitions", str(shards))
    provider = "spark.sql.streaming.stateStore.providerClass"
    if operator == INCREMENTAL and spark.conf.get(provider, None) in (None, HDFS_PROVIDER):
        log.info("%s -> RocksDB (transformWithStateInPandas needs it), with changelog checkpointing", provider)
        for k, v in ROCKSDB_CONF.items():
            spark.conf.set(k, v)
    if operator == INCREMENTAL:
        _quiet_state_server(spark)


# Spark's state server for transformWithStateInPandas warns "No more data to read from the socket"
# whenever a Python worker closes its connection, as pyspark's driver-side worker does at each stream
# start; the server's errors are logged at ERROR
STATE_SERVER_LOG = "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer"


def _quiet_state_server(spark: Any) -> None:
    """That one logger to ERROR where nobody chose its level: no log4j configuration names it or a
    package above it, and the root logs INFO (Spark's default, its console showing WARN and up) or WARN."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    config = log4j.LogManager.getContext(False).getConfiguration().getLoggerConfig(STATE_SERVER_LOG)
    if config.getName() == "" and str(config.getLevel()) in ("INFO", "WARN"):
        log.info("%s -> ERROR (its one warning is the end of each connection)", STATE_SERVER_LOG)
        log4j.core.config.Configurator.setLevel(STATE_SERVER_LOG, log4j.Level.ERROR)
