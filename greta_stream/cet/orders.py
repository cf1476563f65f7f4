"""`OrderGraph`: the CET graph of a Kleene pattern with one order comparison, no edge lists.

The shape (`ordered`): the pattern is one alias `S+`, no negation, and the
edge predicate is exactly one comparison `f(S) op g(NEXT(S))` with op one of
`<`, `<=`, `>`, `>=` (`S.price < NEXT(S).price`, or two different
attributes). Inside a window, u -> v is an edge exactly when u is earlier
than v (time strictly increases) and `key(u) op probe(v)`, where `key` and
`probe` are the two sides (`engine.plan.IndexSpec`): the first window of v,
the only other bound on its predecessors, never cuts a window that holds v.
So a vertex stores its key and probe, nothing else; `orderview.py` answers
successors, counts and reduced edges per window from ordered structures over
the window's positions, in O(n log n) plus the output.

A NaN key (or probe) is `None` here: it compares false with everything, so
such a vertex has no out-edges (in-edges). A key or probe of an unsafe type
(not int, float or bool, or an error) is not comparable without the full
predicate: the run then hands itself over to the edge graph (`graph.py`),
built from the stored vertices by checking the full predicate on exactly the
pairs the edge graph would have checked, so results and the
`predicate_errors` metric equal the edge graph's from then on (`fallback`).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from greta_stream.cet.graph import TrendGraph, Vertex
from greta_stream.cet.negation import Negation
from greta_stream.cet.plan import ExtractionPlan
from greta_stream.engine.plan import UNSAFE, IndexSpec, index_spec

ORDER_OPS = ("<", "<=", ">", ">=")


class OVertex(Vertex):
    """A vertex with its edge key and probe (None: NaN) and the earliest time `lo` of a predecessor."""

    __slots__ = ("key", "probe", "lo")

    def __init__(self, gi: int, time: Any, eid: Any, ekey: int, alias: str, attrs: dict[str, Any], pane: int) -> None:
        super().__init__(gi, time, eid, ekey, alias, attrs, pane)
        self.key: Any = None
        self.probe: Any = None
        self.lo: Any = None

    def __getstate__(self) -> tuple[Any, ...]:
        return (*super().__getstate__(), self.key, self.probe, self.lo)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        super().__setstate__(s[:7])
        self.key, self.probe, self.lo = s[7], s[8], s[9]


def order_spec(plan: ExtractionPlan) -> IndexSpec | None:
    """The comparison of a query of the shape in the module docstring, else None."""
    cq, root = plan.cq, plan.root
    if len(plan.templates) != 1 or len(cq.aliases) != 1 or root.leading is not None or root.trailing is not None:
        return None
    (alias,) = cq.aliases
    incoming = root.incoming.get(alias, ())
    if len(incoming) != 1 or root.start != {alias} or root.end != {alias}:
        return None
    tr = incoming[0]
    if tr.src != alias or tr.negation is not None or tr.edge is None:
        return None
    spec = index_spec(cq.templates[0].transitions[tr.tid])
    if spec is None or spec.op not in ORDER_OPS or len(spec.ops) != 1 or spec.residual is not None:
        return None
    return spec


def ordered(plan: ExtractionPlan) -> bool:
    """Can this query's graph be an `OrderGraph`?"""
    return plan.indexing and not (plan.next_match or plan.contiguous) and order_spec(plan) is not None


