"""Stream runner: the registered queries of one source -> one Spark streaming query, plus progress.

Built on the public pieces of `greta_stream.spark` only (`read_source`,
`start_stream`, `StreamWriter`, `BatchWriter`); no pyspark here:

  1. `query_config` makes a registered query the pipeline model
     (`greta_stream.pipeline`) that the command line and config files build
     too: its source, sinks and options;
  2. `run_spec` builds the query's `RunSpec` (compiled once, options checked);
  3. `stream_key` says which stream a query joins: every query that reads
     the same source with the same field names shares one stream (one read,
     one parse, one stateful operator), unless it asked for a backfill (a
     stream of its own, from the earliest input);
  4. `start_stream` starts a stream for its queries with a `StreamWriter`
     that writes each micro-batch to each query's sinks and then to the
     results store, keyed by (query, batch id): a batch that Spark replays
     replaces its own rows;
  5. `StreamProgress` keeps each stream's progress reports as Spark sends
     them, and `progress` turns them into the API's `Progress`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from greta_service.settings import Settings
from greta_service.store import QueryRecord, ResultCounts, ResultRow, ResultStore
from greta_stream import FieldNames, Limits, QuerySet, RunSpec
from greta_stream.pipeline import FieldsConfig, QueryConfig, QueryOptions
from greta_stream.pipeline.validation import renamed, validated
from greta_stream.spark import BatchWriter, StreamWriter, confined, event_rows, read_layout, read_source
from greta_stream.spark import start_stream as start_spark_stream

log = logging.getLogger("greta_service")
STREAM_PREFIX = "greta-"  # the Spark name of the service's stream of key k is "greta-k"


def query_config(rec: QueryRecord) -> QueryConfig:
    """A registered query as the pipeline model: what the command line and config files build too."""
    options = renamed(rec.options)
    own = {k: options[k] for k in QueryOptions.model_fields if k in options}
    return validated(QueryConfig, {
        "name": rec.name, "text": rec.text, "mode": rec.mode, "source": rec.source, "sinks": rec.sinks,
        "dead_letter": rec.dead_letter, **own}, f"query {rec.name!r}")


def run_spec(rec: QueryRecord, settings: Settings, *, checked: bool = True,
             query: QueryConfig | None = None) -> RunSpec:
    """The query's `RunSpec` (its text compiled once per process) under the service's limits
    (`checked=False`: a registered query as it was, whatever the limits are now); `query`:
    its `query_config` when already built."""
    return (query or query_config(rec)).compile(fields_of(rec), 0.0, settings.max_future_s,
                                                settings.limits if checked else Limits(None, None))


def fields_of(rec: QueryRecord) -> FieldNames:
    """The names of the type, time and id fields a registered query reads."""
    return validated(FieldsConfig, rec.options.get("fields") or {}, "fields").names()


def stream_key(rec: QueryRecord) -> str:
    """The stream a query runs on: one per (source, field names); a backfill has its own."""
    if rec.options.get("backfill"):
        return f"backfill-{rec.id}"
    fields = rec.options.get("fields") or {}
    known = _KEYS.get(id(rec.source))
    # a record's copies share its source (`Store.list_queries` copies records, not their dicts): the key
    # computed once serves each, checked against a copy of what it was computed from
    if known is not None and known[0] is rec.source and known[1] == rec.source and known[2] == fields:
        return known[3]
    text = json.dumps({"source": rec.source, "fields": fields}, sort_keys=True, default=str)
    key = "source-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    if len(_KEYS) >= MAX_KEYS:
        _KEYS.clear()
    _KEYS[id(rec.source)] = (rec.source, copy.deepcopy(rec.source), copy.deepcopy(fields), key)
    return key


# id(source dict) -> (that dict, a copy of it, the field names, its stream key); the dict is held, so its id
# names no other object while it is here
_KEYS: dict[int, tuple[dict[str, Any], dict[str, Any], Any, str]] = {}
MAX_KEYS = 100_000


@dataclass
class StreamHandle:
    """A running Spark streaming query and the registered queries it serves."""

    key: str
    query_ids: tuple[str, ...]
    query: Any  # pyspark's StreamingQuery
    writer: StreamWriter
    queries: QuerySet  # what the stream's operator runs (query ids -> run specs)
    started_at: float = field(default_factory=time.time)
    recs: dict[str, QueryRecord] = field(default_factory=dict)  # its queries as their writers were made
    changes: int = 0  # query-set changes it took without a restart


def start_stream(spark: Any, key: str, recs: list[QueryRecord], specs: dict[str, RunSpec], checkpoint: Path,
                 default_trigger_s: float, store: ResultStore, paused: tuple[str, ...] = (),
                 held: QueryRecord | None = None) -> StreamHandle:
    """Start the stream `key` for `recs` from its checkpoint (a new one on first start);
    the stream keeps the saved state of the `paused` (stopped or failed) queries.
    With no `recs`, a *holding* stream of the paused queries, `held` one of them:
    it reads its source and evaluates nothing, so that a paused query started
    again goes on with the input that arrives from then on.

    The stream's settings come from its queries: the shortest trigger
    interval; the shard count and the operator are the checkpoint's
    (properties of the stream: `stream_setting`)."""
    writers = {rec.id: _writer(rec, specs[rec.id], checkpoint, store) for rec in recs}
    intervals = [r.options["trigger_interval_s"] for r in recs if r.options.get("trigger_interval_s") is not None]
    interval = min(intervals) if intervals else default_trigger_s
    first = recs[0] if recs else held
    assert first is not None, "a holding stream is one of its paused queries'"
    queries = _query_set(recs, specs, paused, fields_of(first))
    source = query_config(first).source
    writer = StreamWriter(writers)
    assert source is not None, "a registered query has its source"
    query = start_spark_stream(read_source(spark, source), queries, writer, checkpoint,
                               shards=stream_setting(checkpoint, recs or [held], "shards"),  # type: ignore[list-item]
                               trigger_interval_s=interval or None,
                               operator=stream_setting(checkpoint, recs or [held], "operator"),  # type: ignore[list-item]
                               name=f"{STREAM_PREFIX}{key}", confine=confined(source), live=True)
    return StreamHandle(key, tuple(r.id for r in recs), query, writer, queries, recs={r.id: r for r in recs})


def change_stream(spark: Any, handle: StreamHandle, recs: list[QueryRecord], specs: dict[str, RunSpec],
                  store: ResultStore, paused: tuple[str, ...], checkpoint: Path) -> bool:
    """Give a running stream a new query set at its next micro-batch, without a restart
    (`greta_stream.spark.control`): the writers of new or changed queries first, then the
    set. False when it cannot (a checkpoint from before control rows, a query where the
    stream sends no events): restart it."""
    live = handle.writer.live
    if live is None or not handle.query.isActive:
        return False
    queries = _query_set(recs, specs, paused, live.queries.fields)
    if queries.fields != live.queries.fields or any(rec.id in handle.writer.errors for rec in recs):
        return False  # other field names; or a query whose evaluation failed in this run: a new run retries it
    for rec in recs:
        new = _made_of(handle.recs.get(rec.id)) != _made_of(rec) or rec.id not in handle.writer.writers
        if new:  # a new query, or new sinks or options
            writer = _writer(rec, specs[rec.id], checkpoint, store)
            writer.bind(handle.writer.types)  # typed as the stream's input, as `StreamWriter.bind` types the others
            writer.replay(spark)  # what its sinks could not take before, first
            if writer.failed is not None:
                return False  # its sinks still fail: the restart fails it, as before
            handle.writer.writers[rec.id] = writer
    if live.change(queries) is None:
        return False
    for gone in set(handle.writer.writers) - {r.id for r in recs} - set(paused):  # deleted: its rows go with it
        del handle.writer.writers[gone]
    handle.query_ids, handle.queries = tuple(r.id for r in recs), queries
    handle.recs = {r.id: r for r in recs}
    handle.changes += 1
    return True


def _query_set(recs: list[QueryRecord], specs: dict[str, RunSpec], paused: tuple[str, ...],
               fields: FieldNames) -> QuerySet:
    """A stream's queries: `recs` running, `paused` kept; none running: a holding set reading `fields`."""
    if recs:
        return QuerySet.of([(rec.id, specs[rec.id]) for rec in recs], paused=paused)
    return QuerySet.holding(paused, fields)


