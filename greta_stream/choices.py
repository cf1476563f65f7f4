"""The closed sets of choices, declared once for every entry point.

The run spec (`runtime.spec`), the pipeline model (`greta_stream.pipeline`),
the command line (`cli_args`' enums are built from these) and the service's
requests all take their choices from here, so a choice added here is offered
everywhere. Imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Mode = Literal["aggregate", "cet"]
Engine = Literal["auto", "general", "columnar"]
# A stream cannot promise "columnar": its columnar runner hands over to the
# general engine by itself when some micro-batch needs it.
StreamEngine = Literal["auto", "general"]
Trends = Literal["complete", "all"]
Operator = Literal["transformWithStateInPandas", "applyInPandasWithState"]
SourceFormat = Literal["jsonl", "parquet", "delta", "kafka"]
SinkFormat = Literal["jsonl", "parquet", "delta", "console", "kafka"]
TableFormat = Literal["jsonl", "parquet", "delta"]  # what `run --input` holds and `--output` is written as
Counts = Literal["decimal", "text"]  # COUNT and integer SUM in typed outputs: decimal(38,0) or their exact text
StartingOffsets = Literal["earliest", "latest"]

MODES: tuple[str, ...] = get_args(Mode)
ENGINES: tuple[str, ...] = get_args(Engine)
STREAM_ENGINES: tuple[str, ...] = get_args(StreamEngine)
TRENDS: tuple[str, ...] = get_args(Trends)
OPERATORS: tuple[str, ...] = get_args(Operator)
COUNTS: tuple[str, ...] = get_args(Counts)


@dataclass(frozen=True)
class Format:
    """One format of sources and sinks, as every entry point knows it: whether it lives
    under a `path` (resolved against a config file's folder, guarded by the service), the
    Spark package it needs, the reader and writer options a service request may set
    (lower case; None: not a source, or not a sink, of this format) and the class that
    writes a query's output to it (`module:Class`, a `greta_stream.spark.sinks.Sink`,
    imported when a query writes there). A format is added here and in its module."""

    name: str
    path: bool
    package: str | None = None
    source_options: frozenset[str] | None = None
    sink_options: frozenset[str] | None = None
    writer: str | None = None

    @property
    def is_source(self) -> bool:
        return self.source_options is not None

    @property
    def is_sink(self) -> bool:
        return self.sink_options is not None


_FILE_READER = frozenset({"maxfilespertrigger", "maxbytespertrigger", "maxfileage", "pathglobfilter",
                          "recursivefilelookup"})
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("jsonl", path=True, source_options=_FILE_READER | {"encoding", "linesep"}, sink_options=frozenset(),
           writer="greta_stream.connectors.sinks:JsonlSink"),
    Format("parquet", path=True, source_options=_FILE_READER | {"mergeschema"}, sink_options=frozenset(),
           writer="greta_stream.connectors.sinks:ParquetSink"),
    Format("delta", path=True, package="delta",
           source_options=frozenset({"maxfilespertrigger", "maxbytespertrigger", "startingversion",
                                     "startingtimestamp", "ignoredeletes", "ignorechanges", "skipchangecommits"}),
           sink_options=frozenset({"usermetadata"}), writer="greta_stream.spark.delta:DeltaSink"),
    Format("kafka", path=False, package="kafka",
           source_options=frozenset({"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
                                     "failondataloss", "fetchoffset.numretries", "fetchoffset.retryintervalms",
                                     "kafka.request.timeout.ms", "kafka.default.api.timeout.ms",
                                     "kafka.max.poll.records", "kafka.fetch.max.bytes"}),
           sink_options=frozenset({"kafka.request.timeout.ms", "kafka.delivery.timeout.ms", "kafka.max.block.ms",
                                   "kafka.linger.ms", "kafka.batch.size", "kafka.compression.type", "kafka.acks",
                                   "kafka.default.api.timeout.ms"}),
           writer="greta_stream.spark.kafka:KafkaSink"),
    Format("console", path=False, sink_options=frozenset(), writer="greta_stream.connectors.sinks:ConsoleSink"),
)}
PATH_FORMATS: tuple[str, ...] = tuple(n for n, f in FORMATS.items() if f.path)  # jsonl, parquet, delta
SOURCE_FORMATS: tuple[str, ...] = get_args(SourceFormat)
SINK_FORMATS: tuple[str, ...] = get_args(SinkFormat)
