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
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
from collections import Counter, namedtuple
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from greta_stream.connectors.jsonl import loads
from greta_stream.engine import DeadLetter
from greta_stream.errors import ConfigError, SpoolFull
from greta_stream.pipeline.model import (
    PipelineConfig,
    QueryConfig,
    SourceConfig,
    default_shards,
    packages,
    streams,
)
from greta_stream.runtime.dead_letters import DeadLetters, name_problems
from greta_stream.runtime.multi import one_line
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.cet_distributed import expand_outputs
from greta_stream.spark.control import CONTROL_FOLDER, ControlSets, LiveSet, read_rows
from greta_stream.spark.delta import read_delta
from greta_stream.spark.kafka import read_kafka
from greta_stream.spark.layout import open_layout
from greta_stream.spark.operator import FILE_COLUMN, stream_outputs
from greta_stream.spark.progress import progress_line
from greta_stream.spark.sinks import Sink, SinkBatch, SinkPlace, make_sink
from greta_stream.spark.typed import column_types

log = logging.getLogger("greta_stream.pipeline")


def read_source(spark: SparkSession, src: SourceConfig) -> DataFrame:
    """A streaming DataFrame of events: JSON text in `value`, or typed columns."""
    if src.format == "kafka":
        return read_kafka(spark, src.bootstrap_servers, src.topic, src.starting_offsets, src.options)
    if src.format == "delta":
        return read_delta(spark, src)
    reader = spark.readStream
    if src.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", src.max_files_per_trigger)
        tied = tied_files(src.path)
        if tied:
            log.warning("%d files in %s share their modification time with another: Spark may read them in any "
                        "order over several micro-batches, and the events of a file read after a later one may be "
                        "late. Touch them one by one in the order of their events, or leave max_files_per_trigger "
                        "unset (docs/SECURITY.md, file sources)", tied, src.path)
    for k, v in src.options.items():
        reader = reader.option(k, v)
    if src.format == "jsonl":  # each line with the file it came from: a link out of the folder is not read
        return reader.format("text").load(src.path).select("value", F.col("_metadata.file_path").alias(FILE_COLUMN))
    if src.format == "parquet":  # each row with its file too
        schema = spark.read.parquet(src.path).schema
        return reader.schema(schema).parquet(src.path).withColumn(FILE_COLUMN, F.col("_metadata.file_path"))
    raise ConfigError(f"unknown source format {src.format!r}; use jsonl, parquet, delta or kafka")


def tied_files(folder: str) -> int:
    """How many files of `folder` share their modification time with another one
    (Spark's file source orders new files by it; ties come in any order)."""
    try:
        stamps = Counter(p.stat().st_mtime_ns for p in Path(folder).iterdir() if p.is_file()
                         and not p.name.startswith((".", "_")))
    except OSError:  # not a local folder (an object store): nothing to say
        return 0
    return sum(n for n in stamps.values() if n > 1)


BatchHook = Callable[[int, list[Any], dict[str, int], "int | None"], None]


