"""One partition: events sharing the values of the common partition attributes.

Equivalence attributes that apply to every alias (and GROUP-BY attributes)
select the partition. Attributes that apply to some aliases only (say
`[P.vehicle, segment]`) split a partition into *runs*, one per combination
of their values seen on positive events; an event that lacks such an
attribute (an `Accident` without a vehicle) joins every run it is compatible
with. A run created late is rebuilt by replaying the partition's retained
events, so it holds exactly what it would have held from the start.

Windows close here, in order: before events of time t are added, every
window ending at or before t is reported and whole panes before the oldest
open window expire.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from greta_stream.compiler.compiled import CompiledQuery
from greta_stream.engine.graph import Run
from greta_stream.engine.ingest import Event
from greta_stream.engine.plan import NEG_INF, GraphPlan

Emit = Callable[[int, tuple[Any, ...], list[Any]], None]
Bound = list[tuple[Event, str]]
B = TypeVar("B", bound=tuple[Any, ...])  # a binding: (event, alias, ...)


class Partition:
    """Runs of one partition, the next window to report and replay history."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.runs: dict[tuple[Any, ...], Run] = {}
        self.next_k: int | None = None
        self.retained: list[tuple[Any, Bound]] = []  # (time, bound events), only with runs
        self.values: list[dict[Any, None]] = []  # per run component, values seen on positive events
        self.last: Any = NEG_INF  # the latest time stamp of an event of the pattern's types (contiguous)
        self.floors: dict[Any, Any] = {}  # retained time stamp -> the one before it (contiguous, with runs)
        self._by_key: _Replay | None = None  # derived from `retained`, not pickled
        self._batch: list[Event] = []  # the events being processed, not pickled

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_by_key", "_batch")}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.last, self.floors = NEG_INF, {}
        self.__dict__.update(s)
        self._by_key, self._batch = None, []

    @property
    def empty(self) -> bool:
        return not self.runs and not self.retained

    def process(self, plan: GraphPlan, events: list[Event], group: tuple[Any, ...], emit: Emit) -> None:
        """Add time-ordered events; report windows that end before them."""
        self._batch = events
        for r in self.runs.values():
            r.upcoming = events  # lets indexes size their key domains once per batch
        for t, same_time in itertools.groupby(events, key=lambda e: e.time):
            self.close_until(plan, plan.tb.first_window(t), group, emit)
            floor, self.last = self.last, t  # every event of the pattern's types breaks contiguity
            bound = [(ev, a) for ev in same_time for a in plan.cq.by_type.get(ev.type, ()) if plan.local_ok(a, ev.attrs)]
            if not bound:
                continue
            if plan.has_runs:
                self._process_runs(plan, t, bound, floor)
            else:
                run = self.runs.get(())
                if run is None:
                    run = self.runs[()] = Run(())
                    run.upcoming = events
                run.process(plan, t, bound, self.next_k, floor)  # type: ignore[arg-type]
        self._batch = []
        for r in self.runs.values():
            r.upcoming = []
            r.__dict__.pop("_keys_of", None)

    # ---------------------------------------------------------------- runs
    def _process_runs(self, plan: GraphPlan, t: Any, bound: Bound, floor: Any) -> None:
        if not self.values:
            self.values = [{} for _ in plan.cq.run_components]
        if add_run_values(plan.cq, bound, self.values):
            self._create_runs(plan)
        runs = self.runs
        for key, sub in _route(plan, runs, bound).items():
            runs[key].process(plan, t, sub, self.next_k, floor)  # type: ignore[arg-type]
        if self._by_key is not None:
            self._by_key.add(plan, len(self.retained), bound)
        self.retained.append((t, bound))
        if plan.contiguous:
            self.floors[t] = floor

    def _create_runs(self, plan: GraphPlan) -> None:
        """Create the runs of new value combinations, replaying the retained events."""
        keys = set(itertools.product(*self.values))
        new = {key: key for key in sorted(keys - set(self.runs), key=repr)}
        if not new:
            return
        upcoming = [ev for _t, b in self.retained for ev, _a in b] + list(getattr(self, "_batch", ()))
        for key in new:
            run = self.runs[key] = Run(key)
            run.upcoming = upcoming
        if self._by_key is None:
            self._by_key = _Replay()
            for i, (_t, past) in enumerate(self.retained):
                self._by_key.add(plan, i, past)
        retained = self.retained
        for key in new:
            run = self.runs[key]
            for i, sub in self._by_key.replay(plan, key):
                t = retained[i][0]
                run.process(plan, t, sub, self.next_k, self.floors.get(t, NEG_INF))  # type: ignore[arg-type]

    # ------------------------------------------------------------- windows
    def close_until(self, plan: GraphPlan, target: int | None, group: tuple[Any, ...], emit: Emit) -> None:
        """Report every window k < target (all of them when target is None)."""
        tb = plan.tb
        if target is not None and self.next_k is not None and target <= self.next_k:
            return  # the common case, once per time stamp: nothing to close
        ranges = [r for r in (run.end_window_range(plan) for run in self.runs.values()) if r]
        if target is None:
            target = max((hi for _, hi in ranges), default=self.next_k or 0) + 1
        if self.next_k is None:
            self.next_k = target
            return
        if target <= self.next_k:
            return
        if ranges:
            lo = max(self.next_k, min(lo for lo, _ in ranges))
            hi = min(target - 1, max(hi for _, hi in ranges))
            for k in range(lo, hi + 1):
                acc = plan.zero()
                for run in self.runs.values():
                    run.window_result(plan, k, acc)
                if acc[0]:
                    emit(k, group, acc)
        self.next_k = target
        horizon = tb.start(target)
        if self.retained and self.retained[0][0] < horizon:
            self.retained = [(t, b) for t, b in self.retained if t >= horizon]
            if self.floors:
                self.floors = {t: f for t, f in self.floors.items() if t >= horizon}
            self._by_key = None
            self.values = [{} for _ in plan.cq.run_components]
            for _t, b in self.retained:
                add_run_values(plan.cq, b, self.values)
        for key in list(self.runs):
            run = self.runs[key]
            run.closed(plan, target)
            run.expire(plan, horizon, target)
            # A run stays while its key's values are live: new events of that
            # key bring no new value, so nothing would recreate it.
            live = all(v in seen for v, seen in zip(key, self.values))
            if run.empty and not (plan.has_runs and live):
                del self.runs[key]