def _writer(rec: QueryRecord, spec: RunSpec, checkpoint: Path, store: ResultStore) -> BatchWriter:
    """A query's batch writer: its sinks (Kafka sinks keep their logs in the checkpoint), then the results store."""
    return BatchWriter(query_config(rec).compiled_as(spec), checkpoint=checkpoint / "queries" / rec.id,
                       on_batch=_to_store(store, rec.id))


def _made_of(rec: QueryRecord | None) -> Any:
    """What a query's writer is made of (a change of it needs a new writer)."""
    return rec and (rec.text, rec.mode, rec.sinks, rec.dead_letter, rec.options)


def stream_setting(checkpoint: Path, recs: list[QueryRecord], key: str) -> Any:
    """A stream's shard count or operator (`key`): its checkpoint's, else the first of its
    queries that asks for one (None: the default)."""
    layout = read_layout(checkpoint)
    if layout is not None:
        return getattr(layout, key)
    return next((r.options[key] for r in recs if r.options.get(key)), None)


def _to_store(store: ResultStore, query_id: str) -> Any:
    def write(batch_id: int, rows: list[Any], dead: dict[str, int], state_bytes: int | None = None) -> None:
        stored = [ResultRow(o.window_start, o.window_end, o.grp, o.payload) for o in rows]
        store.write_batch(query_id, batch_id, stored, dead, state_bytes)
    return write