class BatchWriter:
    """foreachBatch target: route one micro-batch's outputs to the sinks.

    `on_batch(batch_id, rows, dead_by_reason, state_bytes)`, when given, is
    called after the sinks with the batch's result rows (objects with
    `window_start`, `window_end`, `grp` and `payload`, sorted), its
    dead-letter counts by reason and the query's state size after it (None:
    not known): the service's results store.
    """

    def __init__(self, query: QueryConfig, checkpoint: str | Path | None = None,
                 on_batch: BatchHook | None = None) -> None:
        """`checkpoint`: the query's checkpoint folder, where Kafka sinks keep their sink logs.

        Without it (or with a checkpoint URI that is not a local path) a Kafka
        sink is at-least-once: a replayed batch is sent again.
        """
        self.name = query.name
        assert query.spec is not None, "a QueryConfig gets its RunSpec from QueryConfig.compile"
        self.lateness_s = query.spec.lateness_s
        self.query = query.spec.query
        self.typed: Counter[str] = Counter()  # records of each of its types seen, over the run (shards' reports)
        self.other_types: Counter[str] = Counter()  # records of other types, by type (some)
        self.engine: tuple[str, str | None] | None = None  # what it ran on and why, as shards report it
        local = checkpoint is not None and "://" not in str(checkpoint)  # sink logs use plain file I/O
        sink_log = Path(checkpoint) / "greta-sinks" if local else None  # type: ignore[arg-type]
        self.sinks: list[Sink] = [make_sink(SinkPlace(query, "row", s, sink_log and sink_log / f"sink-{i}"))
                                  for i, s in enumerate(query.sinks)]
        self.dead: Sink | None = (make_sink(SinkPlace(query, "dead", query.dead_letter,
                                                      sink_log and sink_log / "dead-letter"))
                                  if query.dead_letter else None)
        self.on_batch = on_batch
        self.counts = {"rows": 0, "dead_letters": 0}
        self.dead_letters = DeadLetters()  # their reasons, as the run's summary says them
        self.failed: str | None = None  # why this query's sinks failed (one line); its output waits in the spool
        self.spool = Spool(Path(checkpoint) / "spool" if local else None)  # type: ignore[arg-type]
        self.max_spool_bytes = int(query.max_spool_mb * 1_000_000)

    def deliver(self, spark: SparkSession, batch_id: int, outputs: list[Any], state_bytes: int | None = None) -> None:
        """`route` a batch, or keep it in the spool when this query's sinks failed
        (now or before): the query fails alone, its output waits, nothing is lost."""
        if self.failed is None:
            try:
                self.route(spark, batch_id, outputs, state_bytes)
                return
            except Exception as exc:  # noqa: BLE001 - a dead sink fails its own query, never the stream
                self.failed = one_line(exc)
                log.error("[%s] batch %d: its sinks failed, its output is kept until it runs again: %s",
                          self.name, batch_id, self.failed, exc_info=exc)
        data = Spool.encode(outputs)
        batches, held = self.spool.stats()
        if held + len(data) > self.max_spool_bytes:
            raise SpoolFull(f"query {self.name}: its sinks failed ({self.failed}) and the output kept for them "
                            f"would pass max_spool_mb = {self.max_spool_bytes / 1e6:g} ({batches} batches, "
                            f"{held:,} bytes kept, this batch {len(data):,}): the stream stops here. Nothing is "
                            "lost: fix the sink (or raise max_spool_mb) and run again from the same checkpoint; "
                            "the kept batches are delivered first, then this one")
        self.spool.put(batch_id, outputs, data)

    def replay(self, spark: SparkSession) -> None:
        """Deliver the batches a failure kept in the spool, in order (at the start of a run)."""
        for batch_id, outputs in self.spool.batches():
            try:
                self.route(spark, batch_id, outputs)
            except Exception as exc:  # noqa: BLE001
                self.failed = one_line(exc)
                log.error("[%s] its sinks still fail; %d batches kept: %s", self.name, len(self.spool), self.failed)
                return
            self.spool.drop(batch_id)
            log.info("[%s] delivered batch %d from the spool", self.name, batch_id)

    def route(self, spark: SparkSession, batch_id: int, outputs: list[Any], state_bytes: int | None = None) -> None:
        """Write one batch's outputs (rows and dead letters of this query) to its sinks.
        Deferred CET windows become their rows first, through a Spark job (cet_distributed.py)."""
        rows = sorted((o for o in outputs if o.kind in ("row", "deferred")), key=lambda o: (o.window_start, o.grp))
        if any(o.kind == "deferred" for o in rows):
            rows = expand_outputs(spark, rows)
        # sorted: a replay gives the same order
        dead = sorted((o for o in outputs if o.kind == "dead"), key=lambda o: o.payload)
        for sink in self.sinks:
            sink.write(spark, SinkBatch(batch_id, rows))
        if self.dead is not None:
            self.dead.write(spark, SinkBatch(batch_id, dead))
        self.counts["rows"] += len(rows)
        self.counts["dead_letters"] += len(dead)
        reasons: dict[str, int] = {}
        for o in outputs:
            if o.kind == "dead":
                reasons[o.reason] = reasons.get(o.reason, 0) + 1
                if o.reason == "missing_attribute" or o.reason not in self.dead_letters.first_detail:  # what it says
                    self.dead_letters.add(DeadLetter.from_dict(loads(o.payload)))
                else:
                    self.dead_letters.by_reason[o.reason] += 1
        if dead:
            log.warning("[%s] batch %d: %d dead letters %s", self.name, batch_id, len(dead), reasons)
        if self.on_batch is not None:
            self.on_batch(batch_id, rows, reasons, state_bytes)

    def saw(self, typed: dict[str, int], other_types: dict[str, int]) -> None:
        """A shard's report of a batch's records: of its types and of the others, by type."""
        self.typed.update(typed)
        self.other_types.update(other_types)

    def ran_on(self, engine: str, why: str | None) -> None:
        """A shard's report of the engine the query ran on in a batch: the general engine in any
        shard is what the query runs on (the columnar engine took no input of that shard)."""
        if engine == "general" or self.engine is None:
            if (engine, why) != self.engine and engine == "general" and self.engine is not None:
                log.warning("[%s] runs on the general engine from here on: %s", self.name, why)
            self.engine = (engine, why)

    @property
    def engine_text(self) -> str | None:
        """"columnar", "general (why)" or "cet"; None before a batch ran."""
        if self.engine is None:
            return None
        engine, why = self.engine
        return f"{engine} ({why})" if why else engine

    @property
    def problems(self) -> list[str]:
        """The names of the query its input shows to be mistakes (`name_problems`): a type no event
        has (of the whole query, or of one part while a close one came), an attribute no event of
        its type carries."""
        return name_problems(self.query, self.typed, self.other_types, self.dead_letters.carried)

    @property
    def problem(self) -> str | None:
        """`problems` in one line, or None."""
        return "; ".join(self.problems) or None

    def bind(self, types: dict[str, Any]) -> None:
        """The stream's input column types, to the sinks that write typed columns (Delta's)."""
        for sink in (*self.sinks, self.dead):
            bind = getattr(sink, "bind", None)  # None: a sink of JSON payloads (or no dead-letter sink)
            if bind is not None:
                bind(types)


