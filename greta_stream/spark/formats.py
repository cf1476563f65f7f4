"""The Spark side of the format registry: how each format of `greta_stream.choices.FORMATS` is read
and written.

`choices.FORMATS` declares every format for every entry point (whether it lives under a path, the
Spark package it needs, the options a request may set, the table options its sinks take) and names
nothing of Spark. This module fills in, per format, the reader of its sources and the class of its
sinks (`IMPLEMENTATIONS`), checked on import against `FORMATS`: every source format has a reader,
every sink format a sink class, and nothing else is filled in. A pipeline's sources are read
(`read_source`) and its sinks made (`make_sink`) from here: nothing else picks them by the format's
name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from greta_stream.choices import FORMATS, Format
from greta_stream.connectors.sinks import ConsoleSink, JsonlSink, ParquetSink
from greta_stream.errors import ConfigError
from greta_stream.pipeline.model import SourceConfig
from greta_stream.spark.delta import DeltaSink, read_delta
from greta_stream.spark.kafka import KafkaSink, read_kafka
from greta_stream.spark.sinks import Sink, SinkClass, SinkPlace
from greta_stream.spark.sources import read_jsonl, read_parquet

# A source's events as a streaming DataFrame: JSON text in `value`, or typed columns
Reader = Callable[[SparkSession, SourceConfig], DataFrame]


@dataclass(frozen=True)
class Implementation:
    """What Spark does with one format: `reader` reads its sources (None: not a source), `writer` is
    the class of its sinks (None: not a sink); `confines`: its reader gives each row the file it came
    from, so a source's rows can be kept to its folder (`confined`)."""

    reader: Reader | None = None
    writer: SinkClass | None = None
    confines: bool = False


def checked(implementations: dict[str, Implementation],
            formats: Mapping[str, Format] = FORMATS) -> dict[str, Implementation]:
    """`implementations` when they fill in `formats` exactly; else a `TypeError` naming the format."""
    for name in formats.keys() | implementations.keys():
        fmt, impl = formats.get(name), implementations.get(name)
        if fmt is None or impl is None:
            raise TypeError(f"format {name!r} is {'not declared in FORMATS' if fmt is None else 'not implemented'}")
        if fmt.is_source != (impl.reader is not None) or fmt.is_sink != (impl.writer is not None):
            raise TypeError(f"format {name!r}: a reader for a source format and a writer for a sink format, "
                            f"no other (source: {fmt.is_source}, sink: {fmt.is_sink})")
    return implementations


IMPLEMENTATIONS: dict[str, Implementation] = checked({
    "jsonl": Implementation(read_jsonl, JsonlSink, confines=True),
    "parquet": Implementation(read_parquet, ParquetSink, confines=True),
    "delta": Implementation(read_delta, DeltaSink),
    "kafka": Implementation(read_kafka, KafkaSink),
    "console": Implementation(writer=ConsoleSink),
})


def read_source(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """A streaming DataFrame of the source's events: JSON text in `value`, or typed columns."""
    impl = IMPLEMENTATIONS.get(src.format)
    if impl is None or impl.reader is None:
        known = [n for n, f in FORMATS.items() if f.is_source]
        raise ConfigError(f"unknown source format {src.format!r}; use {', '.join(known[:-1])} or {known[-1]}")
    return impl.reader(spark, src)


def confined(src: SourceConfig) -> str | None:
    """The folder a file source's rows must come from (links out of it are not read), or None."""
    impl = IMPLEMENTATIONS.get(src.format)
    return src.path if impl is not None and impl.confines and src.path else None


def make_sink(place: SinkPlace) -> Sink:
    """The sink of `place`'s format, made by the class its format registers."""
    impl = IMPLEMENTATIONS.get(place.cfg.format)
    if impl is None or impl.writer is None:
        known = ", ".join(n for n, f in FORMATS.items() if f.is_sink)
        raise ConfigError(f"unknown sink format {place.cfg.format!r}; use {known}")
    return impl.writer.create(place)
