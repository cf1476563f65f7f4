"""Whole streaming jobs: a source, one or more queries, sinks and checkpoints.

A `PipelineConfig` comes from a YAML or TOML file (samples in `configs/`) or
from the flags of `greta-stream run`. Each query is its own streaming query
with its own checkpoint folder under `checkpoint/<name>`; all read the same
source. Outputs leave through `foreachBatch`: result rows to the query's
sinks, dead letters to its dead-letter sink, each micro-batch to files named
by batch id and written atomically, so a batch that Spark replays after a
crash overwrites its own files: output is exactly once.
"""

from __future__ import annotations

import json
import logging
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from greta_stream.compiler.compiled import compile_query
from greta_stream.connectors.sinks import Sink, make_sink
from greta_stream.engine import FieldNames
from greta_stream.errors import ConfigError
from greta_stream.spark.operator import trend_aggregates

log = logging.getLogger("greta_stream.pipeline")


@dataclass
class SourceConfig:
    format: str = "jsonl"  # jsonl | parquet
    path: str = ""
    max_files_per_trigger: int | None = None
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class SinkConfig:
    format: str = "jsonl"  # jsonl | parquet | console
    path: str | None = None


@dataclass
class QueryConfig:
    name: str
    text: str
    sinks: list[SinkConfig]
    dead_letter: SinkConfig | None = None


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
    fields: FieldNames = FieldNames()

    @classmethod
    def from_file(cls, path: str | Path) -> PipelineConfig:
        """Read a YAML (.yaml/.yml) or TOML (.toml) pipeline config."""
        p = Path(path)
        text = p.read_text()
        if p.suffix == ".toml":
            raw = tomllib.loads(text)
        else:
            import yaml

            raw = yaml.safe_load(text)
        return cls.from_dict(raw, base=p.parent)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], base: Path = Path(".")) -> PipelineConfig:
        try:
            src = SourceConfig(**raw["source"])
            queries = [_query_config(q, base) for q in raw["queries"]]
            f = raw.get("fields", {})
            return cls(
                source=src, queries=queries, checkpoint=raw["checkpoint"],
                watermark_delay_s=float(raw.get("watermark_delay_s", 0)), once=bool(raw.get("once", False)),
                trigger_interval_s=raw.get("trigger_interval_s"), master=raw.get("master"), shards=raw.get("shards"),
                fields=FieldNames(f.get("type", "type"), f.get("time", "time"), f.get("id", "id")),
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"bad pipeline config: {exc}") from exc


def _query_config(q: dict[str, Any], base: Path) -> QueryConfig:
    text = q.get("text") or (base / q["file"]).read_text()
    compile_query(text)  # fail before starting anything
    sinks = [SinkConfig(**s) for s in q.get("sinks", [])]
    dl = q.get("dead_letter")
    return QueryConfig(q["name"], text, sinks, SinkConfig(**dl) if dl else None)


def read_source(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """A streaming DataFrame of events: JSON text in `value`, or typed columns."""
    reader = spark.readStream
    if src.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", src.max_files_per_trigger)
    for k, v in src.options.items():
        reader = reader.option(k, v)
    if src.format == "jsonl":
        return reader.format("text").load(src.path)
    if src.format == "parquet":
        schema = spark.read.parquet(src.path).schema
        return reader.schema(schema).parquet(src.path)
    raise ConfigError(f"unknown source format {src.format!r}; use jsonl or parquet")


class BatchWriter:
    """foreachBatch target: route one micro-batch's outputs to the sinks."""

    def __init__(self, query: QueryConfig) -> None:
        self.name = query.name
        self.sinks: list[Sink] = [make_sink(s.format, s.path) for s in query.sinks]
        self.dead: Sink | None = make_sink(query.dead_letter.format, query.dead_letter.path) if query.dead_letter else None
        self.counts = {"rows": 0, "dead_letters": 0}

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        outputs = batch.select("kind", "window_start", "grp", "payload").collect()
        rows = sorted((o for o in outputs if o.kind == "row"), key=lambda o: (o.window_start, o.grp))
        dead = [o.payload for o in outputs if o.kind == "dead"]
        for sink in self.sinks:
            sink.write(batch_id, [o.payload for o in rows])
        if self.dead is not None:
            self.dead.write(batch_id, dead)
        self.counts["rows"] += len(rows)
        self.counts["dead_letters"] += len(dead)
        if dead:
            reasons: dict[str, int] = {}
            for o in outputs:
                if o.kind == "dead":
                    reasons[o.grp] = reasons.get(o.grp, 0) + 1
            log.warning("[%s] batch %d: %d dead letters %s", self.name, batch_id, len(dead), reasons)


def start(spark: SparkSession, cfg: PipelineConfig) -> list[tuple[StreamingQuery, BatchWriter]]:
    """Start every query of the pipeline; return them with their writers."""
    events = read_source(spark, cfg.source)
    started = []
    for q in cfg.queries:
        out = trend_aggregates(events, q.text, watermark_delay_s=cfg.watermark_delay_s, shards=cfg.shards,
                               fields=cfg.fields)
        writer = BatchWriter(q)
        ws = out.writeStream.foreachBatch(writer).option("checkpointLocation", str(Path(cfg.checkpoint) / q.name))
        ws = ws.queryName(q.name)
        if cfg.once:
            ws = ws.trigger(availableNow=True)
        elif cfg.trigger_interval_s:
            ws = ws.trigger(processingTime=f"{cfg.trigger_interval_s} seconds")
        started.append((ws.start(), writer))
        log.info("started query %s", q.name)
    return started


def progress_line(name: str, p: dict[str, Any]) -> str:
    """One human line from a StreamingQueryProgress dict."""
    state = p.get("stateOperators") or [{}]
    wm = (p.get("eventTime") or {}).get("watermark", "-")
    return (
        f"[{name}] batch {p.get('batchId')}: {p.get('numInputRows', 0):,} events "
        f"({p.get('processedRowsPerSecond') or 0:,.0f}/s) in {p.get('durationMs', {}).get('triggerExecution', 0):,} ms; "
        f"watermark {wm}; state {state[0].get('numRowsTotal', 0)} shard(s), {state[0].get('memoryUsedBytes', 0):,} bytes"
    )


def run(cfg: PipelineConfig, spark: SparkSession | None = None, echo: Any = print) -> dict[str, dict[str, int]]:
    """Run the pipeline until it ends (`once`) or is interrupted; report progress."""
    from greta_stream.spark.session import get_session

    spark = spark or get_session(cfg.master)
    queries = start(spark, cfg)
    seen: dict[str, int] = {}
    try:
        while any(q.isActive for q, _ in queries):
            time.sleep(0.5)
            _report(queries, seen, echo)
            for q, _ in queries:
                if q.exception() is not None:
                    raise q.exception()  # type: ignore[misc]
    except KeyboardInterrupt:
        echo("stopping ...")
        for q, _ in queries:
            q.stop()
    _report(queries, seen, echo)
    return {w.name: dict(w.counts) for _, w in queries}


def _report(queries: list[tuple[StreamingQuery, BatchWriter]], seen: dict[str, int], echo: Any) -> None:
    for q, w in queries:
        for p in q.recentProgress:
            if p["batchId"] > seen.get(w.name, -1):
                seen[w.name] = p["batchId"]
                echo(progress_line(w.name, json.loads(json.dumps(p, default=str))))
