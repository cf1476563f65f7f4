"""Raw records -> validated `Event`s, or dead letters with a reason.

SEMANTICS.md sections 1 and 6: an event needs a type and a time; an event of
a pattern type must carry every attribute that a predicate, partition or
aggregate of an alias of its type needs, and aggregated attributes must be
numbers (finite: a SUM over inf or NaN has no exact value). Anything else is
skipped, counted and dead-lettered; nothing raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.timebase import TimeError, parse_time


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
    """An input record that was not processed, and why."""

    reason: str
    record: Any
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "detail": self.detail, "event": self.record}


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
            return DeadLetter(problem[0], record, problem[1])
        eid = record.get(n.id)
        return Event(t, etype, position if eid is None else eid, record)

    def _attr_problem(self, etype: str, record: dict[str, Any]) -> tuple[str, str] | None:
        needed = self.needed.get(etype)
        if not needed:
            return None
        for attr in sorted(needed):
            if record.get(attr) is None:
                return "missing_attribute", f"{etype} events need attribute {attr!r}"
        for attr in sorted(self.numeric[etype]):
            v = record[attr]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return "wrong_type", f"attribute {attr!r} must be a number, got {type(v).__name__}"
            if isinstance(v, float) and not math.isfinite(v):
                return "wrong_type", f"attribute {attr!r} must be a finite number, got {v!r}"
        for attr in sorted(self.partition_attrs[etype]):
            v = record[attr]
            if isinstance(v, (list, dict)) or (isinstance(v, float) and math.isnan(v)):
                return "wrong_type", f"partition attribute {attr!r} must be a scalar value, got {v!r}"
        return None
