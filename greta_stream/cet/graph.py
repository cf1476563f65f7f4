"""The CET graph of one run: positive vertices, their edges, reduced edges.

CET paper section 4.1: the vertices are the events a query matches, the
edges connect events that may be adjacent in a trend. Here a vertex is an
event bound to one positive alias (GRETA's vertex), edges follow the
template's transitions, their edge predicates and middle negation
(`negation.py`). Edges never depend on the window: an edge x -> y holds in
every window that holds x and y. A vertex that is not a START and has no
predecessor is in no trend and is not created (GRETA's pruning).

For `complete` trends each edge is also marked *reduced* when no longer path
joins its ends (the transitive reduction): a trend using an edge x -> y that
some path x -> u -> ... -> y bypasses can take that detour and grow, so it
is not complete. Ancestor sets (ints used as bitsets, bit = position in the
run) decide this when y is inserted; nothing later can change it, since
every vertex between x and y is in by then.

Predecessors through an equality edge (`X.a = NEXT(X).b`, any arithmetic of
one side) come from a hash index per transition (`KeyIndex`: the source
alias's vertices by key, in time order), so building the graph never checks
the edge against every earlier vertex; other edges are checked one by one.
Keys and probes of unsafe types (`engine.plan.IndexSpec`) take the full
predicate, so results and the `predicate_errors` metric equal the scan's.

Snapshots store edges as positions, so pickling never recurses along paths;
the key indexes are derived and rebuilt on first use.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from greta_stream.cet.negation import NEG_INF, Negation
from greta_stream.cet.plan import ExtractionPlan, Incoming
from greta_stream.engine.plan import UNSAFE


class Vertex:
    """An event bound to a positive alias, with its edges in time order."""

    __slots__ = (
        "gi", "time", "eid", "ekey", "alias", "attrs", "pane", "pred", "succ", "rpred", "rsucc", "anc", "gl", "taken",
    )

    def __init__(self, gi: int, time: Any, eid: Any, ekey: int, alias: str, attrs: dict[str, Any], pane: int) -> None:
        self.gi, self.time, self.eid, self.ekey = gi, time, eid, ekey
        self.alias, self.attrs, self.pane = alias, attrs, pane
        self.pred: list[Vertex] = []
        self.succ: list[Vertex] = []
        self.rpred: list[Vertex] = []  # reduced edges (complete mode only)
        self.rsucc: list[Vertex] = []
        self.anc = 0
        self.gl: Any = None  # its graphlet, once built (cache, not state)
        self.taken: dict[int, Any] | None = None  # skip-till-next-match: transition -> time of its first candidate

    def __getstate__(self) -> tuple[Any, ...]:
        base = (self.gi, self.time, self.eid, self.ekey, self.alias, self.attrs, self.pane)
        taken = getattr(self, "taken", None)  # unset on the vertices of range and order graphs
        return base if taken is None else (*base, taken)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.gi, self.time, self.eid, self.ekey, self.alias, self.attrs, self.pane = s[:7]
        self.taken = s[7] if len(s) > 7 else None
        self.pred, self.succ, self.rpred, self.rsucc, self.anc, self.gl = [], [], [], [], 0, None

    def __repr__(self) -> str:
        return f"Vertex({self.alias}:{self.eid}@{self.time})"


class KeyIndex:
    """The vertices of one transition's source alias by edge key, each list in time order."""

    __slots__ = ("buckets", "side")

    def __init__(self) -> None:
        self.buckets: dict[Any, tuple[list[Vertex], list[Any]]] = {}
        self.side: tuple[list[Vertex], list[Any]] = ([], [])  # keys of unsafe types: full predicate

    def insert(self, tr: Incoming, v: Vertex) -> None:
        key = tr.index.key(v.attrs)  # type: ignore[union-attr]
        if key is None:
            return  # NaN: equal to nothing
        verts, times = self.side if key is UNSAFE else self.buckets.setdefault(key, ([], []))
        verts.append(v)
        times.append(v.time)

    def expire(self, horizon: Any) -> None:
        for key in list(self.buckets):
            verts, times = self.buckets[key]
            cut = bisect_left(times, horizon)
            if cut == len(times):
                del self.buckets[key]
            elif cut:
                del verts[:cut], times[:cut]
        cut = bisect_left(self.side[1], horizon)
        del self.side[0][:cut], self.side[1][:cut]


def _first_candidates(found: list[Vertex], tid: int, t: Any) -> list[Vertex]:
    """Skip-till-next-match (SEMANTICS section 8): of the predecessors whose
    edge to an event at t holds, the ones for which it is the earliest candidate
    across transition `tid` (events at one time are candidates together)."""
    out = []
    for u in found:
        taken = u.taken
        if taken is None:
            u.taken = {tid: t}
        elif taken.setdefault(tid, t) != t:
            continue
        out.append(u)
    return out


