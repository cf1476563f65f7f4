"""Spark Structured Streaming adapter: the only package that imports pyspark.

`operator.stream_outputs` runs every query of a stream (a `QuerySet` of
`greta_stream.RunSpec`s) in one `applyInPandasWithState` operator
(`typed.trend_aggregates`: one query as typed DataFrames); `shard.step` is the per-shard, per-micro-batch
function (testable without a JVM); `pipeline` runs whole jobs (sources,
queries, sinks, checkpoints); `kafka` reads and writes Kafka through Spark's
connector; `progress` reports every micro-batch to a callback; `session`
builds a SparkSession with the settings that matter.
"""

import warnings

from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig, StreamConfig, streams
from greta_stream.spark.layout import StreamLayout, read_layout
from greta_stream.spark.operator import batch_outputs, stream_outputs
from greta_stream.spark.pipeline import BatchWriter, Spool, StreamWriter, confined, read_source, start, start_stream
from greta_stream.spark.progress import on_progress
from greta_stream.spark.session import get_session
from greta_stream.spark.shard import end_of_input
from greta_stream.spark.typed import TrendOutputs, check_session, trend_aggregates

__all__ = [
    "BatchWriter", "batch_outputs", "PipelineConfig", "QueryConfig", "SinkConfig", "SourceConfig", "StreamConfig", "StreamLayout",
    "StreamWriter", "TrendOutputs", "check_session", "end_of_input", "get_session", "on_progress", "read_layout", "read_source",
    "Spool", "confined", "start", "start_stream",
    "stream_outputs", "streams", "trend_aggregates",
]

# pyspark 4.2 says it does not fully support pandas 3; greta-stream's tests run this very pair
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
