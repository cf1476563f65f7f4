"""One partition of CET mode: its runs (one `TrendGraph` each) and open windows.

Partitions and runs are those of aggregation mode (docs/DESIGN.md,
"Partitions and runs"): the attributes that apply to every alias select the
partition; attributes that apply to some aliases only split it into runs,
one per combination of their values seen on positive events. A run created
late replays the partition's retained events, so it holds what it would have
held from the start. Windows close in order: before events of time t are
added, every window ending at or before t is reported, then whole panes
before the oldest open window expire.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from greta_stream.cet.graph import TrendGraph
from greta_stream.cet.plan import ExtractionPlan
from greta_stream.engine.ingest import Event
from greta_stream.engine.partition import add_run_values, compatible

Bound = list[tuple[Event, str, int]]  # (event, alias, event key)
Close = Callable[[int, "CetPartition", tuple[Any, ...], TrendGraph], None]


class CetPartition:
    """Runs of one partition, the next window to report and replay history."""

    graph_cls: type = TrendGraph  # also for partitions pickled before range graphs existed

    def __init__(self, key: tuple[Any, ...], reduced: bool, graph_cls: type = TrendGraph) -> None:
        self.key = key
        self.reduced = reduced
        self.graph_cls = graph_cls  # TrendGraph, or RangeGraph when every edge is an equality (ranges.py)
        self.runs: dict[tuple[Any, ...], TrendGraph] = {}
        self.next_k: int | None = None
        self.retained: list[tuple[Any, Bound]] = []  # (time, bindings), only with runs
        self.values: list[dict[Any, None]] = []  # per run component, values seen on positive events
        self.last: Any = None  # the latest time stamp of an event of the pattern's types (contiguous)
        self.floors: dict[Any, Any] = {}  # retained time stamp -> the one before it (contiguous, with runs)

    @property
    def empty(self) -> bool:
        return not self.runs and not self.retained

    def process(self, plan: ExtractionPlan, t: Any, bound: Bound, close: Close) -> int:
        """Add the bindings of time t (windows ending by t close first); return units released."""
        released = self.close_until(plan, plan.tb.first_window(t), close)
        floor, self.last = getattr(self, "last", None), t  # every event of the pattern's types breaks contiguity
        if not bound:
            return released
        if not plan.has_runs:
            run = self.runs.get(())
            if run is None:
                run = self.runs[()] = self.graph_cls(self.reduced)
            run.process(plan, t, bound, self.next_k, floor)  # type: ignore[arg-type]
            return released
        if not self.values:
            self.values = [{} for _ in plan.cq.run_components]
        if add_run_values(plan.cq, bound, self.values):
            self._create_runs(plan)
        for key, run in self.runs.items():
            sub = compatible(plan.cq, key, bound)
            if sub:
                run.process(plan, t, sub, self.next_k, floor)  # type: ignore[arg-type]
        self.retained.append((t, bound))
        if plan.contiguous:
            self.__dict__.setdefault("floors", {})[t] = floor
        return released

    def _create_runs(self, plan: ExtractionPlan) -> None:
        for key in sorted(set(itertools.product(*self.values)) - set(self.runs), key=repr):
            run = self.runs[key] = self.graph_cls(self.reduced)
            for past_t, past in self.retained:
                sub = compatible(plan.cq, key, past)
                if sub:
                    run.process(plan, past_t, sub, self.next_k, self.__dict__.get("floors", {}).get(past_t))  # type: ignore[arg-type]

    def close_until(self, plan: ExtractionPlan, target: int | None, close: Close) -> int:
        """Report every window k < target (all when None); return cache units released."""
        tb = plan.tb
        if target is not None and self.next_k is not None and target <= self.next_k:
            return 0  # the common case, once per time stamp: nothing closes
        ranges = [(tb.first_window(r.times[0]), tb.last_window(r.times[-1])) for r in self.runs.values() if r.times]
        if target is None:
            target = max((hi for _, hi in ranges), default=self.next_k or 0) + 1
        if self.next_k is None:
            self.next_k = target
            return 0
        if target <= self.next_k:
            return 0
        if ranges:
            lo = max(self.next_k, min(lo for lo, _ in ranges))
            hi = min(target - 1, max(hi for _, hi in ranges))
            keys = sorted(self.runs, key=canonical)
            for k in range(lo, hi + 1):
                for key in keys:
                    close(k, self, key, self.runs[key])
        self.next_k = target
        return self._expire(plan, tb.start(target))

    def _expire(self, plan: ExtractionPlan, horizon: Any) -> int:
        released = 0
        if self.retained and self.retained[0][0] < horizon:
            self.retained = [(t, b) for t, b in self.retained if t >= horizon]
            if getattr(self, "floors", None):
                self.floors = {t: f for t, f in self.floors.items() if t >= horizon}
            self.values = [{} for _ in plan.cq.run_components]
            for _t, b in self.retained:
                add_run_values(plan.cq, b, self.values)
        for key in list(self.runs):
            run = self.runs[key]
            released += run.expire(horizon)
            live = all(v in seen for v, seen in zip(key, self.values, strict=True))
            if run.empty and not (plan.has_runs and live):
                released += sum(g.units for gls in run.graphlets.values() for g in gls)
                del self.runs[key]
        return released


def canonical(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A sort key for partition and run keys that tolerates mixed value types."""
    out = []
    for v in key:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((0, v, ""))
        elif isinstance(v, str):
            out.append((1, 0, v))
        else:
            out.append((2, 0, repr(v)))
    return tuple(out)


