"""The closed sets of choices, declared once for every entry point.

The run spec (`runtime.spec`), the pipeline model (`greta_stream.pipeline`),
the command line (`cli_args`' enums are built from these) and the service's
requests all take their choices from here, so a choice added here is offered
everywhere. Imports nothing of the package.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
class Package:
    """A Spark package some format needs: its jars, as Maven Central names them, and what a session
    needs besides them (`conf`: Delta's SQL extension and catalog). `coordinates` is a template of
    {scala} (Spark's Scala line), {spark} (the installed pyspark's version), {spark_line} (its
    major.minor) and {version}: the version of the Python distribution the jars must match
    (`follows`, installed with the format's extra; None: they follow pyspark). Fetched into
    `<jvm cache>/spark-<name>/` (`greta_stream.jvm`, `greta_stream.spark.connector`)."""

    name: str
    coordinates: str
    data_source: str  # what spark.read.format(...) names: the proof that its jars are on the classpath
    follows: str | None = None
    conf: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Format:
    """One format of sources and sinks, as every entry point knows it: whether it lives
    under a `path` (resolved against a config file's folder, guarded by the service), the
    Spark package it needs, the reader and writer options a service request may set
    (lower case; None: not a source, or not a sink, of this format) and the table options
    its sinks take (settings of the pipeline model's sink, `TABLE_OPTIONS`). Spark's reader
    and sink class of each format are filled in by `greta_stream.spark.formats`."""

    name: str
    path: bool
    package: Package | None = None
    source_options: frozenset[str] | None = None
    sink_options: frozenset[str] | None = None
    table_options: frozenset[str] = frozenset()

    @property
    def is_source(self) -> bool:
        return self.source_options is not None

    @property
    def is_sink(self) -> bool:
        return self.sink_options is not None


KAFKA = Package("kafka", "org.apache.spark:spark-sql-kafka-0-10_{scala}:{spark}", data_source="kafka")
DELTA = Package("delta", "io.delta:delta-spark_{spark_line}_{scala}:{version}", data_source="delta",
                follows="delta-spark",  # the delta extra; delta-spark_4.2_2.13: built per Spark line
                conf={"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                      "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"})
# Every package, in the order sessions put them on the classpath (and the first one wanted is resolved into)
PACKAGES: tuple[Package, ...] = (KAFKA, DELTA)
# A sink's settings that only a table format takes: a table of Spark's catalog instead of a path, its
# partition columns, whether a batch may add columns, how COUNT and integer SUM are typed
TABLE_OPTIONS = frozenset({"table", "partition_by", "merge_schema", "counts"})
_FILE_READER = frozenset({"maxfilespertrigger", "maxbytespertrigger", "maxfileage", "pathglobfilter",
                          "recursivefilelookup"})
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("jsonl", path=True, source_options=_FILE_READER | {"encoding", "linesep"}, sink_options=frozenset()),
    Format("parquet", path=True, source_options=_FILE_READER | {"mergeschema"}, sink_options=frozenset()),
    Format("delta", path=True, package=DELTA,
           source_options=frozenset({"maxfilespertrigger", "maxbytespertrigger", "startingversion",
                                     "startingtimestamp", "ignoredeletes", "ignorechanges", "skipchangecommits"}),
           sink_options=frozenset({"usermetadata"}), table_options=TABLE_OPTIONS),
    Format("kafka", path=False, package=KAFKA,
           source_options=frozenset({"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
                                     "failondataloss", "fetchoffset.numretries", "fetchoffset.retryintervalms",
                                     "kafka.request.timeout.ms", "kafka.default.api.timeout.ms",
                                     "kafka.max.poll.records", "kafka.fetch.max.bytes"}),
           sink_options=frozenset({"kafka.request.timeout.ms", "kafka.delivery.timeout.ms", "kafka.max.block.ms",
                                   "kafka.linger.ms", "kafka.batch.size", "kafka.compression.type", "kafka.acks",
                                   "kafka.default.api.timeout.ms"})),
    Format("console", path=False, sink_options=frozenset()),
)}
PATH_FORMATS: tuple[str, ...] = tuple(n for n, f in FORMATS.items() if f.path)  # jsonl, parquet, delta
SOURCE_FORMATS: tuple[str, ...] = get_args(SourceFormat)
SINK_FORMATS: tuple[str, ...] = get_args(SinkFormat)


def packages_of(formats: Iterable[str]) -> tuple[Package, ...]:
    """The Spark packages a run of these formats needs: the union of theirs, in `PACKAGES` order."""
    needed = {p for f in formats if (p := FORMATS[f].package) is not None}
    return tuple(p for p in PACKAGES if p in needed)


def table_options_refused(fmt: str, given: Iterable[str], formats: Mapping[str, Format] = FORMATS) -> str:
    """"" when sinks of `fmt` take every table option `given`, else why not: the formats whose sinks
    take them, and what `fmt`'s take."""
    refused = [k for k in given if k not in formats[fmt].table_options]
    if not refused:
        return ""
    takers = [n for n, f in formats.items() if f.table_options.issuperset(refused)]
    takes = ", ".join(sorted(formats[fmt].table_options)) or "no table options"
    return f"{', '.join(refused)} apply to {' and '.join(takers) or 'no'} sinks only: {fmt} sinks take {takes}"
