"""Request and response bodies of the API, one family per resource.

Every request model is strict: unknown fields and formats are a 422. The
models of a query's source, sinks, field names and options are those of the
pipeline model (`greta_stream.pipeline`), which the command line and config
files build too, with the service's limits added; what they may name
(options, paths, hosts) is checked by `greta_service.guards` and the
registry.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    field_validator,
    model_validator,
)

from greta_service.patch import patch_model
from greta_stream.choices import Counts, Mode, StartingOffsets
from greta_stream.pipeline import FieldsConfig, SinkConfig, SourceConfig, StreamOptions
from greta_stream.pipeline import QueryOptions as PipelineQueryOptions
from greta_stream.pipeline.model import OptionValue
from greta_stream.pipeline.validation import RENAMED, renamed

Status = Literal["starting", "running", "stopped", "failed"]


class ErrorItem(BaseModel):
    msg: str
    line: int | None = Field(None, description="1-based line in the query text (query errors)")
    column: int | None = Field(None, description="1-based column in the query text (query errors)")
    loc: list[str | int] | None = Field(None, description="where in the request (request errors)")


class ErrorResponse(BaseModel):
    detail: str
    errors: list[ErrorItem] = []


class SourceSpec(SourceConfig):
    """Where events come from: a folder of JSON-lines or Parquet files or a Delta table (`path`), or a Kafka `topic`.
    `options` are allow-listed per format (docs/SECURITY.md)."""

    model_config = ConfigDict(json_schema_extra={"example": {"format": "jsonl", "path": "events/"}})

    path: str = Field("", max_length=4096, description="file formats and delta: the folder to read")
    max_files_per_trigger: int | None = Field(None, ge=1, le=1_000_000)
    options: dict[str, OptionValue] = Field({}, max_length=32, description="reader options allowed for the format")
    bootstrap_servers: str | None = Field(None, min_length=1, max_length=1024,
                                          description="kafka: host:port list; loopback or the kafka_hosts setting")
    topic: str | None = Field(None, min_length=1, max_length=249)
    starting_offsets: StartingOffsets = "earliest"  # type: ignore[assignment]


class SinkSpec(SinkConfig):
    """Where result rows (or dead letters) go besides the results store. A Delta sink names its
    folder (`path`): a catalog `table` could be anywhere, so the service does not take one."""

    model_config = ConfigDict(json_schema_extra={"example": {"format": "jsonl", "path": "out/q1"}})

    path: str | None = Field(None, min_length=1, max_length=4096, description="file formats and delta: the folder "
                             "to write (a Delta table's own folder)")
    options: dict[str, OptionValue] = Field({}, max_length=32, description="writer options allowed for the format")
    bootstrap_servers: str | None = Field(None, min_length=1, max_length=1024,
                                          description="kafka: host:port list; loopback or the kafka_hosts setting")
    topic: str | None = Field(None, min_length=1, max_length=249)
    table: None = Field(None, description="not taken by the service: give a delta sink its path")  # type: ignore[assignment]
    partition_by: list[str] = Field([], max_length=8, description="delta: the table's partition columns (result "
                                    "columns: window_start, window_end, GROUP-BY attributes)")
    merge_schema: bool = Field(False, description="delta: a batch may add columns to the table")
    counts: Counts = Field("decimal", description="delta: COUNT and integer SUM as decimal(38,0), or as their "
                           "exact text (counts past 38 digits)")


class FieldNamesSpec(FieldsConfig):
    type: str = Field("type", min_length=1, max_length=128)
    time: str = Field("time", min_length=1, max_length=128)
    id: str = Field("id", min_length=1, max_length=128)


class QueryOptions(PipelineQueryOptions, StreamOptions):
    """A query's own settings (those of every entry point) and those of the stream it starts, under the
    service's limits. A stream's shards and operator are fixed when it first runs."""

    # >= 0 (and finite, and no bool) is the setting's own rule, checked by the pipeline model's validator;
    # the schema says it to clients, `le` is the service's cap
    lateness_s: float | None = Field(None, le=10 * 365 * 86_400, json_schema_extra={"minimum": 0},
                                     description="allowed lateness in seconds (default 0)")
    max_trends: int | None = Field(None, ge=1, description="CET mode: cap per (window, group); default and "
                                   "upper limit: the service's max_cet_trends")
    shards: int | None = Field(None, ge=1, description="state shards of the query's stream when it starts it; at "
                               "most the service's max_shards")
    trigger_interval_s: float | None = Field(None, gt=0, le=86_400, description="seconds between micro-batches")
    fields: FieldNamesSpec = FieldNamesSpec()
    backfill: bool = Field(False, description="read the source from its earliest input on a stream of this query's "
                                              "own; by default a query joins the stream of its source (shared with "
                                              "the other queries of that source) at the stream's current position")

    _deprecated: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _deprecations(cls, data: Any, handler: ModelWrapValidatorHandler[QueryOptions]) -> QueryOptions:
        """The renamed settings the request used, to tell its client (`deprecations`)."""
        model = handler(data)
        if isinstance(data, dict):  # raw input (an instance validated again keeps what it said)
            model._deprecated = [f"{k} is deprecated: use {RENAMED[k]} (same meaning)" for k in RENAMED if k in data]
        return model

    @property
    def deprecations(self) -> list[str]:
        return list(self._deprecated)


class QueryCreate(BaseModel):
    """A query to register and start."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    text: str = Field(..., min_length=1, description="the query (docs/QUERY_LANGUAGE.md); never executed as code")
    mode: Mode | None = Field(None, description="default: cet when the query says RETURN TRENDS, else aggregate")
    source: SourceSpec
    sinks: list[SinkSpec] = Field([], max_length=8)
    dead_letter: SinkSpec | None = None
    options: QueryOptions = QueryOptions()


