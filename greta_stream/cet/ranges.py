"""`RangeGraph`: the CET graph with range edges, memory linear in the events.

The ABI graph (Mei et al., ICPP 2021) in the terms of `graph.py`: when every
edge predicate of the pattern is one equality `X.a = NEXT(Y).b` (or absent),
the predecessors of a vertex y across a transition are the vertices of one
*bucket* (the source alias's vertices whose key equals y's probe, in time
order) whose time lies in `[lo, y.time)`, where `lo` is the start of y's
first window or the middle negation's threshold. A vertex stores, per
incoming transition, its bucket and `lo` (`ins`), and the buckets it belongs
to as a source (`outs`); no edge list is ever built, so building a window of
n vertices costs O(n) dict operations and memory O(n), however many edges the
predicates admit.

Its successors across a transition are the vertices that probe one of its
buckets, later than it, whose `lo` is not after it: one contiguous range of
the probers, since `lo` grows with time (windows and thresholds only move
forward). `rangeview.py` counts, prunes, reduces and walks over those ranges.

Keys or probes of unsafe types (`engine.plan.IndexSpec`) take the full
predicate: such an edge u -> y becomes u's own singleton bucket `("e", gi)`,
probed by y, so results and the `predicate_errors` metric equal the scan's.

Buckets are derived (rebuilt on restore); snapshots store vertices and their
range records only.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from greta_stream.cet.graph import Vertex
from greta_stream.cet.negation import Negation
from greta_stream.cet.plan import ExtractionPlan, Incoming
from greta_stream.engine.plan import UNSAFE

ANY = ("*",)  # key and probe of a transition without an edge predicate
NO_EDGES: tuple[Any, ...] = ()


class RVertex(Vertex):
    """A vertex with range edges: `ins` = ((bucket, lo), ...), `outs` = (bucket, ...)."""

    __slots__ = ("ins", "outs")

    def __init__(self, gi: int, time: Any, eid: Any, ekey: int, alias: str, attrs: dict[str, Any], pane: int) -> None:
        self.gi, self.time, self.eid, self.ekey = gi, time, eid, ekey
        self.alias, self.attrs, self.pane = alias, attrs, pane
        self.pred = self.succ = self.rpred = self.rsucc = NO_EDGES  # type: ignore[assignment]
        self.anc, self.gl = 0, None
        self.ins: tuple[tuple[Any, Any], ...] = ()
        self.outs: tuple[Any, ...] = ()

    def __getstate__(self) -> tuple[Any, ...]:
        return (*super().__getstate__(), self.ins, self.outs)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        super().__setstate__(s[:7])
        self.pred = self.succ = self.rpred = self.rsucc = NO_EDGES  # type: ignore[assignment]
        self.ins, self.outs = s[7], s[8]


class RangeGraph:
    """Vertices of one run in time order, with range edges (see module docstring)."""

    reduced = False  # reduction happens per window (rangeview.py)

    def __init__(self, reduced: bool = False) -> None:
        self.verts: list[RVertex] = []
        self.times: list[Any] = []
        self.next_gi = 0
        self.negation = Negation()
        self.graphlets: dict[int, list[Any]] = {}  # none: the partition's cache accounting sees nothing
        self.buckets: dict[Any, tuple[list[RVertex], list[Any]]] = {}  # bucket -> its sources, their times
        self.side: dict[int, tuple[list[RVertex], list[Any]]] = {}  # tid -> sources with unsafe keys
        self.by_alias: dict[str, tuple[list[RVertex], list[Any]]] = {}

    @property
    def empty(self) -> bool:
        return not self.verts and self.negation.empty

    def process(self, plan: ExtractionPlan, t: Any, bound: list[tuple[Any, str, int]], next_k: int,
                floor: Any = None) -> None:  # floor: contiguous only, which never takes this graph
        """Add the bindings of time stamp t (computed from the graph before t, then inserted)."""
        self.ensure_index(plan)
        tb = plan.tb
        kmin = max(tb.first_window(t), next_k)
        lo = tb.start(kmin) if tb.last_window(t) >= kmin else None  # None: in no open window
        made_neg, made_pos = [], []
        for ev, alias, ekey in bound:
            if plan.positive(alias):
                ins = None if lo is None else self._ins(plan, alias, t, ev.attrs, lo)
                if ins is not None:
                    made_pos.append((ev, alias, ekey, ins))
            else:
                nv = self.negation.vertex(plan, alias, t, ev.attrs)
                if nv is not None:
                    made_neg.append((alias, nv))
        for alias, nv in made_neg:
            self.negation.insert(plan, alias, nv)
        pane = tb.pane_index(t)
        for ev, alias, ekey, ins in made_pos:
            v = RVertex(self.next_gi, t, ev.id, ekey, alias, ev.attrs, pane)
            v.ins = ins
            self._insert(plan, v)

    def _ins(self, plan: ExtractionPlan, alias: str, t: Any, attrs: dict[str, Any], lo: Any) -> tuple | None:
        """(bucket, lo) per incoming edge source, or None if the vertex can be in no trend."""
        ins: list[tuple[Any, Any]] = []
        found = start = alias in plan.root.start  # a START needs no predecessor: skip the check
        for tr in plan.root.incoming[alias]:
            entry = self.by_alias.get(tr.src)
            if not entry:
                continue
            lo_tr = lo
            if tr.negation is not None:
                lo_tr = max(lo, self.negation.threshold(tr.negation, t))
            found |= self._probe(plan, tr, entry, attrs, lo_tr, t, ins, start)
        return tuple(ins) if found else None

    def _probe(self, plan: ExtractionPlan, tr: Incoming, entry: tuple[list[RVertex], list[Any]], attrs: dict[str, Any],
               lo: Any, t: Any, ins: list[tuple[Any, Any]], start: bool) -> bool:
        """Record y's edges across one transition in `ins`; True if it has a predecessor
        (not checked for a START: False)."""
        probe = ANY if tr.edge is None else tr.index.probe(attrs)  # type: ignore[union-attr]
        if probe is UNSAFE:
            return self._explicit(plan, tr, *entry, attrs, lo, t, ins)
        found = False
        if probe is not None:
            bucket = (tr.tid, probe)
            ins.append((bucket, lo))
            if not start:
                times = self.buckets.get(bucket, ((), ()))[1]
                found = bisect_left(times, lo) < bisect_left(times, t)
        side = self.side.get(tr.tid)
        if side:
            found |= self._explicit(plan, tr, *side, attrs, lo, t, ins)
        return found

    @staticmethod
    def _explicit(plan: ExtractionPlan, tr: Incoming, verts: list[RVertex], times: list[Any], attrs: dict[str, Any],
                  lo: Any, t: Any, ins: list[tuple[Any, Any]]) -> bool:
        """Edges checked with the full predicate: each source's singleton bucket."""
        found = False
        for u in verts[bisect_left(times, lo):bisect_left(times, t)]:
            if tr.edge is None or plan.edge_ok(tr.edge, u.attrs, attrs):
                ins.append((("e", u.gi), lo))
                found = True
        return found

    def _insert(self, plan: ExtractionPlan, v: RVertex) -> None:
        self.next_gi += 1
        self.verts.append(v)
        self.times.append(v.time)
        verts, times = self.by_alias.setdefault(v.alias, ([], []))
        verts.append(v)
        times.append(v.time)
        self._index(plan, v)

    def _index(self, plan: ExtractionPlan, v: RVertex) -> None:
        """Put v in the buckets it is a source of (its `outs`)."""
        outs: list[tuple[Any, Any]] = [("e", v.gi)]
        for tr in plan.outgoing[v.alias]:
            key = ANY if tr.edge is None else tr.index.key(v.attrs)  # type: ignore[union-attr]
            if key is None:
                continue  # NaN: equal to nothing
            if key is UNSAFE:
                verts, times = self.side.setdefault(tr.tid, ([], []))
            else:
                outs.append((tr.tid, key))
                verts, times = self.buckets.setdefault((tr.tid, key), ([], []))
            verts.append(v)
            times.append(v.time)
        v.outs = tuple(outs)

    def window_slice(self, lo: Any, hi: Any) -> tuple[int, int]:
        return bisect_left(self.times, lo), bisect_left(self.times, hi)

    def expire(self, horizon: Any) -> int:
        """Drop vertices before `horizon`; nothing is cached, so nothing is released."""
        self.negation.expire(horizon)
        cut = bisect_left(self.times, horizon)
        if cut:
            del self.verts[:cut], self.times[:cut]
            for table in (self.by_alias, self.buckets, self.side):
                _trim(table, horizon)
        return 0

    def __getstate__(self) -> dict[str, Any]:
        return {"verts": self.verts, "next_gi": self.next_gi, "negation": self.negation}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
        self.next_gi, self.negation = s["next_gi"], s["negation"]
        for v in s["verts"]:
            self.verts.append(v)
            self.times.append(v.time)
            verts, times = self.by_alias.setdefault(v.alias, ([], []))
            verts.append(v)
            times.append(v.time)
        self.indexed = False  # buckets need the plan: rebuilt by `ensure_index`

    def ensure_index(self, plan: ExtractionPlan) -> None:
        """Rebuild the buckets of a restored graph (they are derived, not state)."""
        if not getattr(self, "indexed", True):
            for v in self.verts:
                self._index(plan, v)
            self.indexed = True


def _trim(table: dict[Any, tuple[list[Any], list[Any]]], horizon: Any) -> None:
    for key in list(table):
        verts, times = table[key]
        cut = bisect_left(times, horizon)
        if cut == len(times):
            del table[key]
        elif cut:
            del verts[:cut], times[:cut]


def ranged(plan: ExtractionPlan) -> bool:
    """Can this query's graph use range edges? Every edge is one equality or none,
    under skip-till-any-match (the other strategies pick predecessors one by one)."""
    if plan.next_match or plan.contiguous:
        return False
    return all(tr.edge is None or (tr.index is not None and tr.index.residual is None)
               for trs in plan.root.incoming.values() for tr in trs)
