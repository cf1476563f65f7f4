"""The foreachBatch targets of a pipeline's streams: `StreamWriter` takes a stream's micro-batch and
hands each query's outputs to that query's `BatchWriter`, which writes them to its sinks (or keeps them
in its `Spool` while they fail). Part of `greta_stream.spark.pipeline`, which names them too."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from greta_stream.connectors.jsonl import loads
from greta_stream.engine import DeadLetter
from greta_stream.errors import SpoolFull
from greta_stream.pipeline.model import QueryConfig
from greta_stream.runtime.dead_letters import DeadLetters, name_problems
from greta_stream.runtime.multi import one_line
from greta_stream.spark.cet_distributed import expand_outputs
from greta_stream.spark.control import LiveSet
from greta_stream.spark.formats import make_sink
from greta_stream.spark.sinks import Sink, SinkBatch, SinkPlace
from greta_stream.spark.spool import Output, Spool, collected
from greta_stream.spark.typed import column_types

log = logging.getLogger("greta_stream.pipeline")


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
        # by window, then group: two windows whose starts round to one float are told apart by their ends
        rows = sorted((o for o in outputs if o.kind in ("row", "deferred")),
                      key=lambda o: (o.window_start, o.window_end, o.grp))
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
                self.dead_letters.add(DeadLetter.from_dict(loads(o.payload)))
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
