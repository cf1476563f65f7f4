"""Time-centric graphlets: partial trends cached per pane (CET paper sections 5-6).

H-CET caches the partial trends inside each graphlet (T-CET) and stitches
them across graphlets along cut edges (M-CET). Our graphlets are *time
centric* (paper section 5.1): consecutive vertices of one pane, so every
window either holds a graphlet whole or not at all, and a graphlet built for
one window serves every overlapping sliding window that holds its pane
(section 6.3, graphlet sharing). A pane is cut into several graphlets when
its partial trends would need more than `graphlet_units`; once the
extractor's `cache_units` budget is spent, new graphlets are single vertices
(plain depth-first search, nothing cached).

A graphlet stores, for each of its vertices v, every path inside the
graphlet that starts at v, as a flattened trie in depth-first pre-order:
entries `(last vertex, event ids, vertices, depth, end)`, where `end` is the
index just past the entry's subtree. The stitching walk (windows.py) skips a
subtree whose last vertex cannot reach a trend end in the window, and visits
extensions in the order of a plain depth-first search, so the trends come
out in the same order however the panes were cut.

Graphlets are built lazily, when a window first needs the pane; by then the
pane is final (windows close only after the watermark passed their end).
They are a cache: snapshots drop them.
"""

from __future__ import annotations

from typing import Any

from greta_stream.cet.graph import TrendGraph, Vertex

Entry = tuple[Vertex, tuple[Any, ...], tuple[Vertex, ...], int, int]


class Budget:
    """Cache units left, shared by every graph of one extractor."""

    def __init__(self, total: int) -> None:
        self.total, self.used = total, 0

    @property
    def left(self) -> int:
        return max(0, self.total - self.used)


class Graphlet:
    """Consecutive vertices `first_gi..last_gi` of one pane and their cached paths."""

    __slots__ = ("first_gi", "last_gi", "tries", "units")

    def __init__(self, first_gi: int, last_gi: int, tries: dict[int, list[Entry]] | None, units: int) -> None:
        self.first_gi, self.last_gi, self.tries, self.units = first_gi, last_gi, tries, units

    def trie(self, v: Vertex) -> list[Entry]:
        if self.tries is None:
            return [(v, (v.eid,), (v,), 1, 1)]
        return self.tries[v.gi]


def graphlet_of(graph: TrendGraph, v: Vertex, budget: Budget, graphlet_units: int) -> Graphlet:
    """The graphlet holding v, building those of its pane first if needed."""
    if v.gl is None:
        _build_pane(graph, v, budget, graphlet_units)
    return v.gl  # type: ignore[no-any-return]


def _pane_members(graph: TrendGraph, v: Vertex) -> list[Vertex]:
    verts = graph.verts
    pos = v.gi - verts[0].gi
    a = b = pos
    while a > 0 and verts[a - 1].pane == v.pane:
        a -= 1
    while b + 1 < len(verts) and verts[b + 1].pane == v.pane:
        b += 1
    return verts[a:b + 1]


def _build_pane(graph: TrendGraph, v: Vertex, budget: Budget, graphlet_units: int) -> None:
    """Cut v's pane into graphlets greedily, in time order, and cache their paths.

    1. Count, for each vertex, the paths inside the current graphlet that end
       at it and their total length (a DP over in-edges).
    2. When adding a vertex would push the graphlet past the cap, close the
       graphlet and start a new one at that vertex.
    3. Materialize the tries of each graphlet of two or more vertices.
    """
    members = _pane_members(graph, v)
    cap = min(graphlet_units, budget.left)
    reduced = graph.reduced
    groups: list[list[Vertex]] = []
    cur: list[Vertex] = []
    cnt: dict[int, int] = {}
    lsum: dict[int, int] = {}
    units = 0
    for w in members:
        c = ln = 1
        if cur:
            first = cur[0].gi
            for u in (w.rpred if reduced else w.pred):
                if u.gi >= first:
                    c += cnt[u.gi]
                    ln += lsum[u.gi] + cnt[u.gi]
            if units + ln > cap:
                groups.append(cur)
                cur, units, c, ln = [], 0, 1, 1
        cur.append(w)
        cnt[w.gi], lsum[w.gi] = c, ln
        units += ln
    groups.append(cur)
    out = []
    for g in groups:
        gl = _materialize(g, reduced) if len(g) > 1 else Graphlet(g[0].gi, g[0].gi, None, 0)
        budget.used += gl.units
        for w in g:
            w.gl = gl
        out.append(gl)
    graph.graphlets[v.pane] = out


def _materialize(members: list[Vertex], reduced: bool) -> Graphlet:
    """Every path inside the graphlet from each member, as pre-order tries (T-CET)."""
    last = members[-1].gi
    tries: dict[int, list[Entry]] = {}
    units = 0
    for v in reversed(members):
        head = (v.eid,)
        hv = (v,)
        entries: list[Any] = [None]
        for u in (v.rsucc if reduced else v.succ):
            if u.gi > last:
                break
            off = len(entries)
            entries.extend((x, head + ids, hv + vs, d + 1, end + off) for x, ids, vs, d, end in tries[u.gi])
        entries[0] = (v, head, hv, 1, len(entries))
        units += sum(e[3] for e in entries)
        tries[v.gi] = entries
    return Graphlet(members[0].gi, last, tries, units)
