"""The trends of one window in one run: roles, pruning, counting, stitching.

For window k the vertices inside it form a DAG (graph.py). A trend is a path
from a vertex that may *start* a trend in k (a START alias, leading NOT
clear) to one that may *end* it (an END alias, trailing NOT clear).

`all` trends are every such path. `complete` trends (docs/QUERY_LANGUAGE.md section 5:
no trend of the window and partition holds all of their events) are, when
no event can bind to two positive aliases, exactly the paths that
1. start at a vertex with no predecessor that some trend of k can reach
   (else a longer prefix could be put in front),
2. use only reduced edges (else a detour could be inserted), and
3. end at a vertex with no successor from which a trend of k can end
   (else the trend could be continued).
Each condition is a sound prune in general; when events can bind to two
positive aliases a superset may rebind events, so each candidate left over
also gets the exact check `_extendable`. Counts are exact DPs over the same
DAG (`count`), so a cap never needs the whole enumeration.

The walk stitches cached graphlet paths (graphlets.py) along cut edges, with
an explicit stack (trends may be longer than Python's recursion limit), and
yields the trends in depth-first order of the vertex positions.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

from greta_stream.cet.config import CetConfig
from greta_stream.cet.graph import NEG_INF, TrendGraph, Vertex
from greta_stream.cet.graphlets import Budget, Graphlet, graphlet_of
from greta_stream.cet.plan import ExtractionPlan

Trend = tuple[tuple[Any, ...], Any]  # (event ids, vertices or None when nobody needs them)


class WindowView:
    """Roles and reachability of the vertices of one run inside window k."""

    verts: Sequence[Vertex]

    def __init__(self, graph: TrendGraph, plan: ExtractionPlan, cfg: CetConfig, budget: Budget, k: int) -> None:
        self.graph, self.plan, self.cfg, self.budget = graph, plan, cfg, budget
        tb = plan.tb
        lo, hi = tb.start(k), tb.end(k)
        a, b = graph.window_slice(lo, hi)
        self.verts = verts = graph.verts[a:b]
        self.n = n = len(verts)
        self.g0 = verts[0].gi if verts else 0
        root, neg = plan.root, graph.negation
        m_trail = neg.threshold(root.trailing, hi) if root.trailing is not None else NEG_INF
        lead = root.leading
        self.start_ok = [v.alias in root.start and (lead is None or lo > neg.threshold(lead, v.time)) for v in verts]
        self.end_ok = [v.alias in root.end and v.time >= m_trail for v in verts]
        self.reduced = cfg.complete
        if n:
            self._roles()

    def _roles(self) -> None:
        verts, n, g0 = self.verts, self.n, self.g0
        start_ok, end_ok = self.start_ok, self.end_ok
        alive = [False] * n  # some trend prefix of this window ends here
        alive_pred = [False] * n
        for i, v in enumerate(verts):
            for u in v.pred:
                j = u.gi - g0
                if j >= 0 and alive[j]:
                    alive_pred[i] = True
                    break
            alive[i] = start_ok[i] or alive_pred[i]
        co = [False] * n  # some trend suffix of this window starts here
        co_succ = [False] * n
        for i in range(n - 1, -1, -1):
            for w in verts[i].succ:
                j = w.gi - g0
                if j >= n:
                    break
                if co[j]:
                    co_succ[i] = True
                    break
            co[i] = end_ok[i] or co_succ[i]
        if not self.reduced:
            self.useful, self.sink = co, end_ok
            self.sources = [i for i in range(n) if start_ok[i] and co[i]]
            return
        sink = [end_ok[i] and not co_succ[i] for i in range(n)]
        useful = [False] * n  # a reduced path from here reaches a sink
        for i in range(n - 1, -1, -1):
            if sink[i]:
                useful[i] = True
                continue
            for w in verts[i].rsucc:
                j = w.gi - g0
                if j >= n:
                    break
                if useful[j]:
                    useful[i] = True
                    break
        self.useful, self.sink = useful, sink
        self.sources = [i for i in range(n) if start_ok[i] and not alive_pred[i] and useful[i]]

    # ------------------------------------------------------------ counting
    def count(self) -> int:
        """The number of paths from sources to sinks (exact; a DP, no enumeration)."""
        return sum(self.source_counts())

    def source_counts(self) -> list[int]:
        """The number of trends from each source, in the order of `sources` (the walk's)."""
        if not self.n:
            return []
        cnt = self.path_counts()
        return [cnt[i] for i in self.sources]

    def path_counts(self) -> list[int]:
        """Per window position: the number of paths from it to a sink."""
        verts, n, g0, useful, sink = self.verts, self.n, self.g0, self.useful, self.sink
        cnt = [0] * n
        for i in range(n - 1, -1, -1):
            if not useful[i]:
                continue
            c = 1 if sink[i] else 0
            for w in (verts[i].rsucc if self.reduced else verts[i].succ):
                j = w.gi - g0
                if j >= n:
                    break
                c += cnt[j]
            cnt[i] = c
        return cnt

    def collect(self, cap: int | None) -> tuple[list[Trend], int]:
        """Up to `cap` trends in order, and the exact number of trends."""
        if not self.n or not self.sources:
            return [], 0
        if self.reduced and self.plan.rebinding:
            out: list[Trend] = []
            total = 0
            seen: dict[tuple[Any, ...], bool] = {}
            for tr in self.walk():
                key = tuple(v.ekey for v in tr[1])
                ok = seen.get(key)
                if ok is None:
                    ok = seen[key] = not self._extendable(tr[1])
                if ok:
                    total += 1
                    if cap is None or len(out) < cap:
                        out.append(tr)
            return out, total
        total = self.count()
        out = []
        if total:
            for tr in self.walk():
                out.append(tr)
                if cap is not None and len(out) >= cap:
                    break
        return out, total

    # ------------------------------------------------------------ the walk
    def walk(self) -> Iterator[Trend]:
        """Every trend from the sources, stitched from graphlet paths (H-CET)."""
        verts, g0, n = self.verts, self.g0, self.n
        useful, sink = self.useful, self.sink
        reduced = self.reduced
        graph, budget, units = self.graph, self.budget, self.cfg.graphlet_units
        need_vs = self.cfg.with_events or (reduced and self.plan.rebinding)  # else vertices stay None

        def frame(pre_ids: tuple[Any, ...], pre_vs: Any, v: Vertex) -> _Frame:
            gl: Graphlet = graphlet_of(graph, v, budget, units)
            return _Frame(gl.trie(v), gl.last_gi, pre_ids, pre_vs)

        for s in self.sources:
            stack = [frame((), () if need_vs else None, verts[s])]
            while stack:
                fr = stack[-1]
                if fr.cross:
                    y = fr.cross.pop()
                    stack.append(frame(fr.cross_ids, fr.cross_vs, y))
                    continue
                trie = fr.trie
                if fr.idx < len(trie):
                    x, ids, vs, d, end = trie[fr.idx]
                    pending = fr.pending
                    if pending and pending[-1][0] >= d:
                        fr.open_cross(pending.pop(), reduced, g0, n, useful)
                        continue
                    if not useful[x.gi - g0]:
                        fr.idx = end
                        continue
                    fr.idx += 1
                    full_ids = fr.pre_ids + ids
                    full_vs = fr.pre_vs + vs if need_vs else None
                    succ = x.rsucc if reduced else x.succ
                    if succ and succ[-1].gi > fr.last_gi:
                        pending.append((d, x, full_ids, full_vs))
                    if sink[x.gi - g0]:
                        yield full_ids, full_vs
                    continue
                if fr.pending:
                    fr.open_cross(fr.pending.pop(), reduced, g0, n, useful)
                    continue
                stack.pop()

    # ------------------------------------------------ the exact check
    def _extendable(self, vs: tuple[Vertex, ...]) -> bool:
        """Does some trend of this window and run hold all events of `vs` and more?

        A DP over the window's vertices in time order. A vertex at the time of
        the next event of vs must be that event (any alias); any other vertex
        is an extra. State bits: 1 = reached covering vs exactly so far,
        2 = reached with at least one extra.
        """
        keys = [v.ekey for v in vs]
        times = [v.time for v in vs]
        m = len(vs)
        verts, g0, start_ok, end_ok = self.verts, self.g0, self.start_ok, self.end_ok
        state = [0] * self.n
        cov = [0] * self.n
        for i, v in enumerate(verts):
            c = bisect_left(times, v.time)
            is_s = c < m and times[c] == v.time
            if is_s and v.ekey != keys[c]:
                continue
            st = (1 if is_s else 2) if start_ok[i] and c == 0 else 0
            for u in v.pred:
                j = u.gi - g0
                if j >= 0 and state[j] and cov[j] == c:
                    st |= state[j] if is_s else 2
            if not st:
                continue
            state[i], cov[i] = st, c + is_s
            if st & 2 and end_ok[i] and cov[i] == m:
                return True
        return False


class _Frame:
    """One graphlet entered at a vertex: its trie, position, and cut edges to follow."""

    __slots__ = ("trie", "last_gi", "pre_ids", "pre_vs", "idx", "pending", "cross", "cross_ids", "cross_vs")

    def __init__(self, trie: list[Any], last_gi: int, pre_ids: tuple[Any, ...], pre_vs: Any) -> None:
        self.trie, self.last_gi, self.pre_ids, self.pre_vs = trie, last_gi, pre_ids, pre_vs
        self.idx = 0
        self.pending: list[tuple[int, Vertex, tuple[Any, ...], tuple[Vertex, ...] | None]] = []
        self.cross: list[Vertex] = []
        self.cross_ids: tuple[Any, ...] = ()
        self.cross_vs: tuple[Vertex, ...] | None = ()

    def open_cross(self, item: tuple[int, Vertex, tuple[Any, ...], tuple[Vertex, ...] | None], reduced: bool,
                   g0: int, n: int, useful: list[bool]) -> None:
        """Follow the cut edges of a finished subtree: successors past this graphlet, in order."""
        _, x, ids, vs = item
        out = []
        last = self.last_gi
        for y in (x.rsucc if reduced else x.succ):
            j = y.gi - g0
            if j >= n:
                break
            if y.gi > last and useful[j]:
                out.append(y)
        out.reverse()  # popped from the end: first successor first
        self.cross, self.cross_ids, self.cross_vs = out, ids, vs