class QueryUpdate(patch_model(QueryCreate, exclude=("name", "source"))):  # type: ignore[misc]
    """What to change of a registered query, as a JSON Merge Patch (RFC 7396) of its registration:
    what the body names changes and the rest stays; `options`, `options.fields` and `dead_letter` are
    merged key by key; a null resets a key to its default (`"options": {"lateness_s": null}`: lateness
    0; `"dead_letter": null`: no dead letters); `sinks`, a list, is replaced whole. A new text without
    a mode takes the mode it implies (cet for RETURN TRENDS), unless the query's mode was chosen
    against its old text's. A new text, mode or result-changing option (fields, trends, max_trends)
    makes it a new query under the same id and name: its state and stored results start afresh at the
    stream's position. New sinks or lateness keep both. What the query's stream fixed when it first
    ran cannot change: backfill, and the shards and operator of a stream it shares."""

    @field_validator("options", mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return renamed(data)  # a deprecated option name, under its current one

    @property
    def patch(self) -> dict[str, Any]:
        """The body as given: the members it names, its nulls included."""
        return self.model_dump(exclude_unset=True)


class QueryValidate(BaseModel):
    """A query text to compile, or a whole registration body (that of `POST /queries`) to check
    as a registration would be checked, without registering it."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., min_length=1)
    mode: Mode | None = None
    name: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    source: SourceSpec | None = Field(None, description="given: the whole body is checked as a registration")
    sinks: list[SinkSpec] = Field([], max_length=8)
    dead_letter: SinkSpec | None = None
    options: QueryOptions = QueryOptions()


class ValidateResponse(BaseModel):
    valid: bool
    mode: Mode
    explain: str
    columns: list[str]
    warnings: list[str] = Field([], description="settings the body gives under a deprecated name")


class QueryCreated(BaseModel):
    id: str
    name: str
    mode: Mode
    status: Status
    explain: str
    columns: list[str]
    warnings: list[str] = Field([], description="settings the request gave under a deprecated name (the "
                                "`Deprecation` header is set too)")


class Progress(BaseModel):
    batches: int = Field(0, description="this query's micro-batches written to the results store, over all runs")
    last_batch_id: int | None = None
    input_rows_per_s: float | None = None
    processed_rows_per_s: float | None = None
    input_rows: int = Field(0, description="events read by the stream since this service started, over its restarts")
    stream_batches: int = Field(0, description="micro-batches its stream ran since this service started it, "
                                "those with no input included")
    batch_durations_ms: list[int] = Field([], description="the stream's last micro-batches (up to 20 of "
                                          "stream_batches), oldest first")
    watermark_s: float | None = Field(None, description="the query's watermark: the latest event time less its "
                                      "lateness_s, seconds (since the epoch for timestamps)")
    state_rows: int | None = None
    state_bytes: int | None = Field(None, description="bytes this query's state takes over all shards")
    stream: str | None = Field(None, description="the stream (one per source) this query runs on")
    stream_queries: int | None = Field(None, description="queries sharing that stream")
    stream_restarts: int | None = Field(None, description="times that stream died and was restarted from its "
                                        "checkpoint in the last 10 minutes (`stream_restarts` setting)")
    result_rows: int = 0
    dead_letters: int = 0
    late: int = 0
    dead_letters_by_reason: dict[str, int] = {}
    dead_letter_summary: str | None = Field(None, description="this run's dead letters by reason, with the first "
                                            "detail of each")
    engine: str | None = Field(None, description="the engine the query ran on in its stream's micro-batches: "
                               "columnar, cet, or general with why not the columnar one (the query, or input the "
                               "columnar engine does not take); null before a batch ran")
    problem: str | None = Field(None, description="the query's names its input shows to be mistakes, with the "
                                "closest name the input has: a type no event has (of the whole query, or of one "
                                "part while a close one came), an attribute no event of its type carries; read "
                                "from the records already in the source until the stream reads input")
    spooled_batches: int = Field(0, description="micro-batches of output kept for sinks that failed, delivered "
                                 "first when the query runs again")
    spooled_bytes: int = Field(0, description="their bytes; at the query's max_spool_mb its stream stops")


STATUS = ("starting: accepted or resumed while the service starts (Spark not up yet, /readyz 503), it runs once "
          "Spark is up; running; stopped: by a stop, its state kept; failed: see error (a start or a restart "
          "of the service tries it again)")


class QueryInfo(BaseModel):
    id: str
    name: str
    text: str
    mode: Mode
    status: Status = Field(description=STATUS)
    error: str | None = Field(None, description="why it failed (status failed)")
    source: dict[str, Any]
    sinks: list[dict[str, Any]]
    dead_letter: dict[str, Any] | None = None
    options: dict[str, Any]
    columns: list[str]
    group_columns: list[str]
    created_at: float
    progress: Progress


class QueryList(BaseModel):
    queries: list[QueryInfo]
    total: int = Field(0, description="registered queries in all (`queries` is a page of them when `limit` is given)")
    offset: int = 0
    next_offset: int | None = Field(None, description="the next page's offset; null: this page is the last")


class ResultsPage(BaseModel):
    query_id: str
    columns: list[str]
    total: int
    offset: int
    limit: int
    next_offset: int | None
    last_seq: int = Field(description="store position when read: GET .../results/stream?after=last_seq continues")
    rows: list[dict[str, Any]]


class Health(BaseModel):
    status: str
    detail: str | None = None
