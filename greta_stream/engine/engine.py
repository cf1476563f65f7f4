"""The GRETA engine: buffer events, process them in time order, emit rows.

Call order:

    engine = Engine(query)              # compiled once
    engine.add(record)                  # any order; bad or late -> dead letter
    rows = engine.advance(watermark)    # events before the watermark are final:
                                        # process them in time order, report
                                        # every window that ends at or before it
    rows = engine.finish()              # end of input: report every window
    blob = engine.snapshot()            # state as bytes; Engine.restore(query, blob)

Results do not depend on arrival order or on where the watermark advances
(docs/QUERY_LANGUAGE.md section 6). Partitions roll up to GROUP-BY groups here.

A snapshot holds the graph (its partitions) whole; where a chunk store is
open (the incremental Spark operator, `greta_stream.engine.chunks`) it holds
a base (the whole snapshot, taken every BASE_EVERY micro-batches) and the
events accepted since, one chunk per micro-batch written once, and a
restore loads the base and replays them (`Logged`): a micro-batch writes
its own events and, every BASE_EVERY, the graph.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Iterable
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery, compile_query
from greta_stream.engine.chunks import BaseChunk, EventLog, dumps, loads, store_closed, store_open
from greta_stream.engine.ingest import DeadLetterSink, Event, FieldNames, Front, Fronted, WatermarkOf
from greta_stream.engine.partition import Partition
from greta_stream.engine.plan import GraphPlan, Metrics
from greta_stream.engine.rows import RowFinisher, SumColumn
from greta_stream.engine.timebase import Timebase
from greta_stream.engine.values import FLOAT_BITS
from greta_stream.errors import SnapshotError

SNAPSHOT_FORMAT = 3  # 2: packed vertex aggregates (lanes.py); 3: cells of whole bytes
LOGGED_FORMAT = "log-2"  # a base (the whole snapshot) and the events accepted since, replayed on restore


BASE_EVERY = 16  # micro-batches between two bases of a logged runner: a restore replays at most this many


class Logged(Fronted):
    """A runner that logs its accepted events (`EventLog`) and, where a chunk
    store is open, snapshots as a base (its whole snapshot, taken every
    BASE_EVERY snapshots) and the log of the events accepted since: the
    general engine and CET extraction. A restore loads the base and replays
    the log up to the saved watermark."""

    log: EventLog
    plan: Any
    metrics: Metrics
    _base: BaseChunk | None = None  # the latest base (None: take one at the next logged snapshot)
    _base_age: int = 0  # logged snapshots since it

    def _settled(self, events: list[Any]) -> None:
        """Log the events the front buffered at the end of a batch (`Front.settle`)."""
        self.log.fresh += events
        if events and self.plan is None:
            self.plan = self._plan()

    def _logged(self, accepted: bool) -> bool:
        """Log the event the front just buffered (when `accepted`)."""
        if accepted:
            self.log.fresh.append(self.front.buffer[-1])
        return accepted

    def _pruned(self, target: int | None) -> None:
        """After a micro-batch: its events become a chunk; chunks no open window needs go."""
        self.log.seal()
        if self.plan is not None:
            self.log.prune(self.plan.tb.last_window, target)

    def _log_state(self) -> dict[str, Any] | None:
        """What a logged snapshot holds of the runner (None: no chunk store open: snapshot it whole)."""
        if not store_open():
            return None
        self.log.seal()
        if self._base is None or self._base_age >= BASE_EVERY:
            with store_closed():
                whole = self.snapshot()
            self._base, self._base_age = BaseChunk(whole), 0
            self.log.chunks = []  # the base holds everything so far, the buffer too
        self._base_age += 1
        front = self.front.state()
        del front["buffer"]  # in the base, or in the log
        return {"format": LOGGED_FORMAT, **front, "base": self._base, "base_age": self._base_age,
                "log": list(self.log.chunks), "metrics": dict(self.metrics)}

    def _resume(self, state: dict[str, Any]) -> list[Event]:
        """Restored from a logged snapshot's base (its whole snapshot): replay the log up to the
        saved watermark (the rows of windows reported before are dropped), then the front and the
        metrics as saved. Returns the replayed events."""
        self.log.chunks = list(state["log"])
        events = self.log.events()
        self.front.validator.time_kind = state["time_kind"]  # the log's events may have fixed it since the base
        if self.plan is None and state["time_kind"] is not None:
            self.plan = self._plan()
        self.front.buffer.extend(events)
        self._replaying(events)
        if state["watermark"] > self.front.watermark:
            self.advance(state["watermark"])
        self.front.watermark, self.front.late_before = state["watermark"], state["late_before"]
        self.front.position = state["position"]
        self.metrics.clear()
        self.metrics.update(state["metrics"])
        self._base, self._base_age = state["base"], state["base_age"]
        return events

    def _replaying(self, events: list[Event]) -> None:
        """Hook: the events about to be replayed (CET's counter takes them too)."""

    def snapshot(self) -> bytes:
        raise NotImplementedError

    def _plan(self) -> Any:
        raise NotImplementedError

    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        raise NotImplementedError


class Engine(Logged):
    """Aggregates event trends of one query over a stream of records (a runner:
    `greta_stream.runtime.runner.Runner`)."""

    def __init__(
        self,
        query: str | CompiledQuery,
        *,
        fields: FieldNames = FieldNames(),
        dead_letter: DeadLetterSink | None = None,
    ) -> None:
        self.cq = compile_query(query)
        self.fields = fields
        self.metrics = Metrics()
        self.front = Front(self.cq, fields, self.metrics, dead_letter)
        self.plan: GraphPlan | None = None
        self.partitions: dict[tuple[Any, ...], Partition] = {}
        self._pending: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
        cq = self.cq
        self._group_at = [cq.common.index(g) for g in cq.group_by]
        self.log = EventLog()

    # -------------------------------------------------------------- input
    def add(self, record: Any) -> None:
        """Validate one record and buffer it; bad and late ones are dead-lettered."""
        if self._logged(self.front.add(record)) and self.plan is None:
            self.plan = self._plan()

    def add_many(self, records: Iterable[Any], watermark_of: WatermarkOf | None = None) -> None:
        """`add` each record (a DataFrame: each row); see `Front.add_many` for `watermark_of`."""
        self._settled(self.front.add_many(_records(records), watermark_of, self.add))

    def expect(self, watermark: Any) -> None:
        """Declare events before `watermark` late from now on, without processing.

        A streaming source calls this with its watermark before adding the
        records of a micro-batch, so lateness does not depend on when this
        engine last ran. Processing happens in `advance`.
        """
        self.front.expect(watermark)

    def _plan(self) -> GraphPlan:
        w = self.cq.window
        return GraphPlan(self.cq, Timebase.create(self.front.time_kind or "seconds", w.within, w.slide), self.metrics)

    # --------------------------------------------------------- processing
    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        """Process buffered events before `watermark`; rows of windows ending by it."""
        if watermark <= self.front.watermark:
            return []
        ready = self.front.release(watermark)
        plan = self.plan
        if plan is None:
            return []
        ready.sort(key=lambda e: e.time)
        by_partition: dict[tuple[Any, ...], list[Event]] = {}
        common = self.cq.common
        for ev in ready:
            key = tuple(ev.attrs[a] for a in common)
            by_partition.setdefault(key, []).append(ev)
        for key, events in by_partition.items():
            part = self.partitions.get(key)
            if part is None:
                part = self.partitions[key] = Partition(key)
            part.process(plan, events, self._group(key), self._emit)
        target = None if watermark == math.inf else plan.tb.first_window(watermark)
        for key in list(self.partitions):
            part = self.partitions[key]
            part.close_until(plan, target, self._group(key), self._emit)
            if part.empty:
                del self.partitions[key]
        self._pruned(target)
        self.metrics["events_processed"] = self.metrics.get("events_processed", 0) + len(ready)
        self.metrics["partitions"] = len(self.partitions)
        return self._rows()

    @property
    def idle(self) -> bool:
        """Nothing buffered and no partition state: safe to drop entirely."""
        return not self.buffer and not self.partitions

    def next_window_end(self) -> Any:
        """End of the first window not yet reported (after the watermark), or None."""
        if self.plan is None or self.idle or self.watermark == math.inf:
            return None
        tb = self.plan.tb
        if self.watermark == -math.inf:
            first = self.front.first_time()
            return None if first is None else tb.end(tb.first_window(first))
        return tb.end(tb.first_window(self.watermark))

    def finish(self) -> list[dict[str, Any]]:
        """End of input: process everything and report every window."""
        return self.advance(math.inf)

    def _group(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(key[i] for i in self._group_at)

    def _emit(self, k: int, group: tuple[Any, ...], acc: list[Any]) -> None:
        assert self.plan is not None
        slot = self._pending.get((k, group))
        if slot is None:
            self._pending[(k, group)] = acc
        else:
            self.plan.combine(slot, acc)

    def _rows(self) -> list[dict[str, Any]]:
        pending, self._pending = self._pending, {}
        # window (its index k: two windows' bounds can print alike past float64's
        # precision), then group
        items = sorted(((k, g, acc) for (k, g), acc in pending.items() if acc[0]),
                       key=lambda item: (item[0], tuple(group_order(v) for v in item[1])))
        rows = self._finished(items) if items else []
        self.metrics.inc("rows_emitted", len(rows))
        return rows

    def _finished(self, items: list[tuple[int, tuple[Any, ...], list[Any]]]) -> list[dict[str, Any]]:
        """Rows of (window, group, aggregate slots), through the one row finisher."""
        plan = self.plan
        assert plan is not None
        slot_of = plan.slot_of
        accs = [acc for _, _, acc in items]

        def slot(field: int) -> list[Any]:
            return [acc[slot_of[field]] for acc in accs]

        def exact_sum(field: int) -> SumColumn:  # three slots: int sum, float sum in 2**-1074 units, any float
            v = slot_of[field]
            return SumColumn([((a[v] << FLOAT_BITS) + a[v + 1]) if a[v + 2] else a[v] for a in accs],
                             [FLOAT_BITS if a[v + 2] else 0 for a in accs], [bool(a[v + 2]) for a in accs])

        return RowFinisher(self.cq, plan.tb).rows([k for k, _, _ in items], [g for _, g, _ in items],
                                                  [acc[0] for acc in accs], slot, exact_sum, slot)

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """Engine state as bytes (format-versioned, tied to the query text): its
        log where a chunk store is open, else its graph (module docstring)."""
        logged = self._log_state()
        if logged is not None:
            return dumps({**logged, "query": fingerprint(self.cq)})
        state = {
            "format": SNAPSHOT_FORMAT,
            "query": fingerprint(self.cq),
            **self.front.state(),
            "partitions": self.partitions,
            "metrics": dict(self.metrics),
        }
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, query: str | CompiledQuery, data: bytes, **kwargs: Any) -> Engine:
        """An engine that continues exactly where `snapshot()` left off."""
        engine = cls(query, **kwargs)
        state = load_snapshot(data, SNAPSHOT_FORMAT, fingerprint(engine.cq), "engine")
        if state["format"] == LOGGED_FORMAT:
            engine = cls.restore(query, state["base"].whole, **kwargs)
            engine._resume(state)
            return engine
        engine.front.load(state)
        engine.partitions = state["partitions"]
        engine.metrics.update(state["metrics"])
        if engine.front.time_kind is not None:
            engine.plan = engine._plan()
        return engine


def _records(records: Iterable[Any]) -> Iterable[Any]:
    """Records from dicts, or from a DataFrame's rows (NaN, None and NaT missing)."""
    if hasattr(records, "to_dict") and hasattr(records, "columns"):
        from greta_stream.engine.columnar.columns import frame_records

        return frame_records(records)
    return records


def load_snapshot(data: bytes, fmt: int, fingerprint: str, what: str, of: str = "query") -> dict[str, Any]:
    """The state dict of a snapshot, checked: readable, format `fmt` (or a
    logged one, `Logged`), made for the query (and options) of
    `fingerprint`; else `SnapshotError`."""
    try:
        state = loads(data)  # our own state store's bytes, its chunks from the open store
    except Exception as exc:  # noqa: BLE001
        raise SnapshotError(f"cannot read {what} state: {exc}") from exc
    if not isinstance(state, dict) or state.get("format") not in (fmt, LOGGED_FORMAT):
        raise SnapshotError(f"unsupported {what} state format {state.get('format') if isinstance(state, dict) else '?'}")
    if state["query"] != fingerprint:
        raise SnapshotError(f"{what} state belongs to a different {of}")
    return state


def fingerprint(cq: CompiledQuery) -> str:
    """A short hash of the query (as formatted): snapshots are tied to it."""
    from greta_stream.compiler.compiled import format_query

    return hashlib.sha256(format_query(cq.query).encode()).hexdigest()[:16]


def group_order(value: Any) -> tuple[int, Any]:
    """Numbers sort together (0 before 1.0), then strings, then anything else."""
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))