class TrendGraph:
    """Vertices of one run in time order (positions are `gi - verts[0].gi`)."""

    def __init__(self, reduced: bool) -> None:
        self.reduced = reduced
        self.verts: list[Vertex] = []
        self.times: list[Any] = []
        self.by_alias: dict[str, tuple[list[Vertex], list[Any]]] = {}
        self.next_gi = 0
        self.negation = Negation()
        self.graphlets: dict[int, list[Any]] = {}  # pane -> graphlets (cache, not state)
        self.index: dict[int, KeyIndex] | None = None  # transition -> key index (derived, not state)

    @property
    def empty(self) -> bool:
        return not self.verts and self.negation.empty

    # ------------------------------------------------------------ building
    def process(self, plan: ExtractionPlan, t: Any, bound: list[tuple[Any, str, int]], next_k: int,
                floor: Any = None) -> None:
        """Add the bindings (event, alias, event key) of time stamp t; `floor`
        is the partition's previous time stamp (contiguous only).

        All of them are computed from the graph before t, then inserted: time
        strictly increases along a trend and along a negative match.
        """
        neg = self.negation
        made_neg = []
        made_pos = []
        for ev, alias, ekey in bound:
            if plan.positive(alias):
                preds = self._preds(plan, alias, t, ev.attrs, next_k, floor)
                if preds is not None:
                    made_pos.append((ev, alias, ekey, preds))
            else:
                nv = neg.vertex(plan, alias, t, ev.attrs)
                if nv is not None:
                    made_neg.append((alias, nv))
        for alias, nv in made_neg:
            neg.insert(plan, alias, nv)
        pane = plan.tb.pane_index(t)
        for ev, alias, ekey, preds in made_pos:
            self._insert(plan, Vertex(self.next_gi, t, ev.id, ekey, alias, ev.attrs, pane), preds)

    def _preds(self, plan: ExtractionPlan, alias: str, t: Any, attrs: dict[str, Any], next_k: int,
               floor: Any = None) -> list[Vertex] | None:
        """Predecessors of a new vertex in time order, or None if it can be in no trend."""
        tb = plan.tb
        kmin = max(tb.first_window(t), next_k)
        if tb.last_window(t) < kmin:
            return None
        lo = tb.start(kmin)
        preds: list[Vertex] = []
        sources = 0
        for tr in plan.root.incoming[alias]:
            entry = self.by_alias.get(tr.src)
            if not entry:
                continue
            lo_tr = lo
            if tr.negation is not None:
                m = self.negation.threshold(tr.negation, t)
                if m > lo_tr:
                    lo_tr = m
            if plan.contiguous and floor is not None and floor > lo_tr:
                lo_tr = floor
            found = self._from(plan, tr, entry, attrs, lo_tr, t)
            if found and plan.next_match:
                found = _first_candidates(found, tr.tid, t)
            if found:
                preds += found
                sources += 1
        if sources > 1:
            preds.sort(key=lambda u: u.gi)
        if not preds and alias not in plan.root.start:
            return None
        return preds

    def _from(self, plan: ExtractionPlan, tr: Incoming, entry: tuple[list[Vertex], list[Any]], attrs: dict[str, Any],
              lo: Any, t: Any) -> list[Vertex]:
        """Predecessors across one transition, time in [lo, t), in time order."""
        spec = tr.index
        probe = UNSAFE if spec is None else spec.probe(attrs)
        if probe is UNSAFE:
            verts, times = entry
            return self._checked(plan, tr.edge, verts, times, attrs, lo, t)
        index = self._key_index(plan)[tr.tid]
        out: list[Vertex] = []
        bucket = index.buckets.get(probe) if probe is not None else None
        if bucket is not None:
            verts, times = bucket
            out = verts[bisect_left(times, lo):bisect_left(times, t)]
            if spec.residual is not None:  # type: ignore[union-attr]
                out = [u for u in out if plan.edge_ok(spec.residual, u.attrs, attrs)]  # type: ignore[union-attr]
        if index.side[0]:
            side = self._checked(plan, tr.edge, *index.side, attrs, lo, t)
            if side:
                out = sorted(out + side, key=lambda u: u.gi)
        return out

    @staticmethod
    def _checked(plan: ExtractionPlan, edge: Any, verts: list[Vertex], times: list[Any], attrs: dict[str, Any],
                 lo: Any, t: Any) -> list[Vertex]:
        window = verts[bisect_left(times, lo):bisect_left(times, t)]
        if edge is None:
            return window
        return [u for u in window if plan.edge_ok(edge, u.attrs, attrs)]

    def _key_index(self, plan: ExtractionPlan) -> dict[int, KeyIndex]:
        """The key indexes of the indexed transitions, built from the live vertices on first use."""
        if self.index is None:
            self.index = {}
            for tr in self._indexed(plan):
                idx = self.index[tr.tid] = KeyIndex()
                for v in self.by_alias.get(tr.src, ((), ()))[0]:
                    idx.insert(tr, v)
        return self.index

    @staticmethod
    def _indexed(plan: ExtractionPlan) -> list[Incoming]:
        return [tr for trs in plan.root.incoming.values() for tr in trs if tr.index is not None]

    def _insert(self, plan: ExtractionPlan, v: Vertex, preds: list[Vertex]) -> None:
        if self.index is not None:
            for tr in self._indexed(plan):
                if tr.src == v.alias:
                    self.index[tr.tid].insert(tr, v)
        self.next_gi += 1
        self.verts.append(v)
        self.times.append(v.time)
        verts, times = self.by_alias.setdefault(v.alias, ([], []))
        verts.append(v)
        times.append(v.time)
        v.pred = preds
        for u in preds:
            u.succ.append(v)
        if self.reduced:
            self._reduce(v)

    def _reduce(self, v: Vertex) -> None:
        """Mark v's reduced in-edges and set its ancestor bits (see module docstring)."""
        base = self.verts[0].gi
        bypass = 0
        for u in v.pred:
            bypass |= u.anc
        anc = bypass
        for u in v.pred:
            bit = 1 << (u.gi - base)
            anc |= bit
            if not bypass & bit:
                v.rpred.append(u)
                u.rsucc.append(v)
        v.anc = anc

    # ------------------------------------------------------------- windows
    def window_slice(self, lo: Any, hi: Any) -> tuple[int, int]:
        """Positions [a, b) of the vertices with lo <= time < hi."""
        return bisect_left(self.times, lo), bisect_left(self.times, hi)

    def expire(self, horizon: Any) -> int:
        """Drop vertices before `horizon` (the start of the oldest open window).

        Returns the graphlet cache units released.
        """
        self.negation.expire(horizon)
        cut = bisect_left(self.times, horizon)
        if not cut:
            return 0
        for idx in (self.index or {}).values():
            idx.expire(horizon)
        first_gi = self.verts[cut].gi if cut < len(self.verts) else self.next_gi
        for v in self.verts[:cut]:  # break the pred/succ cycles: refcounting frees them
            v.pred = v.succ = v.rpred = v.rsucc = []  # type: ignore[assignment]
            v.gl = None
        del self.verts[:cut], self.times[:cut]
        for alias in list(self.by_alias):
            verts, times = self.by_alias[alias]
            c = bisect_left(times, horizon)
            del verts[:c], times[:c]
            if not verts:
                del self.by_alias[alias]
        released = 0
        for pane in [p for p, gls in self.graphlets.items() if gls[-1].last_gi < first_gi]:
            released += sum(g.units for g in self.graphlets.pop(pane))
        for v in self.verts:
            if v.pred and v.pred[0].gi < first_gi:
                v.pred = [u for u in v.pred if u.gi >= first_gi]
                v.rpred = [u for u in v.rpred if u.gi >= first_gi]
            if v.anc:
                v.anc >>= cut
        return released

    # ------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        base = self.verts[0].gi if self.verts else self.next_gi
        edges = []
        for v in self.verts:
            reduced = {u.gi for u in v.rpred}
            edges.append([(u.gi - base) * 2 + (u.gi in reduced) for u in v.pred])
        return {"reduced": self.reduced, "verts": self.verts, "edges": edges, "next_gi": self.next_gi,
                "negation": self.negation}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__init__(s["reduced"])  # type: ignore[misc]
        self.next_gi, self.negation = s["next_gi"], s["negation"]
        for v, edges in zip(s["verts"], s["edges"], strict=True):
            preds = [self.verts[e >> 1] for e in edges]
            v.pred = preds
            for u in preds:
                u.succ.append(v)
            self.verts.append(v)
            self.times.append(v.time)
            verts, times = self.by_alias.setdefault(v.alias, ([], []))
            verts.append(v)
            times.append(v.time)
            if self.reduced:
                base = self.verts[0].gi
                anc = 0
                for u, e in zip(preds, edges, strict=True):
                    anc |= u.anc | (1 << (u.gi - base))
                    if e & 1:
                        v.rpred.append(u)
                        u.rsucc.append(v)
                v.anc = anc


__all__ = ["NEG_INF", "KeyIndex", "TrendGraph", "Vertex"]
