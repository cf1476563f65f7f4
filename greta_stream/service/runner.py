"""Stream runner: one registered query -> one Spark streaming query, plus its progress.

Built on the public pieces of `greta_stream.spark` only (`read_source`,
`trend_aggregates`, `BatchWriter`), never on their internals:

  1. `source_config` / `sink_config` map the request's open objects onto the
     pipeline's dataclasses by field name, so formats added there (Kafka)
     work unchanged;
  2. `operator_kwargs` builds the `trend_aggregates` call; the mode (and the
     CET options) are passed only if the operator accepts them;
  3. `StoreBatchWriter` writes each micro-batch to the query's sinks (the
     pipeline's `BatchWriter`) and then to the results store, keyed by
     (query, batch id): a batch that Spark replays replaces its own rows;
  4. `progress` turns Spark's progress reports into the API's `Progress`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine import FieldNames
from greta_stream.errors import ConfigError
from greta_stream.service.store import QueryRecord, ResultCounts, ResultRow, ResultStore
from greta_stream.spark import operator as spark_operator
from greta_stream.spark.pipeline import BatchWriter, QueryConfig, SinkConfig, SourceConfig, read_source

log = logging.getLogger("greta_stream.service")

FILE_FORMATS = ("jsonl", "parquet")


def _build(cls: type, spec: dict[str, Any], what: str) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ConfigError(f"unknown {what} field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    try:
        return cls(**spec)
    except TypeError as exc:
        raise ConfigError(f"bad {what}: {exc}") from exc


def source_config(spec: dict[str, Any]) -> SourceConfig:
    cfg = _build(SourceConfig, spec, "source")
    plain = (str, int, float, bool)
    if not isinstance(cfg.options, dict) or not all(isinstance(v, plain) for v in cfg.options.values()):
        raise ConfigError("source options must be an object of plain values")
    return cfg


def sink_config(spec: dict[str, Any]) -> SinkConfig:
    return _build(SinkConfig, spec, "sink")


def resolve_mode(cq: CompiledQuery, mode: str | None) -> str:
    """The query's mode: as asked, else cet for `RETURN TRENDS` (as the operator does)."""
    trends = bool(getattr(cq.query, "trends", False))
    resolved = mode or ("cet" if trends else "aggregate")
    if resolved == "aggregate" and trends:
        raise ConfigError("RETURN TRENDS lists trends: use mode cet")
    return resolved


def result_columns(cq: CompiledQuery, mode: str) -> list[str]:
    """Columns of the stored rows: SEMANTICS.md section 4, or section 5 for CET records."""
    if mode == "cet":
        return ["window_start", "window_end", *cq.group_columns, "trend", "total", "truncated"]
    return list(cq.columns)


def operator_kwargs(rec: QueryRecord) -> dict[str, Any]:
    """Keyword arguments of `trend_aggregates` for this query (checked against its signature now)."""
    opts = rec.options
    f = opts.get("fields") or {}
    kw: dict[str, Any] = {
        "watermark_delay_s": float(opts.get("watermark_delay_s") or 0.0),
        "shards": opts.get("shards"),
        "fields": FieldNames(f.get("type", "type"), f.get("time", "time"), f.get("id", "id")),
    }
    cet_opts = {k: opts[k] for k in ("trends", "max_trends") if opts.get(k) is not None}
    kw["mode"] = rec.mode
    kw["engine"] = opts.get("engine") or "auto"
    if rec.mode == "cet":
        kw.update(cet_opts)
    elif cet_opts:
        raise ConfigError(f"option(s) {', '.join(cet_opts)} apply to mode cet only")
    return kw


