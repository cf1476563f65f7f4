"""Negative sub-patterns of one run: M_N(tau) for every negative template N.

GRETA section 5 (Algorithm 3) builds negative templates and invalidates
edges; like the aggregation engine (docs/DESIGN.md, "Negation as
thresholds") we state negation as a threshold instead. A vertex of N keeps
the latest start of the N-matches that end at it; the running maximum over
N's END vertices, as a step function of time, is M_N(tau) = the latest start
of an N-match whose last event is before tau. Then (docs/QUERY_LANGUAGE.md section 3):

- middle `SEQ(.., X, NOT N, Y, ..)`: x may precede y iff x.time >= M_N(y.time);
- leading: a trend starting at e counts in window k iff start_k > M_N(e.time);
- trailing: a trend ending at e counts in window k iff e.time >= M_N(end_k).

This is an implementation of its own (nothing shared with engine/graph.py
beyond the compiled templates), so the CET tests check it independently.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from greta_stream.cet.plan import ExtractionPlan
from greta_stream.engine.graph import NegVertex
from greta_stream.engine.values import NEG_INF


class Negation:
    """Vertices of the negative templates of one run and their M_N steps."""

    def __init__(self) -> None:
        self.verts: dict[str, list[NegVertex]] = {}  # negative alias -> vertices in time order
        self.times: dict[str, list[Any]] = {}
        self.steps: dict[int, tuple[list[Any], list[Any]]] = {}  # template -> (end times, M_N)

    @property
    def empty(self) -> bool:
        return not self.verts and not self.steps

    def threshold(self, template: int | None, tau: Any) -> Any:
        """M_N(tau): the latest start of an N-match that ends before tau (-inf: none)."""
        if template is None:
            return NEG_INF
        steps = self.steps.get(template)
        if not steps:
            return NEG_INF
        i = bisect_left(steps[0], tau)
        return steps[1][i - 1] if i else NEG_INF

    def vertex(self, plan: ExtractionPlan, alias: str, time: Any, attrs: dict[str, Any]) -> NegVertex | None:
        """The vertex of a negative binding at `time`, computed from earlier vertices."""
        tp = plan.templates[plan.template_of[alias]]
        if alias in tp.start:
            return NegVertex(time, attrs, time)  # a match ending here that starts here starts latest
        best = NEG_INF
        for tr in tp.incoming[alias]:
            verts = self.verts.get(tr.src)
            if not verts:
                continue
            times = self.times[tr.src]
            lo = bisect_left(times, self.threshold(tr.negation, time)) if tr.negation is not None else 0
            for u in verts[lo:bisect_left(times, time)]:
                if u.start > best and (tr.edge is None or plan.edge_ok(tr.edge, u.attrs, attrs)):
                    best = u.start
        return None if best == NEG_INF else NegVertex(time, attrs, best)

    def insert(self, plan: ExtractionPlan, alias: str, v: NegVertex) -> None:
        self.verts.setdefault(alias, []).append(v)
        self.times.setdefault(alias, []).append(v.time)
        tp = plan.templates[plan.template_of[alias]]
        if alias in tp.end:
            times, values = self.steps.setdefault(tp.id, ([], []))
            if not values or v.start > values[-1]:
                times.append(v.time)
                values.append(v.start)

    def expire(self, horizon: Any) -> None:
        """Forget matches that start before `horizon`: they lie before every open window."""
        for alias in list(self.verts):
            times = self.times[alias]
            cut = bisect_left(times, horizon)
            if cut:
                del self.verts[alias][:cut], times[:cut]
            if not times:
                del self.verts[alias], self.times[alias]
        for tid in list(self.steps):
            times, values = self.steps[tid]
            cut = bisect_left(values, horizon)
            if cut:
                del times[:cut], values[:cut]
            if not values:
                del self.steps[tid]
