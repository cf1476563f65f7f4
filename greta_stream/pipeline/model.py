"""The description of a pipeline, free of Spark: one family of models that
every entry point builds.

- `SourceConfig`, `SinkConfig`: where events come from and where rows and
  dead letters go;
- `FieldsConfig`: the names of the type, time and id fields in events;
- `QueryOptions`: what a query sets for its own run (mode, lateness,
  engine, CET options);
- `StreamOptions`: what a stream's operator is run with (shards, operator,
  trigger interval, field names);
- `QueryConfig`: one query, its text, sinks and options, compiled once into
  a `RunSpec` where the run begins;
- `PipelineConfig`: the queries, their source, the checkpoint and the run's
  settings; its `lateness_s` and `fields` are every query's defaults;
- `streams`: the queries grouped by the source they read.

A YAML or TOML file (`PipelineConfig.from_file`) and the command line's
flags (`from_dict`) are validated into these models, every problem a message
with its place (`validation`); the service's request models are these
models with the service's limits (`greta_service.schemas`).
`greta_stream.spark` runs them. Every model refuses unknown keys. A setting
has one name; a renamed one is still read, with a warning
(`validation.RENAMED`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
import warnings
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from greta_stream.choices import (
    FORMATS,
    PATH_FORMATS,
    Counts,
    Mode,
    Operator,
    Package,
    SinkFormat,
    SourceFormat,
    StreamEngine,
    Trends,
    packages_of,
    table_options_refused,
)
from greta_stream.compiler import LIMITS, Limits
from greta_stream.engine import FieldNames
from greta_stream.errors import ConfigError
from greta_stream.pipeline.validation import renamed, validated
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.runtime.spec import DEFAULT_MAX_FUTURE_S, checked_lateness

OptionValue = str | int | float | bool


def default_shards(spark_cores: int | None = None) -> int:
    """A small multiple of the cores: enough shards to keep both tasks of a core busy, few enough calls per batch."""
    return 2 * (spark_cores or os.cpu_count() or 2)


class Model(BaseModel):
    """A strict model: an unknown key is an error, never ignored; frozen once validated (a change is a
    copy: `model_copy(update=...)`). Validation may settle its own fields (`_settle`: relative paths
    resolved, a query file read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def _settle(self, **values: Any) -> None:
        """Set fields while this model is validated (an after-validator), never later."""
        self.__dict__.update(values)


def _lateness(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A `lateness_s` by the setting's one rule (`checked_lateness`, `RunSpec.create`'s too): a number as
    given (once read, a bool is 0 or 1), then as read (a number written as text is read as any other)."""
    read = handler(checked_lateness(value) if isinstance(value, (bool, int, float)) else value)
    return read if read is None else checked_lateness(read)


# What makes a source path a glob: Spark's (SparkHadoopUtil.isGlobPath), less the backslash, which the
# service refuses in paths (`greta_service.guards.check_reach`)
GLOB_CHARS = frozenset("*?[]{}")


def glob_base(path: Path) -> Path:
    """The longest leading folder of `path` with no glob characters (`path` itself when it has none)."""
    for i, part in enumerate(path.parts):
        if GLOB_CHARS.intersection(part):
            return Path(*path.parts[:i])
    return path


def _resolved(path: str, info: ValidationInfo) -> str:
    """Relative file paths in a config file are relative to its folder (the `base` of the validation context)."""
    base = (info.context or {}).get("base")
    if base is None or not path or "://" in path or Path(path).is_absolute():
        return path
    return str(Path(base) / path)


class SourceConfig(Model):
    format: SourceFormat = "jsonl"
    path: str = ""  # file formats and delta: the folder (or glob) to read
    max_files_per_trigger: int | None = Field(None, ge=1)
    options: dict[str, OptionValue] = {}  # reader options (kafka: maxOffsetsPerTrigger, kafka.*)
    # kafka: JSON events in `topic`; servers default to $KAFKA_BOOTSTRAP_SERVERS;
    # where a new query starts (a restarted one resumes from its checkpoint)
    bootstrap_servers: str | None = None
    topic: str | None = None
    starting_offsets: str = "earliest"

    @field_validator("path", mode="before")
    @classmethod
    def _not_given(cls, path: Any) -> Any:
        return "" if path is None else path  # null: no path given

    @model_validator(mode="after")
    def _where(self, info: ValidationInfo) -> SourceConfig:
        if self.format == "kafka" and not self.topic:
            raise ValueError("a kafka source needs a topic")
        if self.format != "kafka" and not self.path:
            raise ValueError(f"a {self.format} source needs a path")
        self._settle(path=_resolved(self.path, info))
        return self


class SinkConfig(Model):
    format: SinkFormat = "jsonl"
    path: str | None = None
    # kafka: rows as JSON to `topic`; servers default to $KAFKA_BOOTSTRAP_SERVERS;
    # options go to Spark's Kafka writer (kafka.* producer settings) or Delta's writer
    bootstrap_servers: str | None = None
    topic: str | None = None
    options: dict[str, OptionValue] = {}
    # table options (`choices.TABLE_OPTIONS`, taken by the formats that list them: delta): a table
    # of Spark's catalog instead of a path; its partition columns; whether a batch may add columns
    # to the table (off: a schema change fails the write); COUNT and integer SUM as decimal(38,0)
    # ("decimal") or their exact text ("text")
    table: str | None = Field(None, min_length=1)
    partition_by: list[str] = []
    merge_schema: bool = False
    counts: Counts = "decimal"

    @model_validator(mode="after")
    def _where(self, info: ValidationInfo) -> SinkConfig:
        if self.format == "kafka" and not self.topic:
            raise ValueError("a kafka sink needs a topic")
        fmt = FORMATS[self.format]
        if "table" in fmt.table_options and (self.path is None) == (self.table is None):
            raise ValueError(f"a {self.format} sink needs a path or a table (one of them)")
        if fmt.path and not self.path and self.table is None:
            raise ValueError(f"a {self.format} sink needs a path")
        given = [k for k, v in (("table", self.table), ("partition_by", self.partition_by),
                                ("merge_schema", self.merge_schema), ("counts", self.counts != "decimal")) if v]
        refused = table_options_refused(self.format, given)
        if refused:
            raise ValueError(refused)
        if self.path and self.format in PATH_FORMATS:
            self._settle(path=_resolved(self.path, info))
        return self


class FieldsConfig(Model):
    """The names of the type, time and id fields in events."""

    type: str = Field("type", min_length=1)
    time: str = Field("time", min_length=1)
    id: str = Field("id", min_length=1)

    def names(self) -> FieldNames:
        return FieldNames(self.type, self.time, self.id)


class QueryOptions(Model):
    """What a query sets for its own run; every entry point offers each (flags, files, requests, `trend_aggregates`)."""

    lateness_s: float | None = Field(None, description="allowed lateness in seconds (default: the pipeline's, "
                                     "else 0)")
    engine: StreamEngine = Field("auto", description="aggregate mode: auto runs the columnar engine for the queries "
                                 "it covers, general always the general engine")
    trends: Trends = Field("complete", description="CET mode: complete (maximal trends) or all")
    max_trends: int | None = Field(None, ge=1, description="CET mode: cap per (window, group); the record keeps the "
                                   "exact total")
    with_events: bool = Field(False, description="CET mode: each trend's aliases and events as well")
    distribute_over: int | None = Field(None, ge=0, description="CET mode: a window of one partition with more "
                                        "vertices is extracted by a distributed Spark job")
    max_spool_mb: float = Field(256.0, gt=0, description="when its sinks fail, the output kept for them (MB) "
                                "before the stream stops with an error: the batch is replayed, nothing is lost")

    _lateness = field_validator("lateness_s", mode="wrap")(_lateness)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return renamed(data)


class StreamOptions(Model):
    """What a stream's stateful operator runs with: a pipeline's settings, or those of the first query
    that starts a stream of the service. The shard count and the operator are fixed by its checkpoint."""

    shards: int | None = Field(None, ge=1, description="state shards (default 2 x cores)")
    operator: Operator | None = Field(None, description="the stateful operator of a new checkpoint (default "
                                      "transformWithStateInPandas: state written as it changes)")
    trigger_interval_s: float | None = Field(None, gt=0, description="seconds between micro-batches")
    fields: FieldsConfig = FieldsConfig()


class QueryConfig(QueryOptions):
    """One query: its text (or, in a config file, the `file` that holds it), sinks and options."""

    name: str = Field(min_length=1)
    text: str | None = None
    file: str | None = None
    mode: Mode | None = None  # None: cet for RETURN TRENDS, else aggregate
    sinks: list[SinkConfig]  # required (a file that leaves it out is told so); the service may give none
    dead_letter: SinkConfig | None = None
    source: SourceConfig | None = None  # this query's own source (e.g. its Kafka topic); None: the pipeline's
    _spec: RunSpec | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _read_text(self, info: ValidationInfo) -> QueryConfig:
        context = info.context or {}
        if (self.text is None) == (self.file is None):
            raise ValueError("give the query as text or as file (one of them)")
        if self.file is not None:
            path = Path(context.get("base", ".")) / self.file
            try:
                self._settle(text=path.read_text(), file=None)
            except OSError as exc:
                raise ValueError(f"query {self.name!r}: cannot read its file {path}: {exc.strerror or exc}") from None
        if context.get("engine"):
            self._settle(engine=context["engine"])
        return self

    @property
    def spec(self) -> RunSpec | None:
        """The run (its lateness and mode as the run has them), compiled once where the run begins
        (`compiled`, `compiled_as`); None for a query as given."""
        return self._spec

    def compiled_as(self, spec: RunSpec) -> QueryConfig:
        """This query run by `spec`, compiled where the run began (the service's registry): a copy."""
        copy = self.model_copy()
        copy._spec = spec
        return copy

    def compiled(self, fields: FieldNames = FieldNames(), lateness_s: float = 0.0,
                 max_future_s: float | None = DEFAULT_MAX_FUTURE_S, limits: Limits = LIMITS) -> QueryConfig:
        """This query with its `RunSpec` (`spec`): a copy (see `compile`)."""
        return self.compiled_as(self.compile(fields, lateness_s, max_future_s, limits))

    def compile(self, fields: FieldNames = FieldNames(), lateness_s: float = 0.0,
                max_future_s: float | None = DEFAULT_MAX_FUTURE_S, limits: Limits = LIMITS) -> RunSpec:
        """This query's `RunSpec`, checked (a `ConfigError` naming the query); `lateness_s` when the
        query sets none. The query itself is left as it is."""
        lateness = lateness_s if self.lateness_s is None else self.lateness_s
        try:
            return RunSpec.create(
                self.text or "", mode=self.mode, engine=self.engine, fields=fields, trends=self.trends,
                max_trends=self.max_trends, with_events=self.with_events, distribute_over=self.distribute_over,
                lateness_s=lateness, max_future_s=max_future_s, limits=limits).for_streaming()
        except ConfigError as exc:
            raise ConfigError(f"query {self.name!r}: {exc}") from None


def delta_target(sink: SinkConfig) -> str | None:
    """The Delta table a sink writes (its catalog name, or its folder resolved), None for another format."""
    if sink.format != "delta":
        return None
    return f"table {sink.table}" if sink.table else str(Path(str(sink.path)).expanduser().resolve())


def delta_tables_shared(sinks: list[tuple[str, SinkConfig]]) -> str:
    """"" or why some Delta table is the sink of two queries (or of a query's rows and its dead
    letters): their rows would mix in one table with no column saying whose."""
    seen: dict[str, str] = {}
    for name, sink in sinks:
        target = delta_target(sink)
        if target is None:
            continue
        if target in seen:
            return (f"the Delta table {target} is the sink of {seen[target]!r} and of {name!r}: their rows would "
                    "mix in one table, with no column saying whose; give each its own table")
        seen[target] = name
    return ""


class PipelineConfig(StreamOptions):
    """Queries, their source, the checkpoint and the run's settings. Each query is compiled once
    (`compile`) with the pipeline's `fields`, and its `lateness_s` when it sets none (the query
    then carries the pipeline's)."""

    source: SourceConfig
    queries: list[QueryConfig] = Field(min_length=1)
    checkpoint: str = Field(min_length=1)
    lateness_s: float = 0.0
    once: bool = False
    master: str | None = None
    # Queries that read one source share one Spark stream (one read, one parse, one
    # operator); False gives each query a stream (and a checkpoint folder) of its own.
    shared_streams: bool = True
    # Within a stream, queries of one pattern, predicates and partitioning share their
    # evaluation (runtime/plan); False runs each on a runner of its own.
    sharing: bool = True
    # Events further ahead of the watermark are dead-lettered as "future" (None: no bound).
    max_future_s: float | None = Field(DEFAULT_MAX_FUTURE_S, gt=0)
    # caps on windows per event and panes per window (None: the defaults)
    max_windows_per_event: int | None = Field(None, ge=1)
    max_panes_per_window: int | None = Field(None, ge=1)

    _lateness = field_validator("lateness_s", mode="wrap")(_lateness)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return renamed(data)

    @model_validator(mode="after")
    def _checked(self, info: ValidationInfo) -> PipelineConfig:
        names = [q.name for q in self.queries]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"query names must be unique: {', '.join(twice)} more than once")
        for q in self.queries:
            if not q.sinks:
                raise ValueError(f"query {q.name!r} has no sinks: its rows would go nowhere")
        shared = delta_tables_shared([(q.name, s) for q in self.queries
                                      for s in (*q.sinks, *([q.dead_letter] if q.dead_letter else []))])
        if shared:
            raise ValueError(shared)
        self._settle(checkpoint=_resolved(self.checkpoint, info))
        return self

    def compile(self) -> PipelineConfig:
        """This pipeline with each query compiled and checked (a `ConfigError` naming the query): a copy,
        or itself when every query is compiled already. Where a run begins (`from_dict`, the command
        line, `greta_stream.spark.pipeline.start`)."""
        if all(q.spec is not None for q in self.queries):
            return self
        queries = [q if q.spec is not None else q.compiled(self.fields.names(), self.lateness_s, self.max_future_s,
                                                           self.limits)
                   for q in self.queries]
        return self.model_copy(update={"queries": queries})

    @property
    def limits(self) -> Limits:
        given = {k: getattr(self, k) for k in ("max_windows_per_event", "max_panes_per_window")
                 if getattr(self, k) is not None}
        return Limits(**given) if given else LIMITS

    @classmethod
    def from_file(cls, path: str | Path, *, engine: str | None = None) -> PipelineConfig:
        """The compiled pipeline of a YAML (.yaml/.yml) or TOML (.toml) file, or a `ConfigError`.

        Relative paths in it (query files, source, sinks, checkpoint) are
        relative to the file's folder. `engine` overrides every query's.
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
        return cls.from_dict(raw, p.parent, engine=engine, origin=str(p))

    @classmethod
    def from_dict(cls, raw: Any, base: Path = Path("."), *, engine: str | None = None,
                  origin: str = "pipeline config") -> PipelineConfig:
        """The compiled pipeline of a document (paths relative to `base`), or a `ConfigError` listing
        every problem with its place. A renamed setting warns (FutureWarning) with `origin` in the message."""
        if not isinstance(raw, dict):
            raise ConfigError(f"{origin}: expected a mapping of settings, got {type(raw).__name__}")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            cfg = validated(cls, raw, origin, context={"base": base, "engine": engine})
        for w in seen:
            warnings.warn(f"{origin}: {w.message}", w.category, stacklevel=2)
        return cfg.compile()


class StreamConfig(Model):
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

    @property
    def label(self) -> str:
        """How progress lines name the stream: what it reads (a Kafka topic, a folder's or a table's
        name) and its queries (`stock: q1, q2`)."""
        src = self.source
        where = f"topic {src.topic}" if src.format == "kafka" else glob_base(Path(src.path)).name or src.format
        names = [q.name for q in self.queries]
        return f"{where}: {', '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def source_key(src: SourceConfig) -> str:
    """A short stable name of a source's settings."""
    text = json.dumps(src.model_dump(), sort_keys=True, default=str)
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
        out.setdefault(name, StreamConfig(name=name, source=src, queries=[], sharing=cfg.sharing)).queries.append(q)
    return list(out.values())


def packages(cfg: PipelineConfig) -> tuple[Package, ...]:
    """The Spark packages the pipeline's sources and sinks need: the union of their formats' (`choices.FORMATS`)."""
    ends = [cfg.source] + [e for q in cfg.queries for e in (q.source, q.dead_letter, *q.sinks) if e is not None]
    return packages_of(e.format for e in ends)
