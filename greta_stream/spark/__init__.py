"""Spark Structured Streaming adapter: the only package that imports pyspark.

`operator.trend_aggregates` wires a run (`greta_stream.RunSpec`) into
`applyInPandasWithState`; `shard.step` is the per-shard, per-micro-batch
function (testable without a JVM); `pipeline` runs whole jobs (sources,
queries, sinks, checkpoints); `kafka` reads and writes Kafka through Spark's
connector; `session` builds a SparkSession with the settings that matter.
"""

from greta_stream.spark.operator import trend_aggregates
from greta_stream.spark.pipeline import (
    BatchWriter,
    PipelineConfig,
    QueryConfig,
    SinkConfig,
    SourceConfig,
    read_source,
    start,
    start_query,
)
from greta_stream.spark.session import get_session

__all__ = [
    "BatchWriter", "PipelineConfig", "QueryConfig", "SinkConfig", "SourceConfig", "get_session", "read_source",
    "start", "start_query", "trend_aggregates",
]