class OrderGraph:
    """Vertices of one run in time order with their keys (see module docstring)."""

    reduced = False  # reduced edges are found per window (orderview.py)

    def __init__(self, reduced: bool = False) -> None:
        self.want_reduced = reduced
        self.overts: list[OVertex] = []
        self.otimes: list[Any] = []
        self.next_gi = 0
        self.negation = Negation()  # stays empty: the shape has no negation
        self.ographlets: dict[int, list[Any]] = {}
        self.fallback: TrendGraph | None = None
        self._spec: IndexSpec | None = None

    # The partition reads these; after the hand-over they are the edge graph's.
    @property
    def verts(self) -> list[Any]:
        return self.fallback.verts if self.fallback is not None else self.overts

    @property
    def times(self) -> list[Any]:
        return self.fallback.times if self.fallback is not None else self.otimes

    @property
    def graphlets(self) -> dict[int, list[Any]]:
        return self.fallback.graphlets if self.fallback is not None else self.ographlets

    @property
    def empty(self) -> bool:
        return self.fallback.empty if self.fallback is not None else not self.overts

    def process(self, plan: ExtractionPlan, t: Any, bound: list[tuple[Any, str, int]], next_k: int,
                floor: Any = None) -> None:  # floor: contiguous only, which never takes this graph
        """Add the bindings of time stamp t."""
        if self.fallback is not None:
            self.fallback.process(plan, t, bound, next_k)
            return
        spec = self.spec(plan)
        tb = plan.tb
        kmin = max(tb.first_window(t), next_k)
        if tb.last_window(t) < kmin:
            return  # in no open window: in no trend
        lo = tb.start(kmin)
        made = []
        for ev, alias, ekey in bound:
            key, probe = spec.key(ev.attrs), spec.probe(ev.attrs)  # type: ignore[union-attr]
            if key is UNSAFE or probe is UNSAFE:
                self._hand_over(plan).process(plan, t, bound, next_k)
                return
            made.append((ev, alias, ekey, key, probe))
        pane = tb.pane_index(t)
        for ev, alias, ekey, key, probe in made:
            v = OVertex(self.next_gi, t, ev.id, ekey, alias, ev.attrs, pane)
            v.key, v.probe, v.lo = key, probe, lo
            self.next_gi += 1
            self.overts.append(v)
            self.otimes.append(t)

    def spec(self, plan: ExtractionPlan) -> IndexSpec:
        """The comparison (derived from the plan, not state)."""
        if self._spec is None:
            self._spec = order_spec(plan)
        return self._spec  # type: ignore[return-value]

    def _hand_over(self, plan: ExtractionPlan) -> TrendGraph:
        """Become the edge graph (returned): each stored vertex gets the predecessors the edge graph
        would have found on insertion (full predicate over [lo, time))."""
        g = TrendGraph(self.want_reduced)
        (alias,) = plan.cq.aliases
        edge = plan.root.incoming[alias][0].edge
        assert edge is not None  # the shape has one edge predicate (order_spec)
        verts, times = self.overts, self.otimes
        g.next_gi = verts[0].gi if verts else self.next_gi
        for i, v in enumerate(verts):
            a = bisect_left(times, v.lo, 0, i)
            b = bisect_left(times, v.time, a, i)
            preds: list[Vertex] = [u for u in verts[a:b] if plan.edge_ok(edge, u.attrs, v.attrs)]
            g._insert(plan, v, preds)  # noqa: SLF001 - the edge graph's own insertion step
        g.next_gi = self.next_gi
        self.fallback = g
        self.overts, self.otimes = [], []
        return g

    def window_slice(self, lo: Any, hi: Any) -> tuple[int, int]:
        return bisect_left(self.otimes, lo), bisect_left(self.otimes, hi)

    def expire(self, horizon: Any) -> int:
        """Drop vertices before `horizon`; nothing is cached here, so nothing is released."""
        if self.fallback is not None:
            return self.fallback.expire(horizon)
        cut = bisect_left(self.otimes, horizon)
        if cut:
            del self.overts[:cut], self.otimes[:cut]
        return 0

    def __getstate__(self) -> dict[str, Any]:
        return {"reduced": self.want_reduced, "verts": self.overts, "next_gi": self.next_gi,
                "fallback": self.fallback}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__init__(s["reduced"])  # type: ignore[misc]
        self.next_gi, self.fallback = s["next_gi"], s["fallback"]
        self.overts = s["verts"]
        self.otimes = [v.time for v in self.overts]
