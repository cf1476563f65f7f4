"""Run time: the units a `MultiRunner` runs, one per unit plan (`greta_stream.runtime.plan`).

A `SoloUnit` runs one query on its own runner; a `FamilyUnit` runs a family
or a union of columnar queries on one `ColumnarStream`. Both offer what
`Unit` names. Each saves its queries' states under their names and run
fingerprints and restores from them, whatever unit saved them: a query saved
in a family and now alone goes on alone from the family's state
(`restore_alone`), queries saved alone and now in a family are parts of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from greta_stream.engine import DeadLetter
from greta_stream.engine.columnar import columnar_plan
from greta_stream.engine.columnar.passes import PassSpec, single_pass
from greta_stream.engine.columnar.stream import ColumnarStream, Diverged, handed
from greta_stream.engine.columnar.union import union_plan
from greta_stream.runtime.plan.keys import validation_key, validation_plan
from greta_stream.runtime.queryset import QueryWatermarkOf, run_fingerprint
from greta_stream.runtime.spec import RunSpec

if TYPE_CHECKING:  # the plans build their units: units.py is run time, below the planner
    from greta_stream.runtime.plan.planner import FamilyUnitPlan

SinkOf = Callable[[str], Callable[[DeadLetter], None]]
Rows = list[tuple[str, dict[str, Any]]]  # (query name, row)
States = dict[str, tuple[str, bytes]]  # query name -> (run fingerprint, state)
FAMILY_TAG = b"F"  # a family's state in a stream's state, under each of its queries' names


class Unit(Protocol):
    """What every unit offers a `MultiRunner` (the calls of `greta_stream.runtime.runner.Runner`,
    per query: rows, window ends, time kinds, engines, metrics and states are by query name)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def idle(self) -> bool: ...

    def expect(self, watermark_of: QueryWatermarkOf) -> None: ...

    def add_many(self, records: Any, watermark_of: QueryWatermarkOf | None) -> None: ...

    def advance(self, watermark_of: QueryWatermarkOf) -> Rows: ...

    def next_window_ends(self) -> dict[str, Any]: ...

    def time_kinds(self) -> dict[str, str | None]: ...

    def engines(self) -> dict[str, tuple[str, str | None]]: ...

    def metrics(self) -> dict[str, dict[str, int]]: ...

    def snapshot(self) -> States: ...

    def restore(self, saved: States) -> None: ...


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

    def advance(self, watermark_of: QueryWatermarkOf) -> Rows:
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

    def snapshot(self) -> States:
        if self.runner.idle:
            return {}
        return {self.name: (run_fingerprint(self.spec), self.spec.snapshot(self.runner))}

    def restore(self, saved: States) -> None:
        entry = saved.get(self.name)
        if entry is None or entry[0] != run_fingerprint(self.spec):
            return
        if entry[1][:1] == FAMILY_TAG:  # it ran in a family before: on alone from the family's state
            self.runner = restore_alone(self.spec, self.name, entry[1], self.sink)
        else:
            self.runner = self.spec.restore(entry[1], dead_letter=self.sink)