class StoreBatchWriter(BatchWriter):
    """foreachBatch target: the pipeline's sinks first, then the results store."""

    def __init__(self, query: QueryConfig, query_id: str, store: ResultStore, checkpoint: Path) -> None:
        super().__init__(query, checkpoint=checkpoint)  # Kafka sinks keep their sink logs there
        self.query_id = query_id
        self.store = store

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # Two reads of one micro-batch: cache it so the stateful operator runs once.
        batch.persist()
        try:
            super().__call__(batch, batch_id)
            outputs = batch.select("kind", "window_start", "window_end", "grp", "payload").collect()
        finally:
            batch.unpersist()
        rows = sorted(
            (ResultRow(o.window_start, o.window_end, o.grp, o.payload) for o in outputs if o.kind == "row"),
            key=lambda r: (r.window_start, r.grp),
        )
        dead: dict[str, int] = {}
        for o in outputs:
            if o.kind == "dead":
                dead[o.grp] = dead.get(o.grp, 0) + 1
        self.store.write_batch(self.query_id, batch_id, rows, dead)


@dataclass
class StreamHandle:
    """A running Spark streaming query of one registered query."""

    query_id: str
    query: StreamingQuery
    writer: StoreBatchWriter
    started_at: float = field(default_factory=time.time)


def start_stream(spark: SparkSession, rec: QueryRecord, checkpoint: Path, default_trigger_s: float,
                 store: ResultStore) -> StreamHandle:
    """Start `rec` from its checkpoint (a new one on first start)."""
    src = source_config(rec.source)
    qc = QueryConfig(rec.name, rec.text, [sink_config(s) for s in rec.sinks],
                     sink_config(rec.dead_letter) if rec.dead_letter else None)
    events = read_source(spark, src)
    out = spark_operator.trend_aggregates(events, rec.text, **operator_kwargs(rec))
    writer = StoreBatchWriter(qc, rec.id, store, checkpoint)
    ws = out.writeStream.foreachBatch(writer).option("checkpointLocation", str(checkpoint)).queryName(f"greta-{rec.id}")
    interval = rec.options.get("trigger_interval_s")
    interval = default_trigger_s if interval is None else interval
    if interval:
        ws = ws.trigger(processingTime=f"{interval} seconds")
    return StreamHandle(rec.id, ws.start(), writer)


def progress(handle: StreamHandle | None, counts: ResultCounts) -> dict[str, Any]:
    """The API's Progress fields from Spark's recent progress and the store's counts."""
    out: dict[str, Any] = {
        "batches": counts.batches, "last_batch_id": counts.last_batch_id, "result_rows": counts.rows,
        "dead_letters": counts.dead_letters, "late": counts.dead_by_reason.get("late", 0),
        "dead_letters_by_reason": dict(counts.dead_by_reason),
    }
    if handle is None:
        return out
    reports = [_as_dict(p) for p in handle.query.recentProgress]
    if not reports:
        return out
    last = reports[-1]
    state = (last.get("stateOperators") or [{}])[0]
    out.update(
        input_rows_per_s=last.get("inputRowsPerSecond"), processed_rows_per_s=last.get("processedRowsPerSecond"),
        input_rows=sum(int(p.get("numInputRows") or 0) for p in reports),
        batch_durations_ms=[int((p.get("durationMs") or {}).get("triggerExecution", 0)) for p in reports][-20:],
        watermark_s=event_watermark_s((last.get("eventTime") or {}).get("watermark")),
        state_rows=state.get("numRowsTotal"), state_bytes=state.get("memoryUsedBytes"),
    )
    for k in ("input_rows_per_s", "processed_rows_per_s"):
        if out[k] is not None and out[k] != out[k]:  # NaN before the first timed batch
            out[k] = None
    return out


def event_watermark_s(text: str | None) -> float | None:
    """Spark's watermark in event-time seconds (the operator keeps it in event time)."""
    if not text:
        return None
    try:
        seconds = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return None if seconds == 0 else seconds  # the epoch is Spark's "no watermark yet"


def _as_dict(p: Any) -> dict[str, Any]:
    raw = getattr(p, "json", None)
    if isinstance(raw, str):
        return json.loads(raw)
    if callable(raw):
        return json.loads(raw())
    return json.loads(json.dumps(p, default=str))


def short_error(exc: BaseException | Any, limit: int = 2000) -> str:
    """The first lines of a (possibly Java) exception: enough to act on, no stack trace."""
    text = str(exc).strip() or type(exc).__name__
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("at ")]
    text = "\n".join(lines[:12])
    return text if len(text) <= limit else text[: limit - 3] + "..."
