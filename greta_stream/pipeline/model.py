"""The description of a pipeline, free of Spark: its source, its queries
(each with its sinks, dead-letter sink and options, compiled once into a
`RunSpec`), the checkpoint and the run's settings (`PipelineConfig`, read
from a YAML or TOML file through `config_file`'s checks, or built by the
CLI's flags and the service), and the grouping of queries into streams by
the source they read (`streams`). `greta_stream.spark.pipeline` runs it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greta_stream.compiler import LIMITS, Limits
from greta_stream.engine import FieldNames
from greta_stream.errors import ConfigError
from greta_stream.pipeline import config_file
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.runtime.spec import DEFAULT_MAX_FUTURE_S


def default_shards(spark_cores: int | None = None) -> int:
    """A small multiple of the cores: enough shards to keep both tasks of a core busy, few enough calls per batch."""
    return 2 * (spark_cores or os.cpu_count() or 2)


@dataclass
class SourceConfig:
    format: str = "jsonl"  # jsonl | parquet | delta | kafka
    path: str = ""
    max_files_per_trigger: int | None = None
    options: dict[str, str] = field(default_factory=dict)  # reader options (kafka: maxOffsetsPerTrigger, kafka.*)
    # kafka: JSON events in `topic`; servers default to $KAFKA_BOOTSTRAP_SERVERS;
    # where a new query starts (a restarted one resumes from its checkpoint)
    bootstrap_servers: str | None = None
    topic: str | None = None
    starting_offsets: str = "earliest"


@dataclass
class SinkConfig:
    format: str = "jsonl"  # jsonl | parquet | delta | console | kafka
    path: str | None = None
    # kafka: rows as JSON to `topic`; servers default to $KAFKA_BOOTSTRAP_SERVERS;
    # options go to Spark's Kafka writer (kafka.* producer settings) or Delta's writer
    bootstrap_servers: str | None = None
    topic: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    # delta: a table of Spark's catalog instead of a path; its partition columns; whether a
    # batch may add columns to the table (off: a schema change fails the write); COUNT and
    # integer SUM as decimal(38,0) ("decimal") or their exact text ("text")
    table: str | None = None
    partition_by: list[str] = field(default_factory=list)
    merge_schema: bool = False
    counts: str = "decimal"


@dataclass
class QueryConfig:
    name: str
    text: str
    sinks: list[SinkConfig]
    dead_letter: SinkConfig | None = None
    mode: str | None = None  # "aggregate" or "cet" (one row per complete trend); None: cet for RETURN TRENDS
    source: SourceConfig | None = None  # this query's own source (e.g. its Kafka topic); None: the pipeline's
    trends: str = "complete"  # cet mode: "complete" (maximal trends) or "all"
    max_trends: int | None = None  # cet mode: cap per (window, group); the record keeps the exact total
    engine: str = "auto"  # aggregate mode: "auto" (the columnar engine where it covers the query) or "general"
    spec: RunSpec | None = None  # the run, built once by `PipelineConfig` (the pipeline's fields and lateness)
    # cet mode: a window of one partition with more vertices is extracted by a distributed Spark job
    distribute_over: int | None = None

    def run_spec(self, fields: FieldNames, lateness_s: float, max_future_s: float | None = DEFAULT_MAX_FUTURE_S,
                 limits: Limits = LIMITS) -> RunSpec:
        """This query's `RunSpec`: compiled and checked once, where the run begins."""
        try:
            return RunSpec.create(self.text, mode=self.mode, engine=self.engine, fields=fields, trends=self.trends,
                                  max_trends=self.max_trends, distribute_over=self.distribute_over,
                                  lateness_s=lateness_s, max_future_s=max_future_s,
                                  limits=limits).for_streaming()
        except ConfigError as exc:
            raise ConfigError(f"query {self.name!r}: {exc}") from None


