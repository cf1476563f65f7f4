"""The ingest front: raw records -> validated `Event`s, or dead letters with a reason.

docs/QUERY_LANGUAGE.md sections 1 and 6: an event needs a type and a time; an event of
a pattern type must carry every attribute that a predicate, partition or
aggregate of an alias of its type needs, and aggregated attributes must be
numbers (finite: a SUM over inf or NaN has no exact value). Anything else is
skipped, counted and dead-lettered; nothing raises.

`Validator` judges one record; `Front` is what every runner (general engine,
columnar stream, CET extraction) keeps in front of its evaluation: the
validator, the stream's time kind, lateness against the watermark, the
buffer of events waiting for the watermark, and the dead-letter sink.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.plan import Metrics
from greta_stream.engine.timebase import TIMESTAMP, US_PER_S, TimeError, parse_time


@dataclass(frozen=True)
class FieldNames:
    """Names of the type, time and id fields in input records."""

    type: str = "type"
    time: str = "time"
    id: str = "id"


@dataclass
class Event:
    """A validated event: time in engine units, the attribute record, an id."""

    __slots__ = ("time", "type", "id", "attrs")
    time: int | float
    type: str
    id: Any
    attrs: dict[str, Any]


@dataclass
class DeadLetter:
    """An input record that was not processed, and why: the one schema of every dead-letter
    output (`FIELDS`: JSON lines, Kafka, Delta tables, the service's counts), written by
    `to_dict` and read back by `from_dict`. A record missing an attribute says which one,
    of which event type, as fields (`event_type`, `attribute`), not only in the detail text."""

    reason: str
    record: Any
    detail: str = ""
    event_type: str | None = None  # missing_attribute: the type whose events need `attribute`
    attribute: str | None = None

    # the columns of a dead-letter output and their Spark SQL types (`event` is the record as JSON text)
    FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("reason", "string"), ("detail", "string"), ("event", "string"), ("event_type", "string"),
        ("attribute", "string"))

    def to_dict(self) -> dict[str, Any]:
        """Its output record: reason, detail, event; event_type and attribute when it has them."""
        out = {"reason": self.reason, "detail": self.detail, "event": self.record}
        if self.event_type is not None:
            out["event_type"] = self.event_type
        if self.attribute is not None:
            out["attribute"] = self.attribute
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeadLetter:
        """The dead letter of an output record (`to_dict`'s)."""
        return cls(d["reason"], d.get("event"), d.get("detail") or "", d.get("event_type"), d.get("attribute"))

    @classmethod
    def ddl(cls) -> str:
        """The output's schema as Spark SQL DDL."""
        return ", ".join(f"{name} {kind}" for name, kind in cls.FIELDS)


class Validator:
    """Checks records against what a compiled query needs of each type."""

    def __init__(self, cq: CompiledQuery, names: FieldNames = FieldNames()) -> None:
        self.names = names
        self.needed = cq.needed_by_type
        self.numeric = cq.numeric_by_type
        self.partition_attrs = {
            t: {c for c in (*cq.common, *(rc.attr for rc in cq.run_components))} & self.needed[t]
            for t in self.needed
        }
        self.time_kind: str | None = None

    def validate(self, record: Any, position: int) -> Event | DeadLetter:
        """An `Event`, or a `DeadLetter` saying what is wrong."""
        if isinstance(record, DeadLetter):  # a reader judged it already (text that is not JSON, ...)
            return record
        if not isinstance(record, dict):
            return DeadLetter("malformed", record, "an event must be a JSON object")
        n = self.names
        etype = record.get(n.type)
        if not isinstance(etype, str) or not etype:
            return DeadLetter("missing_type", record, f"field {n.type!r} must be a non-empty string")
        if record.get(n.time) is None:
            return DeadLetter("missing_time", record, f"field {n.time!r} is missing")
        try:
            kind, t = parse_time(record[n.time])
        except TimeError as exc:
            return DeadLetter("bad_time", record, str(exc))
        if self.time_kind is None:
            self.time_kind = kind
        elif kind != self.time_kind:
            return DeadLetter("bad_time", record, f"time is a {kind} but this stream's times are {self.time_kind}")
        problem = self._attr_problem(etype, record)
        if problem:
            return problem
        eid = record.get(n.id)
        return Event(t, etype, position if eid is None else eid, record)

    def _attr_problem(self, etype: str, record: dict[str, Any]) -> DeadLetter | None:
        needed = self.needed.get(etype)
        if not needed:
            return None
        for attr in sorted(needed):
            if record.get(attr) is None:
                said = "is null" if attr in record else "is missing"
                return DeadLetter("missing_attribute", record,
                                  f"attribute {attr!r} {said} (the query needs it on {etype} events)", etype, attr)
        for attr in sorted(self.numeric[etype]):
            v = record[attr]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return DeadLetter("wrong_type", record, f"attribute {attr!r} must be a number, got {type(v).__name__}",
                                  etype, attr)
            if isinstance(v, float) and not math.isfinite(v):
                return DeadLetter("wrong_type", record, f"attribute {attr!r} must be a finite number, got {v!r}",
                                  etype, attr)
        for attr in sorted(self.partition_attrs[etype]):
            v = record[attr]
            if isinstance(v, (list, dict)) or (isinstance(v, float) and math.isnan(v)):
                return DeadLetter("wrong_type", record, f"partition attribute {attr!r} must be a scalar value, got {v!r}",
                                  etype, attr)
        return None


def future_bound(watermark: Any, max_future_s: float | None, time_kind: str | None, lateness_s: float = 0.0,
                 times: Any = (), newest: Any = -math.inf) -> Any:
    """The latest time an event may have: a step (`future_step_s`: `max_future_s`, or the
    lateness when longer) ahead of the newest time the watermark stands for (`watermark`
    plus `lateness_s`) or the stream took (`newest`), or of the newest of `times` (a
    micro-batch's) that such steps reach
    from there (`reach`); in the unit of `time_kind`; inf when either is unbounded. Counted
    from the newest time and through the batch: with a lateness that covers the stream's
    disorder, or a batch of history spanning more than `max_future_s`, no event is "future"."""
    if max_future_s is None or watermark == -math.inf:
        return math.inf
    scale = US_PER_S if time_kind == TIMESTAMP else 1
    step = future_step_s(max_future_s, lateness_s) * scale
    return reach(max(watermark + lateness_s * scale, newest), times, step) + step


def reach(top: Any, times: Any, step: Any) -> Any:
    """The newest of `times` (any order; NaN: none) that steps of at most `step` reach from
    `top` (itself when none): a time further than `step` past every time reached is no
    continuation of the stream but a jump ahead (a clock set wrong, a poison record)."""
    ahead = np.sort(times[times > top] if isinstance(times, np.ndarray) else np.array([t for t in times if t > top]))
    if not len(ahead):
        return top
    jumps = np.flatnonzero(np.diff(ahead, prepend=top) > step)
    last = int(jumps[0]) if len(jumps) else len(ahead)
    return ahead[last - 1].item() if last else top


def late_letter(record: Any, time: Any, watermark: Any) -> DeadLetter:
    return DeadLetter("late", record, f"time {time} is behind the watermark {watermark}")


def future_letter(record: Any, time: Any, bound: Any, max_future_s: float, lateness_s: float,
                  time_kind: str | None) -> DeadLetter:
    """The "future" dead letter of an event after `bound` (`future_bound`'s), worded with the newest time the
    stream reached and the step it allows."""
    step_s = future_step_s(max_future_s, lateness_s)
    newest = bound - step_s * (US_PER_S if time_kind == TIMESTAMP else 1)
    return DeadLetter("future", record, f"time {time} is more than {step_s:g} s ahead of the newest time the "
                                        f"stream reached, {newest} (max_future_s = {max_future_s:g} s, or the "
                                        f"lateness when longer: {lateness_s:g} s)")


def future_step_s(max_future_s: float, lateness_s: float) -> float:
    """How far ahead of the newest time an event may be: `max_future_s`, or the lateness when longer
    (a stream whose events may come that far behind the newest may bring that much newer ones)."""
    return max(max_future_s, lateness_s)


DeadLetterSink = Callable[[DeadLetter], None]
WatermarkOf = Callable[[str | None], Any]


OTHER_TYPES_KEPT = 50  # names of other event types a front remembers


class Front:
    """Validation, time kind, lateness, watermark buffer and dead letters of one runner.

    Lateness (docs/QUERY_LANGUAGE.md section 6): an event of a pattern type before the
    watermark the runner has processed up to, or before the watermark a
    driver declared with `expect`, is dead-lettered as "late". Once there is
    a watermark, an event more than `max_future_s` ahead of it (None: no
    bound) is dead-lettered as "future": it is not kept, so it holds back
    no window and moves nothing. Events of other types are counted and
    ignored, whatever their time.
    """

    def __init__(self, cq: CompiledQuery, fields: FieldNames, metrics: Metrics,
                 dead_letter: DeadLetterSink | None = None) -> None:
        self.types = cq.by_type
        self.fields = fields
        self.validator = Validator(cq, fields)
        self.metrics = metrics
        self.dead_letter = dead_letter
        self.watermark: Any = -math.inf  # events before it were processed (or are late)
        self.late_before: Any = -math.inf  # declared by `expect`
        self.position = 0  # records seen: the id of a record without one
        self.buffer: list[Event] = []  # valid events waiting for the watermark
        self.max_future_s: float | None = None  # a setting of the run (RunSpec), not state
        self.lateness_s = 0.0  # the run's lateness (RunSpec): the watermark stands for the newest time less it
        self.other_types: Counter[str] = Counter()  # events of types the query has not, by type (some names)
        self.typed: Counter[str] = Counter()  # events of the query's types (valid or refused), by type
        self.held: list[tuple[Any, Event]] = []  # a batch's events ahead of the stream, until the batch is read
        self.newest: Any = -math.inf  # the newest time buffered in this process (not state: the watermark is)
        self.in_batch = False

    @property
    def time_kind(self) -> str | None:
        return self.validator.time_kind

    @property
    def late_bound(self) -> Any:
        """Events of a pattern type before this are late."""
        return max(self.watermark, self.late_before)

    @property
    def future_bound(self) -> Any:
        """Events of a pattern type after this are "future" (inf: no bound yet)."""
        return future_bound(self.late_bound, self.max_future_s, self.time_kind, self.lateness_s, newest=self.newest)

    def expect(self, watermark: Any) -> None:
        self.late_before = max(self.late_before, watermark)

    def admit(self, record: Any) -> Event | None:
        """The valid, timely event of a pattern type in `record`, or None (dead-lettered or ignored)."""
        position = self.position
        self.position += 1
        self.metrics.inc("events_in")
        result = self.validator.validate(record, position)
        if isinstance(result, DeadLetter):
            if result.event_type is not None:
                self.typed[result.event_type] += 1
            self.reject(result)
            return None
        if result.type not in self.types:
            self.metrics.inc("events_other_type")  # ignored whatever its time: nothing is lost
            self.saw_others({result.type: 1})
            return None
        self.typed[result.type] += 1
        late_before = self.late_bound
        if result.time < late_before:
            self.reject(late_letter(record, result.time, late_before))
            return None
        if result.time > self.future_bound:
            if self.in_batch:  # the rest of the batch may reach it (`settle`)
                self.held.append((record, result))
            else:
                self.reject(self._future(record, result, self.future_bound))
            return None
        return result

    def saw_others(self, counts: dict[str, int]) -> None:
        """Count events of types the query has not (the first OTHER_TYPES_KEPT names), to say
        what a query whose types match no event should have said (`runtime.dead_letters.name_problems`)."""
        for name, n in counts.items():
            if name in self.other_types or len(self.other_types) < OTHER_TYPES_KEPT:
                self.other_types[name] += n

    def add(self, record: Any) -> bool:
        """Buffer the event of `record`; False when it was dead-lettered or ignored."""
        event = self.admit(record)
        if event is None:
            return False
        self.buffer.append(event)
        if event.time > self.newest:
            self.newest = event.time
        return True

    def add_many(self, records: Iterable[Any], watermark_of: WatermarkOf | None = None,
                 add: Callable[[Any], Any] | None = None) -> list[Event]:
        """`add` (default: this front's) every record. A driver that declares
        its watermark before the first valid event fixes the time unit gives
        `watermark_of(unit)`: declared again in that unit once it is known.
        Events too far ahead of the stream are held until the batch is read
        (`settle`); those its other times reach are buffered last and returned
        (for the runner's log), the others dead-lettered as "future"."""
        add = add or self.add
        kind = self.validator.time_kind
        self.in_batch = True
        try:
            for rec in records:
                add(rec)
                if watermark_of is not None and self.validator.time_kind != kind:
                    kind = self.validator.time_kind
                    self.expect(watermark_of(kind))
        finally:
            self.in_batch = False
        return self.settle()

    def settle(self) -> list[Event]:
        """The batch's held events: buffered where steps of at most `max_future_s` through the
        batch's times reach them from the newest time (`future_bound`), else dead-lettered as
        "future", in arrival order; the buffered ones."""
        held, self.held = self.held, []
        if not held:
            return []
        bound = future_bound(self.late_bound, self.max_future_s, self.time_kind, self.lateness_s,
                             [e.time for _, e in held], self.newest)
        admitted = []
        for record, event in held:
            if event.time <= bound:
                self.buffer.append(event)
                admitted.append(event)
                self.newest = max(self.newest, event.time)
            else:
                self.reject(self._future(record, event, bound))
        return admitted

    def _future(self, record: Any, event: Event, bound: Any) -> DeadLetter:
        assert self.max_future_s is not None
        return future_letter(record, event.time, bound, self.max_future_s, self.lateness_s, self.time_kind)

    def reject(self, dl: DeadLetter, *, counted: bool = False) -> None:
        """Count a record that is not processed (unless `counted`) and hand it to the dead-letter sink."""
        if not counted:
            self.metrics.dead_letter(dl.reason)
        if self.dead_letter is not None:
            self.dead_letter(dl)

    def release(self, watermark: Any) -> list[Event]:
        """Move the watermark on; the buffered events before it, in arrival order."""
        self.watermark = watermark
        ready = [e for e in self.buffer if e.time < watermark]
        self.buffer = [e for e in self.buffer if e.time >= watermark] if len(ready) < len(self.buffer) else []
        return ready

    def first_time(self) -> Any:
        """The earliest buffered time, or None."""
        return min(e.time for e in self.buffer) if self.buffer else None

    def state(self) -> dict[str, Any]:
        """What a snapshot keeps of the front (the keys runners' snapshots have always used)."""
        return {"time_kind": self.validator.time_kind, "watermark": self.watermark, "late_before": self.late_before,
                "position": self.position, "buffer": self.buffer}

    def load(self, state: dict[str, Any]) -> None:
        self.validator.time_kind = state["time_kind"]
        self.watermark, self.late_before = state["watermark"], state["late_before"]
        self.position, self.buffer = state["position"], state["buffer"]


class Fronted:
    """The members of a runner that reads its input through a `Front`
    (`self.front`), as the front has them: the engine, the columnar stream
    and the CET extractor share these (each may override one)."""

    front: Front

    @property
    def validator(self) -> Validator:
        return self.front.validator

    @property
    def time_kind(self) -> str | None:
        return self.front.time_kind

    @property
    def watermark(self) -> Any:
        return self.front.watermark

    @property
    def other_types(self) -> dict[str, int]:
        """Events of types the query has not, by type (some names)."""
        return dict(self.front.other_types)

    @property
    def typed(self) -> dict[str, int]:
        """Events of the query's types (valid or refused), by type."""
        return dict(self.front.typed)

    @property
    def buffer(self) -> list[Event]:
        return self.front.buffer

    @property
    def dead_letter(self) -> DeadLetterSink | None:
        return self.front.dead_letter

    @dead_letter.setter
    def dead_letter(self, sink: DeadLetterSink | None) -> None:
        self.front.dead_letter = sink

    def reject(self, dl: DeadLetter) -> None:
        """Count a record that is not processed and hand it to the dead-letter sink."""
        self.front.reject(dl)
