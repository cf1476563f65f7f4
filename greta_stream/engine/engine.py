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
(SEMANTICS.md section 6). Partitions roll up to GROUP-BY groups here.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Callable, Iterable
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery, compile_query
from greta_stream.engine.ingest import DeadLetter, Event, FieldNames, Validator
from greta_stream.engine.partition import Partition
from greta_stream.engine.plan import Metrics, Plan
from greta_stream.engine.timebase import Timebase
from greta_stream.engine.values import avg_result, sum_result
from greta_stream.errors import SnapshotError

SNAPSHOT_FORMAT = 3  # 2: packed vertex aggregates (lanes.py); 3: cells of whole bytes

DeadLetterSink = Callable[[DeadLetter], None]


class Engine:
    """Aggregates event trends of one query over a stream of records."""

    def __init__(
        self,
        query: str | CompiledQuery,
        *,
        fields: FieldNames = FieldNames(),
        dead_letter: DeadLetterSink | None = None,
    ) -> None:
        self.cq = compile_query(query)
        self.fields = fields
        self.validator = Validator(self.cq, fields)
        self.dead_letter = dead_letter
        self.metrics = Metrics()
        self.plan: Plan | None = None
        self.partitions: dict[tuple[Any, ...], Partition] = {}
        self.buffer: list[Event] = []
        self.watermark: Any = -math.inf  # events before it were processed (or are late)
        self.late_before: Any = -math.inf  # declared by `expect`; events before it are late
        self.position = 0
        self._pending: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
        cq = self.cq
        self._group_at = [cq.common.index(g) for g in cq.group_by]

    # -------------------------------------------------------------- input
    def add(self, record: Any) -> None:
        """Validate one record and buffer it; bad and late ones are dead-lettered."""
        position = self.position
        self.position += 1
        self.metrics.inc("events_in")
        result = self.validator.validate(record, position)
        if isinstance(result, DeadLetter):
            self.reject(result)
            return
        if result.type not in self.cq.by_type:
            self.metrics.inc("events_other_type")  # ignored whatever its time: nothing is lost
            return
        late_before = max(self.watermark, self.late_before)
        if result.time < late_before:
            self.reject(DeadLetter("late", record, f"time {result.time} is behind the watermark {late_before}"))
            return
        if self.plan is None:
            w = self.cq.window
            tb = Timebase.create(self.validator.time_kind or "seconds", w.within, w.slide)
            self.plan = Plan(self.cq, tb, self.metrics)
        self.buffer.append(result)

    def add_many(self, records: Iterable[Any]) -> None:
        for r in records:
            self.add(r)

    def reject(self, dl: DeadLetter) -> None:
        """Count a record that is not processed and hand it to the dead-letter sink."""
        self.metrics.dead_letter(dl.reason)
        if self.dead_letter is not None:
            self.dead_letter(dl)

    # --------------------------------------------------------- processing
    def advance(self, watermark: Any) -> list[dict[str, Any]]:
        """Process buffered events before `watermark`; rows of windows ending by it."""
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        plan = self.plan
        if plan is None:
            return []
        ready = [e for e in self.buffer if e.time < watermark]
        if len(ready) == len(self.buffer):
            self.buffer = []
        else:
            self.buffer = [e for e in self.buffer if e.time >= watermark]
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
        self.metrics["events_processed"] = self.metrics.get("events_processed", 0) + len(ready)
        self.metrics["partitions"] = len(self.partitions)
        return self._rows()

    def expect(self, watermark: Any) -> None:
        """Declare events before `watermark` late from now on, without processing.

        A streaming source calls this with its watermark before adding the
        records of a micro-batch, so lateness does not depend on when this
        engine last ran. Processing happens in `advance`.
        """
        self.late_before = max(self.late_before, watermark)

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
            first = min(e.time for e in self.buffer) if self.buffer else None
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
        rows = [self._row(k, g, acc) for (k, g), acc in pending.items() if acc[0]]
        rows.sort(key=_row_order(self.cq))
        self.metrics.inc("rows_emitted", len(rows))
        return rows

    def _row(self, k: int, group: tuple[Any, ...], acc: list[Any]) -> dict[str, Any]:
        tb = self.plan.tb  # type: ignore[union-attr]
        row: dict[str, Any] = {"window_start": tb.export(tb.start(k)), "window_end": tb.export(tb.end(k))}
        row.update(zip(self.cq.group_columns, group))
        slot_of = self.plan.slot_of  # type: ignore[union-attr]
        for out in self.cq.outputs:
            if out.count_field is None:
                row[out.column] = acc[0]
                continue
            count = acc[slot_of[out.count_field]]
            if out.func == "COUNT":
                row[out.column] = count
                continue
            v = slot_of[out.value_field]  # type: ignore[index]
            if out.func == "SUM":
                row[out.column] = sum_result(acc[v], acc[v + 1], acc[v + 2])
            elif out.func == "AVG":
                row[out.column] = avg_result(acc[v], acc[v + 1], acc[v + 2], count)
            else:
                row[out.column] = acc[v]
        return row

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """Engine state as bytes (format-versioned, tied to the query text)."""
        state = {
            "format": SNAPSHOT_FORMAT,
            "query": _fingerprint(self.cq),
            "time_kind": self.validator.time_kind,
            "watermark": self.watermark,
            "late_before": self.late_before,
            "position": self.position,
            "buffer": self.buffer,
            "partitions": self.partitions,
            "metrics": dict(self.metrics),
        }
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, query: str | CompiledQuery, data: bytes, **kwargs: Any) -> Engine:
        """An engine that continues exactly where `snapshot()` left off."""
        engine = cls(query, **kwargs)
        state = load_snapshot(data, SNAPSHOT_FORMAT, _fingerprint(engine.cq), "engine")
        engine.validator.time_kind = state["time_kind"]
        engine.watermark = state["watermark"]
        engine.late_before = state["late_before"]
        engine.position = state["position"]
        engine.buffer = state["buffer"]
        engine.partitions = state["partitions"]
        engine.metrics.update(state["metrics"])
        if engine.validator.time_kind is not None:
            w = engine.cq.window
            engine.plan = Plan(engine.cq, Timebase.create(engine.validator.time_kind, w.within, w.slide), engine.metrics)
        return engine


