"""`OrderView`: the trends of one window of an `OrderGraph`, without edge lists.

For the window's vertices (positions in time order; u -> v when u's time
group is earlier and `key(u) op probe(v)`, orders.py), keys and probes get
ranks among the window's values (exact Python comparisons, any mix of int,
float and bool), `>` and `>=` become `<` and `<=` by reversing the ranks,
and orderkernels.py answers the rest:

- `all`: every vertex starts and ends a trend, so a trend is any path. The
  successors of u, in position order, are the positions after u's time group
  whose probe passes u's key: a max tree over positions finds the next one
  in O(log n), so the walk never scans. Per-vertex path counts come from a
  Fenwick tree over probe ranks filled backward one time group at a time
  (the aggregation engine's propagation): O(n log n).
- `complete` (docs/QUERY_LANGUAGE.md section 5; a single alias, so no
  rebinding): the paths from a vertex with no predecessor to a vertex with no
  successor that use only reduced edges (windows.py). The reduced edges come
  from `orderkernels.reduced_edges` (sorted keys and a min tree, no edge
  list); on random prices there are O(n log n) of them.

The walk is the depth-first pre-order of `WindowView.walk` from the sources
in position order, so the cap keeps the same trends. It runs in numba
kernels over *anchors* (sources): per-anchor counts (saturated) say how many
anchors the cap needs and how many trends each slice of them must yield, so
with `CetConfig.threads` > 1 contiguous slices run on threads (the kernels
release the GIL) and are joined in anchor order: the records never depend on
the number of threads. Exact totals are Python integers.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from greta_stream.cet import orderkernels as K
from greta_stream.cet.orders import OrderGraph, OVertex
from greta_stream.cet.windows import Trend, WindowView

MIN_SLICE_TRENDS = 256  # fewer trends per thread are not worth a thread


class OrderView(WindowView):
    """Roles, counts and trends of one window of an `OrderGraph`."""

    graph: OrderGraph  # type: ignore[assignment]
    verts: Sequence[OVertex]

    def _roles(self) -> None:
        verts = self.verts
        n = self.n
        op = self.graph.spec(self.plan).op
        values = sorted({x for v in verts for x in (v.key, v.probe) if x is not None})
        rank = {x: r for r, x in enumerate(values)}
        flip = op in (">", ">=")
        top = len(values) - 1

        def ranked(x: Any) -> int:
            if x is None:
                return -1
            r = rank[x]
            return top - r if flip else r

        self.strict = op in ("<", ">")
        self.nranks = len(values)
        self.ka = np.array([ranked(v.key) for v in verts], np.int64)
        self.kb = np.array([ranked(v.probe) for v in verts], np.int64)
        gend = [0] * n
        j = n
        for i in range(n - 1, -1, -1):
            if i + 1 < n and verts[i + 1].time != verts[i].time:
                j = i + 1
            gend[i] = j
        self.gend = np.array(gend, np.int64)
        if self.reduced:
            xs, ys = K.reduced_edges(self.gend, self.ka, self.kb, self.strict)
            self.ptr = K.csr(xs, n)
            self.ys = ys
            has_pred = np.zeros(n, np.bool_)
            has_pred[ys] = True
            self.sink_arr = self.ptr[1:] == self.ptr[:-1]
            self.sources = np.flatnonzero(~has_pred).tolist()
            self.sat = K.counts_csr(self.ptr, ys, self.sink_arr)
        else:
            self.sources = list(range(n))
            self.sat = K.counts_all(self.gend, self.ka, self.kb, self.nranks, self.strict)

    # ------------------------------------------------------------ counting
    def count(self) -> int:
        if not self.n:
            return 0
        sat = self.sat[self.sources] if self.reduced else self.sat
        if sat.max() < K.SAT and float(sat.sum(dtype=np.float64)) < K.SAT:  # no count saturated
            return int(sat.sum())
        cnt = self._exact()
        return sum(cnt[i] for i in self.sources)

    def _exact(self) -> list[int]:
        """Exact path counts per vertex (Python integers)."""
        n = self.n
        cnt = [0] * n
        if self.reduced:
            ptr, ys, sink = self.ptr.tolist(), self.ys.tolist(), self.sink_arr.tolist()
            for i in range(n - 1, -1, -1):
                c = 1 if sink[i] else 0
                for e in range(ptr[i], ptr[i + 1]):
                    c += cnt[ys[e]]
                cnt[i] = c
            return cnt
        ka, kb, gend, m = self.ka.tolist(), self.kb.tolist(), self.gend.tolist(), self.nranks
        fen = [0] * (m + 1)
        less = 1 if self.strict else 0
        hi = n
        while hi > 0:
            lo = hi - 1
            while lo > 0 and gend[lo - 1] == hi:
                lo -= 1
            for i in range(lo, hi):
                c = 1
                j = m - ka[i] - less if ka[i] >= 0 else 0
                while j > 0:
                    c += fen[j]
                    j -= j & -j
                cnt[i] = c
            for i in range(lo, hi):
                if kb[i] >= 0:
                    j = m - kb[i]
                    while j <= m:
                        fen[j] += cnt[i]
                        j += j & -j
            hi = lo
        return cnt

    # ------------------------------------------------------------ the walk
    def collect(self, cap: int | None) -> tuple[list[Trend], int]:
        """Up to `cap` trends in order, and the exact number of trends."""
        if not self.n or not self.sources:
            return [], 0
        total = self.count()
        if not total:
            return [], 0
        limit = min(total if cap is None else min(cap, total), K.SAT)
        flat, offs = self._walk(limit)
        bounds = offs.tolist()
        ids = _gather([v.eid for v in self.verts], flat)  # C gathers: no Python int per position
        vs = _gather(self.verts, flat) if self.cfg.with_events else None
        out: list[Trend] = []
        for a, b in zip(bounds, bounds[1:]):
            out.append((tuple(ids[a:b]), tuple(vs[a:b]) if vs is not None else None))
        return out, total

    def walk(self) -> Any:
        return iter(self.collect(None)[0])

    def _walk(self, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The first `limit` trends: work items cut into slices by their counts, one per thread."""
        if not self.reduced and getattr(self, "tree", None) is None:
            self.tree = K.max_tree(self.kb)
        items = self._items(limit)
        before = [0]
        for _, _, c in items:
            before.append(min(before[-1] + c, limit))
        used = len(items)
        parts = max(1, min(self.cfg.threads, used, limit // MIN_SLICE_TRENDS))
        cuts = [0]
        for p in range(1, parts):  # balanced by trends: a walk's work is its output
            cuts.append(max(cuts[-1], bisect_left(before, limit * p // parts, 0, used)))
        cuts.append(used)
        jobs = [(items[a:b], before[b] - before[a]) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
        if len(jobs) == 1:
            return self._job(*jobs[0])
        with ThreadPoolExecutor(len(jobs)) as pool:
            done = list(pool.map(lambda job: self._job(*job), jobs))
        return _joined(done)

    def _items(self, limit: int) -> list[tuple[tuple[int, ...], int | None, int]]:
        """Work items in walk order, enough for `limit` trends: (prefix, vertex, count) = the
        trends that extend the prefix by the vertex, or (path, None, 1) = the path itself.

        At first one item per anchor. While there are fewer items than threads, the
        largest is replaced by its own trend (`all`: every vertex ends one) and one item
        per successor, in order: the same trends in the same order, in finer pieces.
        """
        sat = self.sat
        items: list[tuple[tuple[int, ...], int | None, int]] = []
        acc = 0
        for s in self.sources:
            if acc >= limit:
                break
            c = int(sat[s])
            items.append(((), s, c))
            acc += c
        want = min(self.cfg.threads, limit // MIN_SLICE_TRENDS)
        while len(items) < want:
            i = max(range(len(items)), key=lambda j: items[j][2] if items[j][1] is not None else -1)
            prefix, v, c = items[i]
            if v is None or c <= 1:
                break
            path = (*prefix, v)
            new: list[tuple[tuple[int, ...], int | None, int]] = [] if self.reduced else [(path, None, 1)]
            got = len(new)
            for w in self._children(v):
                if got >= limit:
                    break
                cw = int(sat[w])
                new.append((path, w, cw))
                got += cw
            items[i:i + 1] = new
            acc, keep = 0, 0
            while keep < len(items) and acc < limit:
                acc += items[keep][2]
                keep += 1
            del items[keep:]
        return items

    def _children(self, v: int) -> Any:
        """v's successors in position order (reduced ones for complete trends)."""
        if self.reduced:
            yield from self.ys[self.ptr[v]:self.ptr[v + 1]].tolist()
            return
        if self.ka[v] < 0:
            return
        q = K.next_succ(self.tree, int(self.gend[v]), int(self.ka[v]), self.strict)
        while q >= 0:
            yield q
            q = K.next_succ(self.tree, q + 1, int(self.ka[v]), self.strict)

    def _job(self, items: list[tuple[tuple[int, ...], int | None, int]], limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The first `limit` trends of consecutive items: one kernel call per run of
        items with the same prefix (a thread's share of the walk)."""
        done: list[tuple[np.ndarray, np.ndarray]] = []
        made = 0
        i = 0
        while i < len(items) and made < limit:
            prefix, v, _ = items[i]
            if v is None:
                done.append((np.array(prefix, np.int64), np.array([0, len(prefix)], np.int64)))
                i += 1
            else:
                j = i
                while j < len(items) and items[j][0] == prefix and items[j][1] is not None:
                    j += 1
                starts = np.array([it[1] for it in items[i:j]], np.int64)
                done.append(self._slice(np.array(prefix, np.int64), starts, limit - made))
                i = j
            made += len(done[-1][1]) - 1
        return done[0] if len(done) == 1 else _joined(done)

    def _slice(self, prefix: np.ndarray, anchors: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        if self.reduced:
            return K.walk_csr(prefix, anchors, limit, self.ptr, self.ys, self.sink_arr)  # type: ignore[no-any-return]
        return K.walk_all(prefix, anchors, limit, self.gend, self.ka, self.tree, self.strict)  # type: ignore[no-any-return]


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate (flat, offsets) pairs in order."""
    flats, offsets, shift = [], [np.zeros(1, np.int64)], 0
    for flat, offs in parts:
        flats.append(flat)
        offsets.append(offs[1:] + shift)
        shift += int(offs[-1])
    return np.concatenate(flats), np.concatenate(offsets)

def _gather(items: Sequence[Any], positions: np.ndarray) -> list[Any]:
    """`[items[p] for p in positions]`, done by numpy."""
    arr = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):  # element-wise: an item that is a sequence stays one object
        arr[i] = x
    return arr[positions].tolist()  # type: ignore[no-any-return]