@dataclass
class PipelineConfig:
    source: SourceConfig
    queries: list[QueryConfig]
    checkpoint: str
    watermark_delay_s: float = 0.0
    once: bool = False
    trigger_interval_s: float | None = None
    master: str | None = None
    shards: int | None = None
    # The stateful operator of a new checkpoint (None: the default, or the checkpoint's own)
    operator: str | None = None
    fields: FieldNames = FieldNames()
    # Queries that read one source share one Spark stream (one read, one parse, one
    # operator); False gives each query a stream (and a checkpoint folder) of its own.
    shared_streams: bool = True
    # Within a stream, queries of one pattern, predicates and partitioning share their
    # evaluation (runtime/shared.py); False runs each on a runner of its own.
    sharing: bool = True
    # Events further ahead of the watermark are dead-lettered as "future" (None: no bound).
    max_future_s: float | None = DEFAULT_MAX_FUTURE_S
    limits: Limits = LIMITS  # caps on windows per event and panes per window

    def __post_init__(self) -> None:
        for q in self.queries:  # each query compiled and checked once, here
            q.spec = q.run_spec(self.fields, self.watermark_delay_s, self.max_future_s, self.limits)

    @classmethod
    def from_file(cls, path: str | Path, *, engine: str | None = None) -> PipelineConfig:
        """Read a YAML (.yaml/.yml) or TOML (.toml) pipeline config.

        Relative paths in it (query files, source, sinks, checkpoint) are
        relative to the config file's folder. `engine` overrides every
        query's engine.
        """
        import yaml

        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read the pipeline config {p}: {exc.strerror or exc}") from None
        try:
            raw = tomllib.loads(text) if p.suffix == ".toml" else yaml.safe_load(text)
        except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{p} is not valid {'TOML' if p.suffix == '.toml' else 'YAML'}: {exc}") from None
        return cls.from_dict(raw, base=p.parent, engine=engine, origin=str(p))

    @classmethod
    def from_dict(cls, raw: Any, base: Path = Path("."), *, engine: str | None = None,
                  origin: str = "pipeline config") -> PipelineConfig:
        """The pipeline of a config document, checked by `config_file` first:
        unknown keys, bad formats and queries without sinks are `ConfigError`s."""
        doc = config_file.check(raw, origin)
        src = _source(doc.source, base)
        return cls(
            source=src, queries=[_query_config(q, base, engine) for q in doc.queries],
            checkpoint=_resolve(doc.checkpoint, base), watermark_delay_s=doc.watermark_delay_s, once=doc.once,
            trigger_interval_s=doc.trigger_interval_s, master=doc.master, shards=doc.shards, operator=doc.operator,
            fields=FieldNames(doc.fields.type, doc.fields.time, doc.fields.id),
            shared_streams=doc.shared_streams, sharing=doc.sharing,
            max_future_s=doc.max_future_s if "max_future_s" in doc.model_fields_set else DEFAULT_MAX_FUTURE_S,
            limits=Limits(**{k: getattr(doc, k) for k in ("max_windows_per_event", "max_panes_per_window")
                             if getattr(doc, k) is not None}),
        )


def _source(doc: config_file.SourceFile, base: Path) -> SourceConfig:
    src = SourceConfig(**doc.model_dump())
    src.path = _resolve(src.path, base)
    return src


def _sink(doc: config_file.SinkFile, base: Path) -> SinkConfig:
    sink = SinkConfig(**doc.model_dump())
    if sink.path and sink.format in ("jsonl", "parquet", "delta"):
        sink.path = _resolve(sink.path, base)
    return sink


def _query_config(q: config_file.QueryFile, base: Path, engine: str | None) -> QueryConfig:
    if q.text is not None:
        text = q.text
    else:
        path = base / str(q.file)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"query {q.name!r}: cannot read its file {path}: {exc.strerror or exc}") from None
    return QueryConfig(q.name, text, [_sink(s, base) for s in q.sinks],
                       _sink(q.dead_letter, base) if q.dead_letter else None, q.mode,
                       _source(q.source, base) if q.source else None, q.trends, q.max_trends, engine or q.engine,
                       distribute_over=q.distribute_over)


def _resolve(path: str, base: Path) -> str:
    """Relative file paths in a config file are relative to the file's folder."""
    if not path or "://" in path or Path(path).is_absolute():
        return path
    return str(base / path)


@dataclass
class StreamConfig:
    """The queries that read one source: one Spark streaming query, one operator, one checkpoint.

    `name` is stable while the source is (the pipeline's own source is
    "source"; a query's own source is named by a hash of its settings), so
    the stream's checkpoint survives adding and removing queries."""

    name: str
    source: SourceConfig
    queries: list[QueryConfig]
    sharing: bool = True

    def query_set(self) -> QuerySet:
        return QuerySet.of([(q.name, q.spec) for q in self.queries], sharing=self.sharing)  # type: ignore[misc]


def source_key(src: SourceConfig) -> str:
    """A short stable name of a source's settings."""
    text = json.dumps(dataclasses.asdict(src), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def streams(cfg: PipelineConfig) -> list[StreamConfig]:
    """The pipeline's queries grouped by the source they read, in the order they come."""
    out: dict[str, StreamConfig] = {}
    for q in cfg.queries:
        src = q.source if q.source is not None else cfg.source
        if not cfg.shared_streams:
            name = q.name
        else:
            name = "source" if q.source is None else f"source-{source_key(src)}"
        out.setdefault(name, StreamConfig(name, src, [], cfg.sharing)).queries.append(q)
    return list(out.values())


def uses(cfg: PipelineConfig, fmt: str) -> bool:
    """Whether a source or a sink of the pipeline has the format `fmt`."""
    ends = [cfg.source] + [e for q in cfg.queries for e in (q.source, q.dead_letter, *q.sinks) if e is not None]
    return any(e.format == fmt for e in ends)