def add_declared(engine: Any, records: Iterable[Any], watermark_of: Callable[[str | None], Any] | None) -> None:
    """`engine.add` every record (an `Engine` or a `TrendExtractor`). A stream
    declares its watermark before the first valid event fixes the time unit;
    when one does, `watermark_of(unit)` is declared again in that unit."""
    kind = engine.validator.time_kind
    for rec in records:
        engine.add(rec)
        if watermark_of is not None and engine.validator.time_kind != kind:
            kind = engine.validator.time_kind
            engine.expect(watermark_of(kind))


def load_snapshot(data: bytes, fmt: int, fingerprint: str, what: str, of: str = "query") -> dict[str, Any]:
    """The state dict of a snapshot, checked: readable, format `fmt`, made
    for the query (and options) of `fingerprint`; else `SnapshotError`."""
    try:
        state = pickle.loads(data)  # noqa: S301 - our own state store's bytes
    except Exception as exc:  # noqa: BLE001
        raise SnapshotError(f"cannot read {what} state: {exc}") from exc
    if not isinstance(state, dict) or state.get("format") != fmt:
        raise SnapshotError(f"unsupported {what} state format {state.get('format') if isinstance(state, dict) else '?'}")
    if state["query"] != fingerprint:
        raise SnapshotError(f"{what} state belongs to a different {of}")
    return state


def _fingerprint(cq: CompiledQuery) -> str:
    from greta_stream.compiler.compiled import format_query

    return hashlib.sha256(format_query(cq.query).encode()).hexdigest()[:16]


def _row_order(cq: CompiledQuery) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    cols = cq.group_columns

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["window_start"], tuple(_group_order(row[c]) for c in cols))

    return key


def _group_order(value: Any) -> tuple[int, Any]:
    """Numbers sort together (0 before 1.0), then strings, then anything else."""
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))
