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

from bisect import bisect_left
from typing import Any

from greta_stream.engine.index import BucketIndex, aligned
from greta_stream.engine.index import build as build_index
from greta_stream.engine.ingest import Event
from greta_stream.engine.lanes import Layout
from greta_stream.engine.plan import NEG_INF, UNSAFE, GraphPlan
from greta_stream.engine.selection import Selection
from greta_stream.engine.values import FLOAT_BITS
from greta_stream.engine.vertices import NegVertex, Pane, Vertex, scan

__all__ = ["NegVertex", "Pane", "Run", "Vertex", "scan"]  # the vertices live in vertices.py; state pickled before names them here


class Run(Selection):
    """All state of one run: panes per state, packed totals, M_N steps.

    `totals[s]` is the packed sum of every vertex of positive state s, lane 0
    = window `base`: the running totals a plain transition combines, the
    END states' window results, and the bound that keeps every packed sum of
    s's vertices below the layout's guard (lanes.py). `fscale` is the S of
    float cells (units of 2**-S). Indexes (index.py) are derived and rebuilt
    after a restore.
    """

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.panes: dict[str, list[Pane]] = {}
        self.totals: dict[str, int] = {}
        self.mm_totals: dict[str, dict[int, list[Any]]] = {}  # MIN/MAX per window
        self.base: int | None = None
        self.layout: Layout | None = None
        self.fscale = 0
        self.ibits = self.fbits = 0  # bit length bounds of summed |int| and scaled |float| values
        self.maxes: dict[str, Any] = {}  # negative state -> latest match start so far
        self.steps: dict[int, tuple[list[Any], list[Any]]] = {}  # template -> (end times, M_N)
        self.indexes: dict[int, Any] = {}
        self.open: dict[int, list[Vertex]] = {}  # skip-till-next-match: transition -> vertices without a candidate yet
        self.upcoming: list[Event] = []

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("indexes", "open", "upcoming", "_keys_of")}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.__dict__.update(s)
        self.indexes, self.open, self.upcoming = {}, {}, []

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
    def process(self, plan: GraphPlan, t: Any, bound: list[tuple[Event, str]], next_k: int,
                floor: Any = NEG_INF) -> None:
        """Add the events of time stamp t (each with one alias it binds to);
        `floor` is the partition's previous time stamp (contiguous only)."""
        if self.layout is None:
            self.layout = Layout(plan.base_cells, 30, 0, plan.guard_bits)
        if self.base is None:
            self.base = next_k
        for ev, alias in bound:
            if alias in plan.own_sums:
                self._fit_values(plan, alias, ev.attrs)
        made: list[tuple[str, Any]] = []
        for ev, alias in bound:
            tp = plan.templates[plan.template_of[alias]]
            v = self._negative(plan, tp, alias, ev) if tp.negative else self._positive(plan, tp, alias, ev, next_k, floor)
            if v is not None:
                made.append((alias, v))
        for alias, v in made:
            self._place(plan, alias, v)
            for ident in plan.open_of_src.get(alias, ()):
                got = self.open.get(ident)
                if got is not None:
                    got.append(v)
        for alias, v in made:
            if isinstance(v, Vertex):
                self._account(plan, alias, v)

    # ------------------------------------------------------ packed values
    def _fit_values(self, plan: GraphPlan, alias: str, attrs: dict[str, Any]) -> None:
        """Promote the layout so the event's summed values fit (before any use)."""
        lay = self.layout
        assert lay is not None
        have = lay.off
        cells, shift = set(), 0
        for i, attr in plan.own_sums[alias]:
            v = attrs[attr]
            if isinstance(v, float):
                num, den = v.as_integer_ratio()
                e = den.bit_length() - 1
                if e > self.fscale + shift:
                    # Scale in steps of 32 bits (any S >= e is exact), so a
                    # stream of floats of varying exponents repacks rarely.
                    new_shift = min(-(-e // 32) * 32, FLOAT_BITS) - self.fscale
                    self.fbits += new_shift - shift  # the floats summed so far scale up
                    shift = new_shift
                self.fbits = max(self.fbits, abs(num).bit_length() + self.fscale + shift - e)
                cells.add(f"fc{i}")
                if num:
                    cells.add(f"fp{i}" if num > 0 else f"fn{i}")
            else:
                self.ibits = max(self.ibits, abs(v).bit_length())
                if v:
                    cells.add(f"ip{i}" if v > 0 else f"in{i}")
        a = max(self.ibits, self.fbits)
        if a > lay.a or shift or not all(c in have for c in cells):
            cells.update(lay.cells)
            order = tuple(c for c in (*lay.cells, *sorted(cells - set(lay.cells))))
            self._relayout(Layout(order, lay.hc, -(-a // 32) * 32 if a > lay.a else lay.a, lay.b), shift)

    def _relayout(self, new: Layout, fshift: int = 0) -> None:
        """Repack every packed value of the run in a new layout."""
        old = self.layout
        assert old is not None
        for panes in self.panes.values():
            for pane in panes:
                for v in pane.verts:
                    if isinstance(v, Vertex):
                        v.agg = old.repack(v.agg, new, fshift)
        for s in self.totals:
            self.totals[s] = old.repack(self.totals[s], new, fshift)
        self.layout = new
        self.fscale += fshift
        self.indexes = {}

    def _account(self, plan: GraphPlan, alias: str, v: Vertex) -> None:
        """Add a new vertex to its state's total and indexes; widen cells if needed."""
        lay = self.layout
        assert lay is not None and self.base is not None
        tot = self.totals.get(alias, 0) + aligned(v.agg, v.kmin, self.base, lay.lw)
        self.totals[alias] = tot
        if v.mm is not None:
            mt = self.mm_totals.setdefault(alias, {})
            for j, row in enumerate(v.mm):
                k = v.kmin + j
                if k in mt:
                    plan.mm_combine(mt[k], row)
                else:
                    mt[k] = list(row)
        for tr in plan.dst_of_src.get(alias, ()):
            idx = self.indexes.get(tr.ident)
            if idx is not None and not idx.insert(v):
                del self.indexes[tr.ident]  # key outside the domain: rebuild on next use
        while not lay.ok(self.totals[alias]):
            lay = Layout(lay.cells, lay.hc * 2, lay.a, lay.b)
            self._relayout(lay)

    # ----------------------------------------------------------- vertices
    def _positive(self, plan: GraphPlan, tp: Any, alias: str, ev: Event, next_k: int, floor: Any) -> Vertex | None:
        tb, t = plan.tb, ev.time
        kmin, kmax = max(tb.first_window(t), next_k), tb.last_window(t)
        if kmax < kmin:
            return None
        lay = self.layout
        assert lay is not None and self.base is not None
        lw, n = lay.lw, kmax - kmin + 1
        acc = 0
        mm = [plan.mm_zero() for _ in range(n)] if plan.has_mm else None
        if alias in tp.start:
            lo = kmin
            if tp.leading is not None:
                m = self.threshold(tp.leading, t)
                if m != NEG_INF:
                    lo = max(lo, tb.last_window(m) + 1)
            if lo <= kmax:
                acc = lay.ones(kmax - lo + 1) << ((lo - kmin) * lw)
        for tr in tp.incoming[alias]:
            if tr.plain:
                tot = self.totals.get(tr.src)
                if tot:
                    acc += tot >> ((kmin - self.base) * lw)
                if mm is not None:
                    mt = self.mm_totals.get(tr.src)
                    if mt:
                        for k in range(kmin, kmax + 1):
                            if k in mt:
                                plan.mm_combine(mm[k - kmin], mt[k])
                continue
            lo_t = tb.start(kmin)
            if tr.negation is not None:
                m = self.threshold(tr.negation, t)
                if m > lo_t:
                    lo_t = m
            if tr.each:
                acc += self._each(plan, tr, ev, kmin, kmax, max(lo_t, floor) if plan.contiguous else lo_t, mm)
                continue
            if tr.index is not None:
                got = self._indexed(plan, tr, ev, kmin, lo_t)
                if got is not None:
                    acc += got
                    continue
            for u in scan(self.panes.get(tr.src, []), lo_t, t):
                if tr.edge is not None and not plan.edge_ok(tr.edge, u.attrs, ev.attrs):
                    continue
                acc += u.agg >> ((kmin - u.kmin) * lw)
                if mm is not None:
                    for k in range(max(kmin, u.kmin), min(kmax, u.kmin + u.n - 1) + 1):
                        plan.mm_combine(mm[k - kmin], u.mm[k - u.kmin])
        cnt = lay.count_part(acc, n)
        if not cnt:
            return None
        off = lay.off
        for c in plan.own_counts.get(alias, ()):
            acc += cnt << off[c]
        for i, attr in plan.own_sums.get(alias, ()):
            v = ev.attrs[attr]
            if isinstance(v, float):
                num, den = v.as_integer_ratio()
                acc += cnt << off[f"fc{i}"]
                if num:
                    mag = abs(num) << (self.fscale - den.bit_length() + 1)
                    acc += (cnt * mag) << off[f"fp{i}" if num > 0 else f"fn{i}"]
            elif v:
                acc += (cnt * abs(v)) << off[f"ip{i}" if v > 0 else f"in{i}"]
        if mm is not None:
            self._own_mm(plan, alias, ev.attrs, mm, lay.nonzero_lanes(cnt, n), lw)
        return Vertex(t, ev.attrs, ev.id, kmin, n, acc, mm)

    @staticmethod
    def _own_mm(plan: GraphPlan, alias: str, attrs: dict[str, Any], mm: list[list[Any]], live: int, lw: int) -> None:
        """Fold the event's value into MIN/MAX of the windows with a trend ending here."""
        own = plan.own_mm.get(alias)
        if not own:
            return
        for j, row in enumerate(mm):
            if (live >> (j * lw)) & 1:
                for m, kind, attr in own:
                    v = attrs[attr]
                    if (v < row[m]) if kind == "min" else (v > row[m]):
                        row[m] = v

    def _indexed(self, plan: GraphPlan, tr: Any, ev: Event, kmin: int, lo_t: Any) -> int | None:
        """The combined aggregate of the admitted predecessors, from an index;
        None when the new event's probe is not safe (the caller scans)."""
        spec = tr.index
        probe = spec.probe(ev.attrs)
        if probe is UNSAFE:
            return None
        lw = self.layout.lw  # type: ignore[union-attr]
        idx = self.indexes.get(tr.ident)
        if idx is None:
            panes = self.panes.get(tr.src, ())
            if len(panes) * 8 < plan.index_min_vertices and sum(len(p.verts) for p in panes) < plan.index_min_vertices:
                return None  # few predecessors: the scan is cheaper
        if idx is None or kmin - idx.base > 2 * plan.windows_per_event + 8:
            idx = self._build_index(plan, tr, lo_t)
        if tr.negation is not None and lo_t != idx.threshold:
            idx.evict_before(lo_t)
        acc = 0
        if probe is not None:
            if isinstance(idx, BucketIndex):
                for u in idx.candidates(probe):
                    if u.time >= lo_t and plan.edge_ok(spec.residual, u.attrs, ev.attrs):
                        acc += u.agg >> ((kmin - u.kmin) * lw)
            else:
                got = idx.query(probe)
                if got:
                    acc = aligned(got, idx.base, kmin, lw)
        for u in idx.side:
            if u.time >= lo_t and plan.edge_ok(tr.edge, u.attrs, ev.attrs):
                acc += u.agg >> ((kmin - u.kmin) * lw)
        return acc

    def _build_index(self, plan: GraphPlan, tr: Any, lo_t: Any) -> Any:
        verts = [u for pane in self.panes.get(tr.src, []) for u in pane.verts]
        if tr.negation is not None:
            verts = [u for u in verts if u.time >= lo_t]
        extra = self._upcoming_keys(plan, tr)
        idx = build_index(tr.index, self.base, self.layout.lw, verts, extra)  # type: ignore[arg-type, union-attr]
        idx.threshold = lo_t if tr.negation is not None else None
        self.indexes[tr.ident] = idx
        return idx

    def _upcoming_keys(self, plan: GraphPlan, tr: Any) -> list[Any]:
        """Index keys of the batch's events of tr's source type, once per batch
        (an index rebuilt within a batch reuses them)."""
        cache: tuple[list[Event], dict[Any, list[Any]]] | None = self.__dict__.get("_keys_of")
        if cache is None or cache[0] is not self.upcoming:
            cache = self.__dict__["_keys_of"] = (self.upcoming, {})
        keys = cache[1].get(tr.ident)
        if keys is None:
            src_type = plan.cq.aliases[tr.src].type
            keys = cache[1][tr.ident] = [tr.index.key(e.attrs) for e in self.upcoming if e.type == src_type]
        return keys

    def _negative(self, plan: GraphPlan, tp: Any, alias: str, ev: Event) -> NegVertex | None:
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

    def _place(self, plan: GraphPlan, alias: str, v: Any) -> None:
        pidx = plan.tb.pane_index(v.time)
        panes = self.panes.setdefault(alias, [])
        if not panes or panes[-1].index != pidx:
            panes.append(Pane(pidx))
        panes[-1].times.append(v.time)
        panes[-1].verts.append(v)
        if isinstance(v, NegVertex):
            if alias in plan.totals_states and v.start > self.maxes.get(alias, NEG_INF):
                self.maxes[alias] = v.start
            tp = plan.templates[plan.template_of[alias]]
            if alias in tp.end:
                times, values = self.steps.setdefault(tp.id, ([], []))
                if not values or v.start > values[-1]:
                    times.append(v.time)
                    values.append(v.start)

    # ------------------------------------------------------------- windows
    def window_result(self, plan: GraphPlan, k: int, acc: list[Any]) -> None:
        """Fold the trends of window k that end in this run into acc."""
        tb, lay = plan.tb, self.layout
        if lay is None:
            return
        root = plan.templates[0]
        cells: dict[str, int] = {}
        mm = plan.mm_zero() if plan.has_mm else None
        if root.trailing is None:
            one = len(root.end) == 1
            for alias in root.end:
                tot = self.totals.get(alias)
                if tot and self.base is not None and k >= self.base:
                    if one:
                        cells = lay.lane(tot, k - self.base)
                    else:
                        for c, x in lay.lane(tot, k - self.base).items():
                            cells[c] = cells.get(c, 0) + x
                if mm is not None:
                    row = self.mm_totals.get(alias, {}).get(k)
                    if row is not None:
                        plan.mm_combine(mm, row)
        else:
            lo, hi = tb.start(k), tb.end(k)
            m = self.threshold(root.trailing, hi)
            if m > lo:
                lo = m
            for alias in root.end:
                for u in scan(self.panes.get(alias, []), lo, hi):
                    j = k - u.kmin
                    if 0 <= j < u.n:
                        for c, x in lay.lane(u.agg, j).items():
                            cells[c] = cells.get(c, 0) + x
                        if mm is not None:
                            plan.mm_combine(mm, u.mm[j])
        if cells.get("n"):
            plan.combine(acc, plan.row_from_cells(cells, self.fscale, mm))

    def end_window_range(self, plan: GraphPlan) -> tuple[int, int] | None:
        """Lowest and highest window any END vertex of this run falls in."""
        lo = hi = None
        for alias in plan.templates[0].end:
            panes = self.panes.get(alias)
            if not panes:
                continue
            first, last = panes[0].verts[0], panes[-1].verts[-1]
            a, b = first.kmin, last.kmin + last.n - 1
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        return None if lo is None or hi is None else (lo, hi)

    def closed(self, plan: GraphPlan, target: int) -> None:
        """Every window before `target` was reported: shift their lanes out."""
        if self.base is not None and target > self.base and self.layout is not None:
            shift = (target - self.base) * self.layout.lw
            for s in self.totals:
                self.totals[s] >>= shift
            self.base = target
        for mt in self.mm_totals.values():
            for k in [k for k in mt if k < target]:
                del mt[k]

    def expire(self, plan: GraphPlan, horizon: Any, target: int) -> None:
        """Drop whole panes before `horizon` = start of the oldest open window `target`."""
        first = plan.tb.window_start_pane(target)  # panes before it end by the horizon
        for alias in list(self.panes):
            panes = self.panes[alias]
            drop = 0
            while drop < len(panes) and panes[drop].index < first:
                drop += 1
            if drop:
                del panes[:drop]
            if drop:
                for ident in plan.open_of_src.get(alias, ()):
                    self.open.pop(ident, None)  # rebuilt from the panes left on next use
            if not panes:
                del self.panes[alias]
                self.totals.pop(alias, None)
                self.mm_totals.pop(alias, None)
                self.maxes.pop(alias, None)
                for tr in plan.dst_of_src.get(alias, ()):
                    self.indexes.pop(tr.ident, None)
        for tid in list(self.steps):
            times, values = self.steps[tid]
            cut = bisect_left(values, horizon)
            if cut:
                del times[:cut], values[:cut]
            if not values:
                del self.steps[tid]