Output = namedtuple("Output", ["query", "kind", "window_start", "window_end", "grp", "payload", "reason"])


def _spooled(values: list[Any]) -> Output:
    """An output as a spool file keeps it; one spooled before the `reason` column had a dead letter's in `grp`."""
    if len(values) == len(Output._fields) - 1:
        values = [*values[:4], None, values[5], values[4]] if values[1] == "dead" else [*values, None]
    return Output(*values)


def collected(outputs: DataFrame) -> list[Output]:
    """A micro-batch's operator outputs on the driver, through Arrow (columns, not pickled Rows:
    several times faster once a batch carries many queries' rows)."""
    table = outputs.toArrow()
    return list(map(Output._make, zip(*(table.column(f).to_pylist() for f in Output._fields))))


class Spool:
    """The outputs of a query whose sinks failed, by batch id, kept until they can be delivered:
    one JSON-lines file per batch in `folder` (None: in memory)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._memory: dict[int, list[Any]] = {}

    def __len__(self) -> int:
        return len(self.batches())

    @staticmethod
    def encode(outputs: list[Any]) -> bytes:
        return "".join(json.dumps(list(o)) + "\n" for o in outputs).encode()

    def stats(self) -> tuple[int, int]:
        """(batches, bytes) kept."""
        if self.folder is None:
            return len(self._memory), sum(len(self.encode(o)) for o in self._memory.values())
        try:
            sizes = [p.stat().st_size for p in self.folder.glob("batch-*.jsonl")]
        except OSError:
            return 0, 0
        return len(sizes), sum(sizes)

    def put(self, batch_id: int, outputs: list[Any], data: bytes | None = None) -> None:
        if self.folder is None:
            self._memory[batch_id] = list(outputs)
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"batch-{batch_id}.jsonl").unlink(missing_ok=True)  # a replayed batch: counted once
        temp = self.folder / f".batch-{batch_id}.tmp"
        temp.write_bytes(data if data is not None else self.encode(outputs))
        temp.replace(self.folder / f"batch-{batch_id}.jsonl")  # a replayed batch replaces its own file

    def batches(self) -> list[tuple[int, list[Any]]]:
        if self.folder is None:
            return sorted(self._memory.items())
        if not self.folder.is_dir():
            return []
        found = sorted((int(p.stem.split("-")[1]), p) for p in self.folder.glob("batch-*.jsonl"))
        return [(batch_id, [_spooled(json.loads(line)) for line in p.read_text().splitlines()])
                for batch_id, p in found]

    def drop(self, batch_id: int) -> None:
        self._memory.pop(batch_id, None)
        if self.folder is not None:
            (self.folder / f"batch-{batch_id}.jsonl").unlink(missing_ok=True)


class StreamWriter:
    """foreachBatch target of a stream: each query's outputs to that query's `BatchWriter`.

    A query fails alone: when its evaluation raised in a shard ("error"
    outputs) or its sinks failed, `failed` names it with a one-line reason and
    the stream's other queries go on."""

    def __init__(self, writers: dict[str, BatchWriter]) -> None:
        self.writers = writers
        # query -> shard -> bytes, as last reported: written by the batch (one thread), read by the
        # service's requests (others), which copy a query's entry before they add it up
        self._state: dict[str, dict[int, int]] = {}
        self.time_kinds: dict[str, str] = {}  # query -> "seconds" or "timestamp", once a shard knows it
        self.errors: dict[str, str] = {}  # queries whose evaluation failed -> the first reason
        self.halted: SpoolFull | None = None  # what stopped the stream: a failed query's spool is full
        self.live: LiveSet | None = None  # the stream's query set, when it takes changes without a restart
        self.types: dict[str, Any] = {}  # the input's column types (`bind`), for writers added later

    @property
    def failed(self) -> dict[str, str]:
        """Queries that failed in this run (evaluation or sinks) -> one-line reason."""
        out = {name: w.failed for name, w in self.writers.items() if w.failed is not None}
        return {**out, **self.errors}

    def replay(self, spark: SparkSession) -> None:
        """Deliver what failed sinks kept in their spools in an earlier run."""
        for writer in self.writers.values():
            writer.replay(spark)

    def bind(self, events: DataFrame) -> None:
        """The stream's input, as it starts: its column types give Delta tables their types."""
        self.types = column_types(events)
        for writer in self.writers.values():
            writer.bind(self.types)

    def state_bytes(self, name: str) -> int:
        """The bytes a query's state takes over all shards (as each shard last reported)."""
        return sum(dict(self._state.get(name, {})).values())

    def knows(self, name: str) -> bool:
        """Whether a shard reported the query's state in this run."""
        return name in self._state

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        outputs = collected(batch.select(*Output._fields))
        writers = dict(self.writers)  # as they are now: a query-set change may add one meanwhile
        by_query: dict[str, list[Any]] = {name: [] for name in writers}
        taken = 0  # the newest query-set version this batch's shards took (`operator._moved`)
        for o in outputs:
            if o.kind == "control":
                taken = max(taken, int(o.payload))
            elif o.kind == "state":
                state = json.loads(o.payload)
                self._state.setdefault(o.query, {})[state["shard"]] = state["bytes"]
                if state["time_kind"]:
                    self.time_kinds[o.query] = state["time_kind"]
                if "typed" in state and o.query in writers:
                    writers[o.query].saw(state["typed"], state["other_types"])
                if "engine" in state and o.query in writers:
                    writers[o.query].ran_on(*state["engine"])
            elif o.kind == "error":
                if o.query not in self.errors:
                    log.error("[%s] batch %d: the query failed, the stream's other queries go on: %s",
                              o.query, batch_id, o.payload)
                self.errors.setdefault(o.query, o.payload)
            elif o.query in by_query:
                by_query[o.query].append(o)
            else:  # a query no longer on the stream (deleted while the batch ran)
                log.info("[%s] batch %d: %s output of a query no longer on the stream, not delivered", o.query,
                         batch_id, o.kind)
        running = set(self.live.queries.names) if self.live is not None else set(writers)
        for name, writer in writers.items():
            if name not in running and not by_query[name]:  # stopped by a change: nothing more for it
                continue
            state = self.state_bytes(name) if self.knows(name) else None
            try:
                writer.deliver(batch.sparkSession, batch_id, by_query[name], state)
            except SpoolFull as exc:
                log.error("%s", exc)
                self.halted = exc
                raise
        if taken and self.live is not None:  # every shard runs with `taken` now, a replay of this batch too
            self.live.sets.prune(taken)