class FamilyUnit:
    """A family inside a `MultiRunner`: its queries on one `ColumnarStream`.

    After a restart with another query set, its queries may come back from
    different states: those saved together continue together, a query saved
    alone continues alone, and queries with no state start together anew
    (they must not see the events the others kept). Each group is a *part*.
    """

    def __init__(self, plan: FamilyUnitPlan, sink_of: SinkOf) -> None:
        self.plan = plan
        self.specs = dict(plan.members)
        self.sinks = {name: sink_of(name) for name in plan.names}
        self.parts: list[tuple[tuple[str, ...], ColumnarStream]] = [(plan.names, self._stream(plan.names))]

    @property
    def names(self) -> tuple[str, ...]:
        return self.plan.names

    def _passes(self, names: tuple[str, ...]) -> list[PassSpec]:
        if len(names) == 1:
            return [single_pass(self.specs[names[0]].columnar, names[0])]  # type: ignore[arg-type]
        if names == self.plan.names:  # the planner's own passes (a part of them after a restart is planned anew)
            return list(self.plan.passes)
        return list(self.plan.replan(names).passes)

    def _stream(self, names: tuple[str, ...], blob: bytes | None = None) -> ColumnarStream:
        passes = self._passes(names)
        spec = self.specs[names[0]]
        sinks = [self.sinks[n] for n in names]

        def fan_out(dl: DeadLetter) -> None:  # every query of the family judges every record alike
            for sink in sinks:
                sink(dl)

        plans = [self.specs[n].columnar for n in names]
        if self.plan.kind == "union" and len(names) > 1:  # every member's types and what each asks of them
            validation = union_plan(list(zip(names, plans))).plan  # type: ignore[arg-type]
        else:
            validation = validation_plan(plans)  # type: ignore[arg-type]
        kw: dict[str, Any] = {"fields": spec.fields, "dead_letter": fan_out, "threads": spec.kernel_threads,
                              "validation": validation}
        stream = ColumnarStream(passes, **kw) if blob is None else ColumnarStream.restore(passes, blob, **kw)
        stream.member_sinks = {n: self.sinks[n] for n in names}
        stream.dead_letter = fan_out
        return spec.armed(stream)

    def _spec(self, names: tuple[str, ...]) -> RunSpec:
        return self.specs[names[0]]  # the family's lateness and fields are its queries'

    def expect(self, watermark_of: QueryWatermarkOf) -> None:
        for names, stream in self.parts:
            stream.expect(watermark_of(self._spec(names), stream.time_kind))

    def add_many(self, records: Any, watermark_of: QueryWatermarkOf | None) -> None:
        parts = []
        for names, stream in self.parts:
            spec = self._spec(names)
            of = (lambda kind, spec=spec: watermark_of(spec, kind)) if watermark_of else None
            try:
                stream.add_many(handed(stream, records), of)
                parts.append((names, stream))
            except Diverged:  # its queries judge a record differently: one part per validation from now on
                for sub_names, sub in self._split(names, stream):
                    sub.add_many(handed(sub, records), of)
                    parts.append((sub_names, sub))
        self.parts = parts

    def _split(self, names: tuple[str, ...], stream: ColumnarStream) -> list[tuple[tuple[str, ...], ColumnarStream]]:
        """The part's queries grouped by their own validation, each group on the part's state."""
        blob = stream.snapshot()
        groups: dict[Any, list[str]] = {}
        for n in names:
            groups.setdefault(validation_key(self.specs[n]), []).append(n)
        return [(tuple(g), self._stream(tuple(g), blob)) for g in groups.values()]

    def advance(self, watermark_of: QueryWatermarkOf) -> Rows:
        out: Rows = []
        for names, stream in self.parts:
            out += stream.advance_members(watermark_of(self._spec(names), stream.time_kind))
        return out

    @property
    def idle(self) -> bool:
        return all(stream.idle for _, stream in self.parts)

    def next_window_ends(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _, stream in self.parts:
            out.update(stream.next_window_ends())
        return out

    def time_kinds(self) -> dict[str, str | None]:
        return {n: stream.time_kind for names, stream in self.parts for n in names}

    def engines(self) -> dict[str, tuple[str, str | None]]:
        return {n: stream.engine_ran for names, stream in self.parts for n in names}

    def metrics(self) -> dict[str, dict[str, int]]:
        return {n: stream.member_metrics(n) for names, stream in self.parts for n in names}

    def snapshot(self) -> States:
        out: States = {}
        for names, stream in self.parts:
            if stream.idle:
                continue
            if isinstance(stream, _Solo):
                blob = self.specs[names[0]].snapshot(stream.runner)
            else:
                blob = FAMILY_TAG + stream.snapshot()  # one object under every name: pickled once
            for n in names:
                out[n] = (run_fingerprint(self.specs[n]), blob)
        return out

    def restore(self, saved: States) -> None:
        together: dict[int, list[str]] = {}
        blobs: dict[int, bytes] = {}
        fresh: list[str] = []
        for n in self.names:
            entry = saved.get(n)
            if entry is None or entry[0] != run_fingerprint(self.specs[n]):
                fresh.append(n)
                continue
            together.setdefault(id(entry[1]), []).append(n)
            blobs[id(entry[1])] = entry[1]
        parts = []
        for key, names in together.items():
            blob = blobs[key]
            if blob[:1] == FAMILY_TAG:
                parts.append((tuple(names), self._stream(tuple(names), blob[1:])))
            else:  # saved alone (a runner of its own): one part each
                for n in names:
                    parts.append(((n,), _as_stream(self.specs[n].restore(blob, dead_letter=self.sinks[n]), n)))
        if fresh:
            parts.append((tuple(fresh), self._stream(tuple(fresh))))
        self.parts = parts


def _as_stream(runner: Any, name: str) -> Any:
    """A query restored alone, as a part of a family (a columnar stream, or a runner that answers alike)."""
    if isinstance(runner, ColumnarStream):
        member = runner.passes[0].members[0]
        runner.passes[0] = dataclasses.replace(runner.passes[0], members=(dataclasses.replace(member, name=name),))
        return runner
    return _Solo(runner, name)


class _Solo:
    """A general engine in the place of a family part (a query whose saved state is a general engine's)."""

    def __init__(self, runner: Any, name: str) -> None:
        self.runner, self.name = runner, name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.runner, attr)

    def advance_members(self, watermark: Any) -> Rows:
        return [(self.name, row) for row in self.runner.advance(watermark)]

    def next_window_ends(self) -> dict[str, Any]:
        end = self.runner.next_window_end()
        return {} if end is None else {self.name: end}

    def member_metrics(self, name: str) -> dict[str, int]:
        return dict(self.runner.metrics)


def restore_alone(spec: RunSpec, name: str, blob: bytes, sink: Callable[[DeadLetter], None]) -> Any:
    """A query planned alone whose saved state is its family's: a columnar stream of it alone."""
    plan = spec.columnar or columnar_plan(spec.query)
    stream = ColumnarStream.restore([single_pass(plan, name)], blob[1:], fields=spec.fields, dead_letter=sink,
                                    threads=spec.kernel_threads)
    stream.member_sinks = {name: sink}
    return spec.armed(stream)