def stop_stream(handle: StreamHandle, wait_s: float = 10.0) -> None:
    """Stop a stream between micro-batches when one is running (so nothing is
    replayed on restart), else after `wait_s` seconds anyway: Spark then
    interrupts the batch within its `spark.sql.streaming.stopTimeout` (the
    service sets it to `wait_s` too), and the interrupted batch is replayed
    on restart from the checkpoint."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if not handle.query.isActive or not handle.query.status.get("isTriggerActive"):
                break
        except Exception:  # noqa: BLE001 - a stream that is going away
            break
        time.sleep(0.1)
    handle.query.stop()


@dataclass
class StreamProgress:
    """What Spark reported of one stream's micro-batches, kept as they happen
    (`observe`, from the session's progress listener): reading it costs no
    call into Spark, whatever the number of queries or input files."""

    run_id: str | None = None
    last: dict[str, Any] | None = None
    durations_ms: deque[int] = field(default_factory=lambda: deque(maxlen=20))
    input_rows: int = 0
    batches: int = 0

    def observe(self, report: dict[str, Any]) -> None:
        if report.get("runId") != self.run_id:  # a new run of the stream (a restart): its batches count again,
            self.run_id, self.batches = report.get("runId"), 0  # the events it read go on adding up
            self.durations_ms.clear()
        self.last = report
        self.batches += 1
        self.input_rows += event_rows(report)  # the events: a query-set change's control row is none
        self.durations_ms.append(int((report.get("durationMs") or {}).get("triggerExecution", 0)))


def progress(stream: StreamProgress | None, counts: ResultCounts) -> dict[str, Any]:
    """The API's Progress fields from a stream's progress and the store's counts."""
    out: dict[str, Any] = {
        "batches": counts.batches, "last_batch_id": counts.last_batch_id, "result_rows": counts.rows,
        "dead_letters": counts.dead_letters, "late": counts.dead_by_reason.get("late", 0),
        "dead_letters_by_reason": dict(counts.dead_by_reason),
    }
    if stream is None or stream.last is None:
        return out
    last = stream.last
    state = (last.get("stateOperators") or [{}])[0]
    out.update(
        input_rows_per_s=last.get("inputRowsPerSecond"), processed_rows_per_s=last.get("processedRowsPerSecond"),
        input_rows=stream.input_rows, stream_batches=stream.batches, batch_durations_ms=list(stream.durations_ms),
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


def short_error(exc: BaseException | Any, limit: int = 300) -> str:
    """One line to act on from a (possibly Java, possibly wrapped) exception: the innermost
    Python error when Spark wraps one, else the first line; the whole text goes to the log."""
    text = str(exc).strip() or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("at ")]
    python = [ln for ln in lines if ln.split(":", 1)[0].endswith(("Error", "Exception")) and not ln.startswith(
        ("org.", "java.", "py4j", "pyspark.errors", "Traceback"))]
    line = python[-1] if python else lines[0] if lines else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."
