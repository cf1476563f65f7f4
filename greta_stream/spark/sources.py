"""The sources of a pipeline's streams: a streaming DataFrame of a source's events (`read_source`), the
folder a file source's rows must come from (`confined`), and the ties Spark's file source cannot order
(`tied_files`). Part of `greta_stream.spark.pipeline`, which names them too."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from greta_stream.errors import ConfigError
from greta_stream.pipeline.model import SourceConfig
from greta_stream.spark.delta import read_delta
from greta_stream.spark.kafka import read_kafka
from greta_stream.spark.operator import FILE_COLUMN

log = logging.getLogger("greta_stream.pipeline")


def read_source(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """A streaming DataFrame of events: JSON text in `value`, or typed columns."""
    if src.format == "kafka":
        return read_kafka(spark, src.bootstrap_servers, src.topic, src.starting_offsets, src.options)
    if src.format == "delta":
        return read_delta(spark, src)
    reader = spark.readStream
    if src.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", src.max_files_per_trigger)
        tied = tied_files(src.path)
        if tied:
            log.warning("%d files in %s share their modification time with another: Spark may read them in any "
                        "order over several micro-batches, and the events of a file read after a later one may be "
                        "late. Touch them one by one in the order of their events, or leave max_files_per_trigger "
                        "unset (docs/SECURITY.md, file sources)", tied, src.path)
    for k, v in src.options.items():
        reader = reader.option(k, v)
    if src.format == "jsonl":  # each line with the file it came from: a link out of the folder is not read
        return reader.format("text").load(src.path).select("value", F.col("_metadata.file_path").alias(FILE_COLUMN))
    if src.format == "parquet":  # each row with its file too
        schema = spark.read.parquet(src.path).schema
        return reader.schema(schema).parquet(src.path).withColumn(FILE_COLUMN, F.col("_metadata.file_path"))
    raise ConfigError(f"unknown source format {src.format!r}; use jsonl, parquet, delta or kafka")


def tied_files(folder: str) -> int:
    """How many files of `folder` share their modification time with another one
    (Spark's file source orders new files by it; ties come in any order)."""
    try:
        stamps = Counter(p.stat().st_mtime_ns for p in Path(folder).iterdir() if p.is_file()
                         and not p.name.startswith((".", "_")))
    except OSError:  # not a local folder (an object store): nothing to say
        return 0
    return sum(n for n in stamps.values() if n > 1)


def confined(src: SourceConfig) -> str | None:
    """The folder a file source's rows must come from (links out of it are not read), or None."""
    return src.path if src.format in ("jsonl", "parquet") and src.path else None
