"""The sharing planner: which queries of a stream are evaluated together.

`plan_units(queries)` cuts a `QuerySet` into *units*, each evaluated by one
piece of work per micro-batch: a `SoloUnit` runs one query on its own runner
(`RunSpec.build`); a shared unit (`greta_stream.runtime.shared`) runs a
family of columnar queries whose patterns, predicates, partitioning and
validation are the same, with one preparation of the events and one kernel
pass per window spec, or a union of queries whose patterns differ around
one Kleene part, one traversal per window spec with a lane per query. `QuerySetPlan.explain()` prints the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greta_stream.engine import DeadLetter
from greta_stream.engine.columnar.stream import handed
from greta_stream.runtime.queryset import QuerySet, QueryWatermarkOf, run_fingerprint
from greta_stream.runtime.spec import RunSpec

SinkOf = Callable[[str], Callable[[DeadLetter], None]]


@dataclass(frozen=True)
class SoloUnitPlan:
    """A unit of one query on its own runner (`build` makes its `SoloUnit`)."""

    name: str
    spec: RunSpec
    why: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def build(self, sink_of: SinkOf) -> SoloUnit:
        return SoloUnit(self.name, self.spec, sink_of(self.name))

    def explain(self) -> str:
        why = f" ({self.why})" if self.why else ""
        return f"solo {self.name}: {self.spec.runner_kind} runner{why}"


@dataclass(frozen=True)
class QuerySetPlan:
    """How a query set is run: its units (`SoloUnitPlan`s and shared `FamilyUnitPlan`s)."""

    queries: QuerySet
    units: tuple[Any, ...]

    def explain(self) -> str:
        nq, nu = len(self.queries), len(self.units)
        head = (f"{nq} quer{'y' if nq == 1 else 'ies'} in {nu} unit{'' if nu == 1 else 's'}; each query shards by "
                "its own GROUP-BY "
                f"attributes and keeps its own lateness; each micro-batch is read once for all of them")
        return "\n".join([head, *(u.explain() for u in self.units)])

    def to_dict(self) -> dict[str, Any]:
        return {"queries": list(self.queries.names),
                "shard_attributes": {name: list(spec.query.group_by) for name, spec in self.queries},
                "lateness_s": {name: spec.lateness_s for name, spec in self.queries},
                "units": [u.to_dict() if hasattr(u, "to_dict") else {"kind": "solo", "queries": list(u.names),
                                                                      "runner": u.spec.runner_kind, "why": u.why}
                          for u in self.units]}


def plan_units(queries: QuerySet) -> QuerySetPlan:
    """The units of `queries`: shared families where sharing pays, solo runners for the rest."""
    from greta_stream.runtime.shared import share_families

    if queries.sharing:
        families, solos = share_families(queries)
    else:
        families, solos = [], [(name, spec, "sharing is off") for name, spec in queries]
    units: list[Any] = list(families)
    units += [SoloUnitPlan(name, spec, why) for name, spec, why in solos]
    order = {n: i for i, n in enumerate(queries.names)}
    units.sort(key=lambda u: min(order[n] for n in u.names))
    return QuerySetPlan(queries, tuple(units))


class SoloUnit:
    """One query's runner inside a `MultiRunner`."""

    def __init__(self, name: str, spec: RunSpec, sink: Callable[[DeadLetter], None]) -> None:
        self.name, self.spec, self.sink = name, spec, sink
        self.runner = spec.build(dead_letter=sink)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def _of(self, watermark_of: QueryWatermarkOf) -> Callable[[str | None], Any]:
        return lambda kind: watermark_of(self.spec, kind)

    def expect(self, watermark_of: QueryWatermarkOf) -> None:
        self.runner.expect(watermark_of(self.spec, self.runner.time_kind))

    def add_many(self, records: Any, watermark_of: QueryWatermarkOf | None) -> None:
        self.runner.add_many(handed(self.runner, records), self._of(watermark_of) if watermark_of is not None else None)

    def advance(self, watermark_of: QueryWatermarkOf) -> list[tuple[str, dict[str, Any]]]:
        return [(self.name, row) for row in self.runner.advance(watermark_of(self.spec, self.runner.time_kind))]

    @property
    def idle(self) -> bool:
        return bool(self.runner.idle)

    def next_window_ends(self) -> dict[str, Any]:
        end = self.runner.next_window_end()
        return {} if end is None else {self.name: end}

    def time_kinds(self) -> dict[str, str | None]:
        return {self.name: self.runner.time_kind}

    def engines(self) -> dict[str, tuple[str, str | None]]:
        return {self.name: self.spec.engine_ran(self.runner)}

    def metrics(self) -> dict[str, dict[str, int]]:
        return {self.name: dict(self.runner.metrics)}

    def snapshot(self) -> dict[str, tuple[str, bytes]]:
        if self.runner.idle:
            return {}
        return {self.name: (run_fingerprint(self.spec), self.spec.snapshot(self.runner))}

    def restore(self, saved: dict[str, tuple[str, bytes]]) -> None:
        from greta_stream.runtime.shared import FAMILY_TAG, restore_alone

        entry = saved.get(self.name)
        if entry is None or entry[0] != run_fingerprint(self.spec):
            return
        if entry[1][:1] == FAMILY_TAG:  # it ran in a family before: on alone from the family's state
            self.runner = restore_alone(self.spec, self.name, entry[1], self.sink)
        else:
            self.runner = self.spec.restore(entry[1], dead_letter=self.sink)
