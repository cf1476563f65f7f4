"""Whole streaming jobs: a source, one or more queries, sinks and checkpoints.

A `PipelineConfig` comes from a YAML or TOML file (samples in `configs/`) or
from the flags of `greta-stream run`. Each query is its own streaming query
with its own checkpoint folder under `checkpoint/<name>`; all read the same
source. Outputs leave through `foreachBatch`: result rows to the query's
sinks, dead letters to its dead-letter sink, each micro-batch to files named
by batch id and written atomically, so a batch that Spark replays after a
crash overwrites its own files: output is exactly once. Kafka sinks
(`greta_stream.spark.kafka`) cannot overwrite; they key every message by
(query, group, window) and keep a sink log in the query's checkpoint, so a
replayed batch sends only what is missing (see that module for what remains).

The parts: `formats` (reading a source through its format's reader, making
its sinks), `sources` (the file sources), `writers` (the foreachBatch targets,
`StreamWriter` and `BatchWriter`) and `spool` (outputs kept while a query's
sinks fail); this module starts and drives the streams, and names every one
of those parts as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from greta_stream.pipeline.model import PipelineConfig, default_shards, packages, streams
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.control import CONTROL_FOLDER, ControlSets, LiveSet, read_rows
from greta_stream.spark.formats import confined, read_source
from greta_stream.spark.layout import open_layout
from greta_stream.spark.operator import stream_outputs
from greta_stream.spark.progress import new_reports, progress_line
from greta_stream.spark.sources import tied_files
from greta_stream.spark.spool import Output, Spool, collected
from greta_stream.spark.writers import BatchHook, BatchWriter, StreamWriter

__all__ = [
    "BatchHook", "BatchWriter", "Output", "Spool", "Started", "StreamWriter", "collected", "confined", "counts",
    "drive", "read_source", "run", "session_for", "start", "start_stream", "tied_files",
]

log = logging.getLogger("greta_stream.pipeline")


Started = list[tuple[StreamingQuery, StreamWriter]]  # a pipeline's streams with their writers


def start(spark: SparkSession, cfg: PipelineConfig) -> Started:
    """Start one streaming query per source; return them with their writers.

    A new checkpoint's stream reads control rows (`spark.control`), as a service stream does,
    though its query set changes only between runs: each start writes its set's control row,
    which wakes every shard of every slot in the first batch, so a restart whose settings close
    windows sooner (a lowered lateness) closes them in every shard there, not only in the shards
    that its events or its old timers reach."""
    cfg = cfg.compile()  # each query once, here where the run begins (itself for a compiled pipeline)
    started = []
    for stream in streams(cfg):
        checkpoint = Path(cfg.checkpoint) / stream.name
        writer = StreamWriter({q.name: BatchWriter(q, checkpoint=checkpoint / "queries" / q.name)
                               for q in stream.queries})
        trigger_s = None if cfg.once else cfg.trigger_interval_s
        query = start_stream(read_source(spark, stream.source), stream.query_set(), writer, checkpoint,
                             shards=cfg.shards, once=cfg.once, trigger_interval_s=trigger_s, name=stream.name,
                             operator=cfg.operator, confine=confined(stream.source), live=True)
        started.append((query, writer))
    return started


def start_stream(events: DataFrame, queries: QuerySet, writer: Any, checkpoint: str | Path, *, shards: int | None,
                 once: bool = False, trigger_interval_s: float | None = None, name: str,
                 operator: str | None = None, confine: str | None = None, live: bool = False) -> StreamingQuery:
    """Start one stream over `events` for every query of `queries`: the
    operator, then `writer` (a `StreamWriter`) per micro-batch,
    checkpointed in `checkpoint`. Each start is a new run (`QuerySet.epoch`):
    a query that failed before is tried again, and what its failed sinks kept
    is delivered first. `shards` and `operator` must be the checkpoint's, or None.
    `live`: a new checkpoint's stream takes query-set changes without a
    restart (`writer.live`: `spark.control`); a checkpoint keeps what it began with."""
    layout = open_layout(checkpoint, queries, shards, default_shards(), operator, control=live)
    queries = dataclasses.replace(queries, epoch=time.time_ns() // 1_000_000)
    writer.bind(events)
    writer.replay(events.sparkSession)
    control = None
    if layout.control:
        sets = ControlSets(Path(checkpoint) / CONTROL_FOLDER)
        first = sets.latest() + 1
        sets.write(first, queries, layout)
        sets.prune(below=first)  # the earlier runs' sets: no shard of this run reads one
        control = (read_rows(events.sparkSession, sets), sets, first)
        writer.live = LiveSet(sets, Path(checkpoint), layout, queries, frozenset(layout.members(queries)), first)
    elif _restarted(checkpoint):
        log.warning("stream %s: its checkpoint reads no control rows (it is not on a local file system, or "
                    "an older greta-stream began it), so its shards are not woken at start: where a query's "
                    "lateness is lower than in its last run (%s), the windows its watermark already passed come "
                    "out of a shard only when that shard next sees an event or the timer its last run set fires; "
                    "start from a new local checkpoint to have every shard woken at each start",
                    name, ", ".join(queries.names))
    out = stream_outputs(events, queries, layout=layout, confine=confine, control=control)
    ws = out.writeStream.foreachBatch(writer).option("checkpointLocation", str(checkpoint)).queryName(name)
    if once:
        ws = ws.trigger(availableNow=True)
    elif trigger_interval_s:
        ws = ws.trigger(processingTime=f"{trigger_interval_s} seconds")
    query = ws.start()
    log.info("started stream %s: %s", name, ", ".join(queries.names))
    return query


def _restarted(checkpoint: str | Path) -> bool:
    """Whether the stream may have run from this checkpoint before (a remote one: it cannot be told)."""
    return "://" in str(checkpoint) or (Path(checkpoint) / "offsets").is_dir()


def run(cfg: PipelineConfig, spark: SparkSession | None = None, echo: Any = print) -> dict[str, dict[str, Any]]:
    """Run the pipeline until it ends (`once`) or is interrupted; report
    progress; the rows and dead letters written, per query."""
    started, _ = drive(spark or session_for(cfg), cfg, echo)
    return counts(started)


def session_for(cfg: PipelineConfig) -> SparkSession:
    """A session on the pipeline's master with the Spark packages its sources and sinks need."""
    from greta_stream.spark.session import get_session

    return get_session(cfg.master, packages=packages(cfg), shards=cfg.shards)


