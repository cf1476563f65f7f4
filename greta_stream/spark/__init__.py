"""Spark Structured Streaming adapter: the only package that imports pyspark.

`operator.trend_aggregates` wires the engine into `applyInPandasWithState`;
`shard.step` is the per-shard, per-micro-batch function (testable without a
JVM); `pipeline` runs whole jobs (sources, queries, sinks, checkpoints);
`session` builds a SparkSession with the settings that matter.
"""
