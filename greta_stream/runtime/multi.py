"""Many queries over one stream: `MultiRunner`.

A stream read once serves every query registered on it (a `QuerySet`,
`greta_stream.runtime.queryset`). `MultiRunner` runs a `QuerySet` behind one interface. Records are handed
over once per micro-batch, parsed once (one `columnar.Input`: each field is
read and typed once for every query), to the planner's units
(`greta_stream.runtime.plan`, built into `greta_stream.runtime.units`): a unit
serves one query (its own runner) or several (a shared pass). Rows and dead letters carry their query's name.
Its state is one blob holding every query's state under the query's name and
run fingerprint, so a stream restarted with another query set restores the
queries it still has, starts new ones empty (at the stream's position),
keeps the saved state of paused queries as it is and drops the rest.

A query whose evaluation raises fails alone: its unit leaves the run, its
queries keep the state they had when the batch began (the state of a
stopped query) and `failed` names them with a one-line reason; the state
remembers the failure for the rest of the run (`QuerySet.epoch`), so later
micro-batches of that run skip them too. A new run (another epoch) tries
them again from that state.

Call order (as `greta_stream.runtime.runner.Runner`, with watermarks given
per query by `watermark_of(spec, time_kind)`):

    multi = MultiRunner(queries)                  # or MultiRunner.restore(queries, blob)
    multi.expect(watermark_of)
    multi.add_many(records, watermark_of)         # once per micro-batch
    rows = multi.advance(watermark_of)            # [(query name, row), ...]
    blob = multi.snapshot()                       # when not multi.idle
"""

from __future__ import annotations

import logging
import math
import pickle
from collections.abc import Callable, Mapping
from typing import Any

from greta_stream.engine import DeadLetter
from greta_stream.engine.chunks import tracked
from greta_stream.engine.columnar import Input
from greta_stream.errors import SnapshotError
from greta_stream.runtime.plan import QuerySetPlan, plan_units
from greta_stream.runtime.queryset import QuerySet, QueryWatermarkOf
from greta_stream.runtime.units import Unit

SNAPSHOT_FORMAT = 1
log = logging.getLogger("greta_stream.runtime")

QueryDeadLetter = Callable[[str, DeadLetter], None]


class _DeadLetters:
    """Where a runner's units send their dead letters: the runner's current sink, read on every dead
    letter. The units' sinks hold this, not the runner, so that a runner is free of reference cycles
    and goes with its last reference (a cache's dropped runner, its kept events with it), not at the
    next full collection of the garbage collector, which a worker may not run for many batches."""

    __slots__ = ("sink",)

    def __init__(self, sink: QueryDeadLetter | None) -> None:
        self.sink = sink

    def of(self, name: str) -> Callable[[DeadLetter], None]:
        def send(dl: DeadLetter) -> None:
            if self.sink is not None:
                self.sink(name, dl)
        return send


