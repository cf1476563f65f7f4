"""Selection strategies in the general engine (SEMANTICS section 8, docs/QUERY_LANGUAGE.md section 11).

Under skip-till-any-match a new event combines every admitted predecessor
(running totals, indexes: graph.py). Under the stricter strategies it weighs
its predecessors one by one: skip-till-next-match keeps, per vertex and
transition, the time of its earliest candidate (`Vertex.taken`) and a list
per transition of the vertices still waiting for one (`Run.open`, derived
state), so the work per event follows those, not the window; contiguous
reads only the predecessors at the partition's previous time stamp (the
caller's `lo_t`). `graph.Run` mixes these methods in.
"""

from __future__ import annotations

from typing import Any

from greta_stream.engine.ingest import Event
from greta_stream.engine.plan import GraphPlan
from greta_stream.engine.vertices import Pane, Vertex, scan


class Selection:
    """The strategies' part of `graph.Run` (its `panes`, `layout` and `open`)."""

    panes: dict[str, list[Pane]]
    layout: Any
    open: dict[int, list[Vertex]]

    def _each(self, plan: GraphPlan, tr: Any, ev: Event, kmin: int, kmax: int, lo_t: Any, mm: Any) -> int:
        """The predecessors a selection strategy admits, one by one (SEMANTICS
        section 8). Contiguous: `lo_t` is already the partition's previous time
        stamp. Skip-till-next-match: ev is a candidate of every predecessor
        whose edge holds; it is that predecessor's next event only if no
        candidate came at an earlier time (`Vertex.taken`)."""
        lw = self.layout.lw  # type: ignore[union-attr]
        acc, t, ident = 0, ev.time, tr.ident
        if plan.next_match:
            preds = self._open(tr, lo_t, t)
        else:
            preds = scan(self.panes.get(tr.src, []), lo_t, t)
        for u in preds:
            if tr.edge is not None and not plan.edge_ok(tr.edge, u.attrs, ev.attrs):
                continue
            if plan.next_match:
                taken = u.taken
                if taken is None:
                    u.taken = {ident: t}
                else:
                    first = taken.setdefault(ident, t)
                    if first != t:
                        continue
            acc += u.agg >> ((kmin - u.kmin) * lw)
            if mm is not None:
                for k in range(max(kmin, u.kmin), min(kmax, u.kmin + u.n - 1) + 1):
                    plan.mm_combine(mm[k - kmin], u.mm[k - u.kmin])
        return acc

    def _open(self, tr: Any, lo_t: Any, t: Any) -> list[Vertex]:
        """The vertices of tr's source that no candidate took before t, from
        lo_t on (it only grows: the ones before it are dropped for good). A
        vertex taken by a candidate leaves the list once time passes it, so
        the work per event follows the predecessors still waiting for their
        next event, not the window."""
        ident = tr.ident
        have = self.open.get(ident)
        if have is None:
            have = [u for pane in self.panes.get(tr.src, []) for u in pane.verts]
        keep = []
        for u in have:
            if u.time < lo_t:
                continue
            taken = u.taken
            if taken is not None and taken.get(ident, t) != t:
                continue
            keep.append(u)
        self.open[ident] = keep
        return keep