def add_run_values(cq: CompiledQuery, bound: Sequence[tuple[Any, ...]], seen: list[dict[Any, None]]) -> bool:
    """Record the run-component values of positive bindings (event, alias, ...);
    True if any is new. Shared with CET mode, whose bindings carry more."""
    comps = cq.run_components
    new = False
    for b in bound:
        ev, spec = b[0], cq.aliases[b[1]]
        if spec.positive:
            for j in spec.run_components:
                v = ev.attrs[comps[j].attr]
                if v not in seen[j]:
                    seen[j][v] = None
                    new = True
    return new


def compatible(cq: CompiledQuery, key: tuple[Any, ...], bound: list[B]) -> list[B]:
    """The bindings (event, alias, ...) whose run-component values agree with the run key."""
    comps = cq.run_components
    return [b for b in bound if all(b[0].attrs[comps[j].attr] == key[j] for j in cq.aliases[b[1]].run_components)]


class _Replay:
    """The retained bindings by run key, so a new run replays only its own
    events and the ones that lack a run component (checked against its key),
    in their original order: (retained index, position in that time stamp)."""

    def __init__(self) -> None:
        self.full: dict[tuple[Any, ...], list[tuple[int, int, Event, str]]] = {}
        self.partial: list[tuple[int, int, Event, str]] = []

    def add(self, plan: GraphPlan, i: int, bound: Bound) -> None:
        comps = plan.cq.run_components
        aliases = plan.cq.aliases
        for pos, (ev, alias) in enumerate(bound):
            if len(aliases[alias].run_components) == len(comps):
                key = tuple(ev.attrs[c.attr] for c in comps)
                self.full.setdefault(key, []).append((i, pos, ev, alias))
            else:
                self.partial.append((i, pos, ev, alias))

    def replay(self, plan: GraphPlan, key: tuple[Any, ...]) -> list[tuple[int, Bound]]:
        """(retained index, bindings of that time stamp compatible with key), in order."""
        comps = plan.cq.run_components
        aliases = plan.cq.aliases
        items = list(self.full.get(key, ()))
        for item in self.partial:
            attrs = item[2].attrs
            if all(attrs[comps[j].attr] == key[j] for j in aliases[item[3]].run_components):
                items.append(item)
        items.sort(key=lambda it: (it[0], it[1]))
        out: list[tuple[int, Bound]] = []
        for it in items:
            if not out or out[-1][0] != it[0]:
                out.append((it[0], []))
            out[-1][1].append((it[2], it[3]))
        return out


def _route(plan: GraphPlan, keys: dict[tuple[Any, ...], Any], bound: Bound) -> dict[tuple[Any, ...], Bound]:
    """`compatible` for every run key at once, in O(bindings): a binding
    that carries every run component goes to the one key equal to its values
    (dict lookup: `==` and hash agree, so 1 and 1.0 are one key); one that
    lacks some (an `Accident` without a vehicle) is checked against each key.
    Each key's bindings keep their order in `bound`."""
    comps = plan.cq.run_components
    aliases = plan.cq.aliases
    full = len(comps)
    out: dict[tuple[Any, ...], Bound] = {}
    for ev, alias in bound:
        js = aliases[alias].run_components
        attrs = ev.attrs
        if len(js) == full:  # js lists component indexes in order: all of them
            key = tuple(attrs[c.attr] for c in comps)
            if key in keys:
                out.setdefault(key, []).append((ev, alias))
            continue
        for key in keys:
            if all(attrs[comps[j].attr] == key[j] for j in js):
                out.setdefault(key, []).append((ev, alias))
    return out