def drive(spark: SparkSession, cfg: PipelineConfig, echo: Any,
          labels: list[str] | None = None) -> tuple[Started, str | None]:
    """Start the pipeline's streams and report their progress until they end
    (`once`) or a signal stops them: the streams, and the signal's name or None."""
    queries = start(spark, cfg)
    named = streams(cfg)  # progress lines name each stream by `labels` (in this order) or its own label
    by_name = {s.name: label for s, label in zip(named, labels or [s.label for s in named], strict=True)}
    seen: dict[str, int] = {}
    stop = _StopSignal()  # Ctrl-C or SIGTERM: a flag, so a signal inside a py4j call is not lost
    with stop:
        while any(q.isActive for q, _ in queries) and not stop.requested:
            time.sleep(0.5)
            _report(queries, seen, echo, by_name)
            for q, sw in queries:
                if q.exception() is not None:
                    if sw.halted is not None:
                        raise sw.halted  # what to do, not Spark's wrapping of it
                    raise q.exception()  # type: ignore[misc]
    if stop.requested:
        echo(f"stopping ({stop.requested}) ...")
        with _quiet_py4j():  # a batch the stop cuts short raises in its callback: expected (its checkpoint replays it)
            for q, _ in queries:
                q.stop()
    _report(queries, seen, echo, by_name)
    return queries, stop.requested


def counts(started: Started) -> dict[str, dict[str, Any]]:
    """The rows and dead letters written, per query, the dead letters' tally ("dead": `DeadLetters`),
    the mistake its output points at ("problem": `BatchWriter.problem`, or None), the engine it ran
    on ("engine": `BatchWriter.engine_text`) and why a query failed ("failed", when it did)."""
    out: dict[str, dict[str, Any]] = {}
    for _, sw in started:
        failed = sw.failed
        for name, w in sw.writers.items():
            out[name] = {**w.counts, "dead": w.dead_letters, "problem": w.problem, "engine": w.engine_text,
                         **({"failed": failed[name]} if name in failed else {})}
    return out


@contextlib.contextmanager
def _quiet_py4j() -> Iterator[None]:
    """py4j's loggers silent within `with`: it logs a callback's exception with its traceback at ERROR."""
    loggers = [logging.getLogger(name) for name in ("py4j", "py4j.clientserver", "py4j.java_gateway")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


class _StopSignal:
    """Within `with`, SIGINT and SIGTERM set `requested` instead of raising (main thread only)."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = signal.Signals(signum).name

    def __enter__(self) -> _StopSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _report(queries: Started, seen: dict[str, int], echo: Any, labels: dict[str, str]) -> None:
    for q, writer in queries:
        name = q.name
        for p in new_reports(q, seen.get(name, -1)):
            seen[name] = p["batchId"]
            echo(progress_line(labels.get(name, name), p, writer.time_kinds.values(),
                               [w.lateness_s for w in writer.writers.values()],
                               {n: w.engine_text for n, w in writer.writers.items()}))
