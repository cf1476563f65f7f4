"""The pipeline config file's schema: what `greta-stream run --config` accepts.

A YAML or TOML file is checked here before anything is compiled or started:
an unknown key (a typo such as `watermark_delay` or `sink`) is an error that
names it, where it is and the keys that place knows; formats and modes are
closed sets; a query without a sink would compute rows and write them
nowhere, so it is refused. `PipelineConfig.from_dict` builds the run from the
checked document.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from greta_stream.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class SourceFile(_Strict):
    format: Literal["jsonl", "parquet", "delta", "kafka"] = "jsonl"
    path: str = ""
    max_files_per_trigger: int | None = Field(None, ge=1)
    options: dict[str, str] = {}
    bootstrap_servers: str | None = None
    topic: str | None = None
    starting_offsets: str = "earliest"

    @model_validator(mode="after")
    def _where(self) -> SourceFile:
        if self.format == "kafka" and not self.topic:
            raise ValueError("a kafka source needs a topic")
        if self.format != "kafka" and not self.path:
            raise ValueError(f"a {self.format} source needs a path")
        return self


class SinkFile(_Strict):
    format: Literal["jsonl", "parquet", "delta", "console", "kafka"] = "jsonl"
    path: str | None = None
    bootstrap_servers: str | None = None
    topic: str | None = None
    options: dict[str, str] = {}
    table: str | None = Field(None, min_length=1)
    partition_by: list[str] = []
    merge_schema: bool = False
    counts: Literal["decimal", "text"] = "decimal"

    @model_validator(mode="after")
    def _where(self) -> SinkFile:
        if self.format == "kafka" and not self.topic:
            raise ValueError("a kafka sink needs a topic")
        if self.format in ("jsonl", "parquet") and not self.path:
            raise ValueError(f"a {self.format} sink needs a path")
        if self.format == "delta" and (self.path is None) == (self.table is None):
            raise ValueError("a delta sink needs a path or a table (one of them)")
        check_delta_only(self)
        return self


def check_delta_only(sink: Any) -> None:
    """A `ValueError` naming the Delta-only settings (`table`, `partition_by`, `merge_schema`, `counts`)
    that a sink of another format sets away from their defaults (a sink model without one counts as default)."""
    given = [k for k, v in (("table", getattr(sink, "table", None)), ("partition_by", sink.partition_by),
                            ("merge_schema", sink.merge_schema), ("counts", sink.counts != "decimal")) if v]
    if sink.format != "delta" and given:
        raise ValueError(f"{', '.join(given)} apply to delta sinks only")


class QueryFile(_Strict):
    name: str = Field(min_length=1)
    text: str | None = None
    file: str | None = None
    sinks: list[SinkFile] = Field(min_length=1)
    dead_letter: SinkFile | None = None
    mode: Literal["aggregate", "cet"] | None = None
    source: SourceFile | None = None
    trends: Literal["complete", "all"] = "complete"
    max_trends: int | None = Field(None, ge=1)
    distribute_over: int | None = Field(None, ge=0)
    engine: Literal["auto", "general"] = "auto"

    @model_validator(mode="after")
    def _one_text(self) -> QueryFile:
        if (self.text is None) == (self.file is None):
            raise ValueError("give the query as text or as file (one of them)")
        return self


class FieldsFile(_Strict):
    type: str = "type"
    time: str = "time"
    id: str = "id"


class PipelineFile(_Strict):
    source: SourceFile
    queries: list[QueryFile] = Field(min_length=1)
    checkpoint: str = Field(min_length=1)
    watermark_delay_s: float = Field(0.0, ge=0)
    once: bool = False
    trigger_interval_s: float | None = Field(None, gt=0)
    master: str | None = None
    shards: int | None = Field(None, ge=1)
    operator: Literal["transformWithStateInPandas", "applyInPandasWithState"] | None = None
    fields: FieldsFile = FieldsFile()
    shared_streams: bool = True
    sharing: bool = True
    max_future_s: float | None = Field(None, gt=0)
    max_windows_per_event: int | None = Field(None, ge=1)
    max_panes_per_window: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _unique_names(self) -> PipelineFile:
        names = [q.name for q in self.queries]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"query names must be unique: {', '.join(twice)} more than once")
        return self


_MODELS: dict[str, type[BaseModel]] = {"source": SourceFile, "sinks": SinkFile, "dead_letter": SinkFile,
                                       "queries": QueryFile, "fields": FieldsFile}


def check(raw: Any, origin: str = "pipeline config") -> PipelineFile:
    """The checked document, or a `ConfigError` listing every problem with its place."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: expected a mapping of settings, got {type(raw).__name__}")
    try:
        return PipelineFile.model_validate(raw)
    except ValidationError as exc:
        problems = [_problem(e) for e in exc.errors()]
        listed = f" {problems[0]}" if len(problems) == 1 else "".join(f"\n  - {p}" for p in problems)
        raise ConfigError(f"{origin}:{listed}") from None


def _problem(error: Any) -> str:
    loc = [str(p) for p in error["loc"]]
    where = _place(loc)
    if error["type"] == "extra_forbidden":
        known = _known(loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        inside = f" in {_place(loc[:-1])}" if loc[:-1] else ""
        return f"unknown key {loc[-1]!r}{inside} ({hint}known: {', '.join(known)})"
    if error["type"] == "missing":
        return f"{where} is required"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _place(loc: list[str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def _known(loc: list[str]) -> list[str]:
    """The keys the mapping at `loc` accepts."""
    model: type[BaseModel] = PipelineFile
    for part in loc:
        if not part.isdigit():
            model = _MODELS.get(part, model)
    return list(model.model_fields)