Started = list[tuple[StreamingQuery, StreamWriter]]  # a pipeline's streams with their writers


def start(spark: SparkSession, cfg: PipelineConfig) -> Started:
    """Start one streaming query per source; return them with their writers."""
    cfg = cfg.compile()  # each query once, here where the run begins (itself for a compiled pipeline)
    started = []
    for stream in streams(cfg):
        checkpoint = Path(cfg.checkpoint) / stream.name
        writer = StreamWriter({q.name: BatchWriter(q, checkpoint=checkpoint / "queries" / q.name)
                               for q in stream.queries})
        trigger_s = None if cfg.once else cfg.trigger_interval_s
        query = start_stream(read_source(spark, stream.source), stream.query_set(), writer, checkpoint,
                             shards=cfg.shards, once=cfg.once, trigger_interval_s=trigger_s, name=stream.name,
                             operator=cfg.operator, confine=confined(stream.source))
        started.append((query, writer))
    return started


def confined(src: SourceConfig) -> str | None:
    """The folder a file source's rows must come from (links out of it are not read), or None."""
    return src.path if src.format in ("jsonl", "parquet") and src.path else None


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
    out = stream_outputs(events, queries, layout=layout, confine=confine, control=control)
    ws = out.writeStream.foreachBatch(writer).option("checkpointLocation", str(checkpoint)).queryName(name)
    if once:
        ws = ws.trigger(availableNow=True)
    elif trigger_interval_s:
        ws = ws.trigger(processingTime=f"{trigger_interval_s} seconds")
    query = ws.start()
    log.info("started stream %s: %s", name, ", ".join(queries.names))
    return query


def run(cfg: PipelineConfig, spark: SparkSession | None = None, echo: Any = print) -> dict[str, dict[str, Any]]:
    """Run the pipeline until it ends (`once`) or is interrupted; report
    progress; the rows and dead letters written, per query."""
    started, _ = drive(spark or session_for(cfg), cfg, echo)
    return counts(started)


def session_for(cfg: PipelineConfig) -> SparkSession:
    """A session on the pipeline's master with the Spark packages its sources and sinks need."""
    from greta_stream.spark.session import get_session

    needs = packages(cfg)
    return get_session(cfg.master, kafka="kafka" in needs, delta="delta" in needs)


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
        for p in q.recentProgress:
            if p["batchId"] > seen.get(name, -1):
                seen[name] = p["batchId"]
                echo(progress_line(labels.get(name, name), json.loads(json.dumps(p, default=str)), writer.time_kinds.values(),
                                   [w.lateness_s for w in writer.writers.values()],
                                   {n: w.engine_text for n, w in writer.writers.items()}))
