"""Spark Structured Streaming adapter: the only package that imports pyspark.

`operator.stream_outputs` runs every query of a stream (a `QuerySet` of
`greta_stream.RunSpec`s) in one stateful operator: `transformWithStateInPandas`
by default, its state kept incrementally (`shard.step_incremental`), or
`applyInPandasWithState`, a shard's state one blob (`shard.step`); both
per-shard, per-micro-batch functions are testable without a JVM.
`typed.trend_aggregates` runs one query as typed DataFrames; `pipeline` runs
whole jobs (sources, queries, sinks, checkpoints), `formats` reads every
source and makes every sink by its format (the Spark side of
`greta_stream.choices.FORMATS`), `sinks` is the family of outputs, `control`
carries query-set changes in the stream itself;
`kafka` and `delta` read and write through Spark's connector and Delta Lake;
`progress` reports every micro-batch to a callback; `session` builds a
SparkSession with the settings that matter.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from greta_stream.lazy import lazy_names

if TYPE_CHECKING:
    from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig, StreamConfig, streams
    from greta_stream.spark.layout import StreamLayout, read_layout
    from greta_stream.spark.operator import batch_outputs, stream_outputs
    from greta_stream.spark.pipeline import BatchWriter, Spool, StreamWriter, confined, read_source, start, start_stream
    from greta_stream.spark.progress import event_rows, on_progress
    from greta_stream.spark.session import forget_session, get_session, jvm_gone
    from greta_stream.spark.shard import end_of_input
    from greta_stream.spark.typed import TrendOutputs, check_session, trend_aggregates

# each name loads its module on first use (`greta_stream.lazy`): pyspark's driver-side worker loads
# `spark.processor` alone (see there), not the operator and the engine beneath it
__getattr__ = lazy_names(__name__, {
    "greta_stream.pipeline": ("PipelineConfig", "QueryConfig", "SinkConfig", "SourceConfig", "StreamConfig", "streams"),
    "greta_stream.spark.layout": ("StreamLayout", "read_layout"),
    "greta_stream.spark.operator": ("batch_outputs", "stream_outputs"),
    "greta_stream.spark.pipeline": ("BatchWriter", "Spool", "StreamWriter", "confined", "read_source", "start", "start_stream"),
    "greta_stream.spark.progress": ("event_rows", "on_progress"),
    "greta_stream.spark.session": ("forget_session", "get_session", "jvm_gone"),
    "greta_stream.spark.shard": ("end_of_input",),
    "greta_stream.spark.typed": ("TrendOutputs", "check_session", "trend_aggregates"),
}, globals())


__all__ = [
    "BatchWriter", "batch_outputs", "PipelineConfig", "QueryConfig", "SinkConfig", "SourceConfig", "StreamConfig", "StreamLayout",
    "StreamWriter", "TrendOutputs", "check_session", "end_of_input", "event_rows", "forget_session", "get_session",
    "jvm_gone", "on_progress",
    "read_layout", "read_source",
    "Spool", "confined", "start", "start_stream",
    "stream_outputs", "streams", "trend_aggregates",
]

# pyspark 4.2 says it does not fully support pandas 3; greta-stream's tests run this very pair
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
