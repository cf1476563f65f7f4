"""The GRETA graph of one run (one full equivalence key) over time panes.

Vertices are stored per state in panes (GRETA section 7) and whole panes
expire. A positive vertex keeps one intermediate aggregate per window it
falls in (section 6), so one graph serves every sliding window. A vertex of
a negative template keeps the latest start time of the negative matches that
end at it; `steps` turns that into M_N(tau) = the latest start of an N-match
ending before tau, which decides all three kinds of negation:

- middle `SEQ(.., X, NOT N, Y, ..)`: x may precede y iff x.time >= M_N(y.time);
- leading: a trend starting at e counts in window k iff start_k > M_N(e.time);
- trailing: a trend ending at e counts in window k iff e.time >= M_N(end_k).

This is the invalidation of GRETA section 5 (Algorithm 3) stated as a
threshold, so an edge is never built and then pruned. Events of one time
stamp are computed together from the graph before that time, then inserted
(time strictly increases along a trend).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

from greta_stream.engine.ingest import Event
from greta_stream.engine.plan import NEG_INF, Plan


class Vertex:
    """A positive vertex: per-window aggregates for windows kmin.. ."""

    __slots__ = ("time", "attrs", "id", "kmin", "aggs")

    def __init__(self, time: Any, attrs: dict[str, Any], id: Any, kmin: int, aggs: list[list[Any]]) -> None:
        self.time, self.attrs, self.id, self.kmin, self.aggs = time, attrs, id, kmin, aggs

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.time, self.attrs, self.id, self.kmin, self.aggs)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.time, self.attrs, self.id, self.kmin, self.aggs = s


class NegVertex:
    """A vertex of a negative template: the latest start of matches ending here."""

    __slots__ = ("time", "attrs", "start")

    def __init__(self, time: Any, attrs: dict[str, Any], start: Any) -> None:
        self.time, self.attrs, self.start = time, attrs, start

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.time, self.attrs, self.start)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.time, self.attrs, self.start = s


class Pane:
    """Vertices of one state whose times fall in one pane, in time order."""

    __slots__ = ("index", "times", "verts")

    def __init__(self, index: int) -> None:
        self.index, self.times, self.verts = index, [], []

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.index, self.times, self.verts)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.index, self.times, self.verts = s


def scan(panes: list[Pane], lo: Any, hi: Any) -> list[Any]:
    """Vertices with lo <= time < hi, oldest first."""
    out: list[Any] = []
    for pane in panes:
        times = pane.times
        if not times or times[-1] < lo:
            continue
        if times[0] >= hi:
            break
        i, j = bisect_left(times, lo), bisect_left(times, hi)
        out.extend(pane.verts[i:j])
    return out


class Run:
    """All state of one run: panes per state, running totals, M_N steps."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.panes: dict[str, list[Pane]] = {}
        self.totals: dict[str, dict[int, list[Any]]] = {}  # positive state -> window -> aggregate
        self.maxes: dict[str, Any] = {}  # negative state -> latest match start so far
        self.steps: dict[int, tuple[list[Any], list[Any]]] = {}  # template -> (end times, M_N)

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__dict__.update(s)

    @property
    def empty(self) -> bool:
        return not self.panes and not self.steps

    # ------------------------------------------------------------- queries
    def threshold(self, template: int, tau: Any) -> Any:
        """M_N(tau): the latest start of an N-match that ends before tau."""
        steps = self.steps.get(template)
        if not steps:
            return NEG_INF
        i = bisect_left(steps[0], tau)
        return steps[1][i - 1] if i else NEG_INF

    # --------------------------------------------------------- processing
    def process(self, plan: Plan, t: Any, bound: list[tuple[Event, str]], next_k: int) -> None:
        """Add the events of time stamp t (each with one alias it binds to)."""
        made: list[tuple[str, Any]] = []
        for ev, alias in bound:
            tp = plan.templates[plan.template_of[alias]]
            v = self._negative(plan, tp, alias, ev) if tp.negative else self._positive(plan, tp, alias, ev, next_k)
            if v is not None:
                made.append((alias, v))
        for alias, v in made:
            self._insert(plan, alias, v)

    def _positive(self, plan: Plan, tp: Any, alias: str, ev: Event, next_k: int) -> Vertex | None:
        tb, t = plan.tb, ev.time
        kmin, kmax = max(tb.first_window(t), next_k), tb.last_window(t)
        if kmax < kmin:
            return None
        aggs = [plan.zero() for _ in range(kmax - kmin + 1)]
        if alias in tp.start:
            lo = kmin
            if tp.leading is not None:
                m = self.threshold(tp.leading, t)
                if m != NEG_INF:
                    lo = max(lo, tb.last_window(m) + 1)
            for k in range(lo, kmax + 1):
                aggs[k - kmin][0] += 1
        for tr in tp.incoming[alias]:
            if tr.plain:
                tot = self.totals.get(tr.src)
                if tot:
                    for k in range(kmin, kmax + 1):
                        if k in tot:
                            plan.combine(aggs[k - kmin], tot[k])
                continue
            lo_t = tb.start(kmin)
            if tr.negation is not None:
                m = self.threshold(tr.negation, t)
                if m > lo_t:
                    lo_t = m
            for u in scan(self.panes.get(tr.src, []), lo_t, t):
                if tr.edge is not None and not plan.edge_ok(tr.edge, u.attrs, ev.attrs):
                    continue
                ukmin, uaggs = u.kmin, u.aggs
                for k in range(max(kmin, ukmin), min(kmax, ukmin + len(uaggs) - 1) + 1):
                    plan.combine(aggs[k - kmin], uaggs[k - ukmin])
        if not any(a[0] for a in aggs):
            return None
        for a in aggs:
            plan.add_own(a, alias, ev.attrs)
        return Vertex(t, ev.attrs, ev.id, kmin, aggs)

    def _negative(self, plan: Plan, tp: Any, alias: str, ev: Event) -> NegVertex | None:
        t = ev.time
        if alias in tp.start:
            return NegVertex(t, ev.attrs, t)  # no match ending here starts later
        best = NEG_INF
        for tr in tp.incoming[alias]:
            if tr.plain:
                best = max(best, self.maxes.get(tr.src, NEG_INF))
                continue
            lo = self.threshold(tr.negation, t) if tr.negation is not None else NEG_INF
            for u in scan(self.panes.get(tr.src, []), lo, t):
                if u.start > best and (tr.edge is None or plan.edge_ok(tr.edge, u.attrs, ev.attrs)):
                    best = u.start
        return None if best == NEG_INF else NegVertex(t, ev.attrs, best)

    def _insert(self, plan: Plan, alias: str, v: Any) -> None:
        pidx = plan.tb.pane_index(v.time)
        panes = self.panes.setdefault(alias, [])
        if not panes or panes[-1].index != pidx:
            panes.append(Pane(pidx))
        panes[-1].times.append(v.time)
        panes[-1].verts.append(v)
        if alias in plan.totals_states:
            if isinstance(v, NegVertex):
                if v.start > self.maxes.get(alias, NEG_INF):
                    self.maxes[alias] = v.start
            else:
                tot = self.totals.setdefault(alias, {})
                for i, agg in enumerate(v.aggs):
                    k = v.kmin + i
                    if k in tot:
                        plan.combine(tot[k], agg)
                    else:
                        tot[k] = list(agg)
        tp = plan.templates[plan.template_of[alias]]
        if tp.negative and alias in tp.end:
            times, values = self.steps.setdefault(tp.id, ([], []))
            if not values or v.start > values[-1]:
                times.append(v.time)
                values.append(v.start)

    # ------------------------------------------------------------- windows
    def window_result(self, plan: Plan, k: int, acc: list[Any]) -> None:
        """Fold the trends of window k that end in this run into acc."""
        tb = plan.tb
        root = plan.templates[0]
        lo, hi = tb.start(k), tb.end(k)
        if root.trailing is not None:
            m = self.threshold(root.trailing, hi)
            if m > lo:
                lo = m
        for alias in root.end:
            for u in scan(self.panes.get(alias, []), lo, hi):
                i = k - u.kmin
                if 0 <= i < len(u.aggs):
                    plan.combine(acc, u.aggs[i])

    def end_window_range(self, plan: Plan) -> tuple[int, int] | None:
        """Lowest and highest window any END vertex of this run falls in."""
        lo = hi = None
        for alias in plan.templates[0].end:
            panes = self.panes.get(alias)
            if not panes:
                continue
            first, last = panes[0].verts[0], panes[-1].verts[-1]
            a, b = first.kmin, last.kmin + len(last.aggs) - 1
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        return None if lo is None else (lo, hi)

    def closed(self, plan: Plan, target: int) -> None:
        """Every window before `target` was reported: drop their running totals."""
        for tot in self.totals.values():
            for k in [k for k in tot if k < target]:
                del tot[k]

    def expire(self, plan: Plan, horizon: Any) -> None:
        """Drop whole panes before `horizon` (the start of the oldest open window)."""
        pane = plan.tb.pane
        for alias in list(self.panes):
            panes = self.panes[alias]
            drop = 0
            while drop < len(panes) and (panes[drop].index + 1) * pane <= horizon:
                drop += 1
            if drop:
                del panes[:drop]
            if not panes:
                del self.panes[alias]
                self.totals.pop(alias, None)
                self.maxes.pop(alias, None)
        for tid in list(self.steps):
            times, values = self.steps[tid]
            cut = bisect_left(values, horizon)
            if cut:
                del times[:cut], values[:cut]
            if not values:
                del self.steps[tid]