class MultiRunner:
    """Every query of a `QuerySet` over one stream of records; see the module docstring."""

    def __init__(self, queries: QuerySet, *, dead_letter: QueryDeadLetter | None = None,
                 plan: QuerySetPlan | None = None) -> None:
        self.queries = queries
        self._dead_letters = _DeadLetters(dead_letter)
        self.plan = plan if plan is not None else plan_units(queries)
        self.units: list[Unit] = [unit.build(self._dead_letters.of) for unit in self.plan.units]
        self.unit_plans = {id(u): p for u, p in zip(self.units, self.plan.units)}  # what each unit was built from
        self.carried: dict[str, tuple[str, bytes]] = {}  # the saved states of paused queries, kept as they are
        self.saved: dict[str, tuple[str, bytes]] = {}  # each query's state when this run (or batch) began
        self.failed: dict[str, str] = {}  # queries that failed in this epoch -> one-line reason
        # the chunks (`engine.chunks`) each query's saved state refers to (key -> stored bytes), where a
        # chunk store keeps them out of the snapshot; written down with the snapshot for every query, as
        # a query running now may be paused (carried as it is, unread) in the next batch, on another runner
        self.refs: dict[str, dict[str, int]] = {}

    @property
    def dead_letter(self) -> QueryDeadLetter | None:
        return self._dead_letters.sink

    @dead_letter.setter
    def dead_letter(self, sink: QueryDeadLetter | None) -> None:
        self._dead_letters.sink = sink  # the units' sinks read it on every dead letter

    # ------------------------------------------------------------ the run
    def _each(self, call: Callable[[Unit], Any]) -> list[Any]:
        """`call(unit)` for every unit; a unit that raises fails its queries alone (module docstring)."""
        out = []
        for unit in list(self.units):
            try:
                out.append(call(unit))
            except MemoryError:
                raise  # the worker's, not the query's: the driver retries the whole batch from the state bytes
            except Exception as exc:  # noqa: BLE001 - one query's failure must not fail its neighbours
                self._fail(unit, exc)
        return out

    def _fail(self, unit: Unit, exc: Exception) -> None:
        reason = one_line(exc)
        log.error("queries %s failed: %s", ", ".join(unit.names), reason, exc_info=exc)
        self.units.remove(unit)
        self.unit_plans.pop(id(unit), None)
        for name in unit.names:
            self.failed[name] = reason
            if name in self.saved:
                self.carried[name] = self.saved[name]

    def expect(self, watermark_of: QueryWatermarkOf) -> None:
        self._each(lambda unit: unit.expect(watermark_of))

    def add_many(self, records: Any, watermark_of: QueryWatermarkOf | None = None) -> None:
        """Hand one micro-batch (dicts or a DataFrame) to every unit."""
        if not isinstance(records, list) and not hasattr(records, "columns"):
            records = list(records)
        batch = Input.of(records)  # read once: every unit's preparation reads the same parsed fields
        batch.readers = len(self.units)
        self._each(lambda unit: unit.add_many(batch, watermark_of))

    def advance(self, watermark_of: QueryWatermarkOf) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        for rows in self._each(lambda unit: unit.advance(watermark_of)):
            out += rows
        return out

    def finish(self) -> list[tuple[str, dict[str, Any]]]:
        return self.advance(lambda spec, kind: math.inf)

    @property
    def idle(self) -> bool:
        return not self.carried and all(unit.idle for unit in self.units)

    def next_window_ends(self) -> dict[str, Any]:
        """Per query, the end of its first window not reported yet (queries with none are left out)."""
        out: dict[str, Any] = {}
        for unit in self.units:
            out.update(unit.next_window_ends())
        return out

    def time_kinds(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for unit in self.units:
            out.update(unit.time_kinds())
        return out

    def engines(self) -> dict[str, tuple[str, str | None]]:
        """Per query: the engine it runs on now and, for the general engine, why (`RunSpec.engine_ran`)."""
        out: dict[str, tuple[str, str | None]] = {}
        for unit in self.units:
            out.update(unit.engines())
        return out

    def metrics(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for unit in self.units:
            out.update(unit.metrics())
        return out

    # ----------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        """Every query's state, under its name and run fingerprint; `state_sizes`
        then says how many bytes each query's part took (0: no state; queries
        sharing one state split its bytes, so the sizes add up to the state)."""
        states: dict[str, tuple[str, bytes]] = dict(self.carried)
        refs = {name: keys for name, keys in self.refs.items() if name in self.carried}
        for unit in self.units:
            with tracked() as keys:
                saved = unit.snapshot()
            states.update(saved)
            refs.update({name: keys for name in saved})
        names = (*self.queries.names, *sorted(self.queries.paused))
        self.state_sizes = shares({name: states[name][1] for name in names if name in states})
        self.state_sizes = {name: self.state_sizes.get(name, 0) for name in names}
        failed = {name: (self.queries.epoch, reason) for name, reason in self.failed.items()}
        self.saved, self.refs = states, refs  # what a query that fails in the next batch goes back to
        state = {"format": SNAPSHOT_FORMAT, "queries": states, "failed": failed, "refs": refs}
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    def reconfigure(self, queries: QuerySet) -> None:
        """Take another query set of the same run (`QuerySet.epoch`) between two micro-batches, as
        `restore(queries, self.snapshot())` would, without reading again what did not change: a unit
        whose plan is the same goes on as it is; the others start from the states of the last snapshot."""
        assert queries.epoch == self.queries.epoch, "a query set of another run: restore it from the state"
        plan = plan_units(queries)
        live = {tuple(u.names): u for u in self.units}
        by_plan = [(p, u if u is not None and self.unit_plans[id(u)] == p else None)
                   for p in plan.units for u in (live.get(tuple(p.names)),)]
        self.queries, self.plan, self.units, self.unit_plans = queries, plan, [], {}
        self.failed = {name: why for name, why in self.failed.items() if name in queries.names}
        for p, unit in by_plan:
            if any(name in self.failed for name in p.names):  # failed earlier in this run: it stays out
                self.carried.update({name: self.saved[name] for name in p.names if name in self.saved})
                continue
            if unit is None:
                unit = p.build(self._dead_letters.of)
                try:
                    unit.restore(self.saved)
                except Exception as exc:  # noqa: BLE001 - a state only this query cannot read fails only it
                    self.units.append(unit)
                    self.unit_plans[id(unit)] = p
                    self._fail(unit, exc)
                    continue
            self.units.append(unit)
            self.unit_plans[id(unit)] = p
        running = {name for unit in self.units for name in unit.names}
        self.carried = {name: state for name, state in self.carried.items()
                        if name not in running and (name in queries.paused or name in self.failed)}
        self.carried.update({name: self.saved[name] for name in queries.paused if name in self.saved})

    @classmethod
    def restore(cls, queries: QuerySet, blob: bytes, *, dead_letter: QueryDeadLetter | None = None,
                plan: QuerySetPlan | None = None) -> MultiRunner:
        """The runner of `queries`, each query continuing from its saved state
        when the blob has one for its name and fingerprint (else new)."""
        try:
            state = pickle.loads(blob)  # noqa: S301 - our own state store's bytes
        except Exception as exc:  # noqa: BLE001
            raise SnapshotError(f"cannot read the stream's state: {exc}") from exc
        if not isinstance(state, dict) or state.get("format") != SNAPSHOT_FORMAT:
            raise SnapshotError("unsupported stream state format: start from a new checkpoint")
        saved: dict[str, tuple[str, bytes]] = state["queries"]
        failed = {name: reason for name, (epoch, reason) in state.get("failed", {}).items()
                  if epoch == queries.epoch and name in queries.names}
        multi = cls(queries, dead_letter=dead_letter, plan=plan)
        multi.saved, multi.refs = saved, dict(state.get("refs", {}))
        for unit in list(multi.units):
            if any(name in failed for name in unit.names):  # failed earlier in this run: it stays out
                multi.units.remove(unit)
                for name in unit.names:
                    multi.failed[name] = failed.get(name, "failed with a query it shares its evaluation with")
                    if name in saved:
                        multi.carried[name] = saved[name]
                continue
            try:
                unit.restore(saved)
            except Exception as exc:  # noqa: BLE001 - a state only this query cannot read fails only it
                multi._fail(unit, exc)
        multi.carried.update({name: saved[name] for name in queries.paused if name in saved})
        return multi


def shares(blobs: Mapping[str, bytes]) -> dict[str, int]:
    """Each name's part of the bytes of `blobs`: a blob held under several
    names (queries evaluated together) counted once, split between them."""
    holders: dict[int, list[str]] = {}
    for name, blob in blobs.items():
        holders.setdefault(id(blob), []).append(name)
    out: dict[str, int] = {}
    for names in holders.values():
        size = len(blobs[names[0]])
        each, rest = divmod(size, len(names))
        for i, name in enumerate(names):
            out[name] = each + (1 if i < rest else 0)
    return out


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    first = text[0].strip() if text else ""
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."
