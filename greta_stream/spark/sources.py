"""File sources: a folder of JSON lines (`read_jsonl`) or Parquet files (`read_parquet`) as a streaming
DataFrame of events, each row with the file it came from (a source confined to its folder drops rows
of files outside it), and the ties Spark's file source cannot order (`tied_files`). The format
registry (`greta_stream.spark.formats`) reads the sources of these formats through them."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamReader

from greta_stream.pipeline.model import SourceConfig
from greta_stream.spark.operator import FILE_COLUMN

log = logging.getLogger("greta_stream.pipeline")


def read_jsonl(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """Each line as JSON text in `value`, with the file it came from: a link out of the folder is not read."""
    return (_file_reader(spark, src).format("text").load(src.path)
            .select("value", F.col("_metadata.file_path").alias(FILE_COLUMN)))


def read_parquet(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """Typed columns as the files have them, each row with its file too."""
    reader = _file_reader(spark, src)
    schema = spark.read.parquet(src.path).schema
    return reader.schema(schema).parquet(src.path).withColumn(FILE_COLUMN, F.col("_metadata.file_path"))


def _file_reader(spark: SparkSession, src: SourceConfig) -> DataStreamReader:
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
    return reader


def tied_files(folder: str) -> int:
    """How many files of `folder` share their modification time with another one
    (Spark's file source orders new files by it; ties come in any order)."""
    try:
        stamps = Counter(p.stat().st_mtime_ns for p in Path(folder).iterdir() if p.is_file()
                         and not p.name.startswith((".", "_")))
    except OSError:  # not a local folder (an object store): nothing to say
        return 0
    return sum(n for n in stamps.values() if n > 1)
