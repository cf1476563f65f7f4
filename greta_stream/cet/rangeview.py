"""`RangeView`: the trends of one window of a `RangeGraph`, output-sensitive.

The same roles as `windows.WindowView` (see its docstring), computed over
range edges: per window, each bucket's members (sources) and probers
(targets) get window positions, and "some predecessor / successor is X" is a
difference of prefix sums over one contiguous range, so the pruning passes
and the exact count are O(n log n) per window, never O(edges).

- `all`: a trend is a path from a start to an end vertex; the count DP and
  the walk run over the range successors.
- `complete`: the reduced edges come from `reduction.reduced_edges` (forward
  sweeps, no edge list); sources, sinks, the count DP and the walk then use
  only those, exactly as `WindowView` does with its reduced edges.

The walk is a depth-first search in position order from the sources in
position order, yielding a trend when it enters a sink (pre-order): the order
of `WindowView.walk`, so the cap keeps the same trends. It never enters a
vertex from which no trend ends, so the work up to the cap is proportional to
the trends emitted times their length (plus scanning successor ranges).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from greta_stream.cet.negation import NEG_INF
from greta_stream.cet.ranges import RangeGraph, RVertex
from greta_stream.cet.reduction import reduced_edges
from greta_stream.cet.windows import Trend, WindowView


class RangeView(WindowView):
    """Roles, counts and trends of one window of a `RangeGraph`."""

    graph: RangeGraph  # type: ignore[assignment]
    verts: Sequence[RVertex]

    def _roles(self) -> None:
        self.graph.ensure_index(self.plan)
        self._buckets()
        alive_pred = self._alive_pred()
        co_succ = self._co_succ()
        n, start_ok, end_ok = self.n, self.start_ok, self.end_ok
        if not self.reduced:
            co = [end_ok[i] or co_succ[i] for i in range(n)]
            self.useful, self.sink = co, end_ok
            self.sources = [i for i in range(n) if start_ok[i] and co[i]]
            self.rsucc = None
            return
        self.sink = [end_ok[i] and not co_succ[i] for i in range(n)]
        alive = [start_ok[i] or alive_pred[i] for i in range(n)]
        self.rsucc = self._reduced(alive)
        useful = [False] * n
        for i in range(n - 1, -1, -1):
            useful[i] = self.sink[i] or any(useful[j] for j in self.rsucc[i])
        self.useful = useful
        self.sources = [i for i in range(n) if start_ok[i] and not alive_pred[i] and useful[i]]

    def _buckets(self) -> None:
        """Window positions of each bucket's members and probers (with their `lo`)."""
        bid: dict[Any, int] = {}
        self.mem: list[list[int]] = []
        self.outs: list[list[int]] = []
        probed = {b for v in self.verts for b, _ in v.ins}  # a bucket nobody probes holds no edge
        for i, v in enumerate(self.verts):
            own = []
            for b in v.outs:
                if b not in probed:
                    continue
                j = bid.setdefault(b, len(bid))
                if j == len(self.mem):
                    self.mem.append([])
                self.mem[j].append(i)
                own.append(j)
            self.outs.append(own)
        self.tms = [v.time for v in self.verts]
        self.mt = [[self.tms[i] for i in m] for m in self.mem]
        self.prob: list[list[int]] = [[] for _ in self.mem]
        self.plo: list[list[Any]] = [[] for _ in self.mem]
        self.ins: list[list[tuple[int, Any, int]]] = []  # (bucket, lo, position among its probers)
        for i, v in enumerate(self.verts):
            own_in: dict[int, Any] = {}
            for b, lo in v.ins:
                j = bid.get(b, -1)
                if j >= 0 and (j not in own_in or lo < own_in[j]):
                    own_in[j] = lo if b[0] != "e" else NEG_INF
            entries = []
            for j, lo in own_in.items():
                entries.append((j, lo, len(self.prob[j])))
                self.prob[j].append(i)
                self.plo[j].append(lo)
            self.ins.append(entries)
        self.pt = [[self.tms[i] for i in p] for p in self.prob]

    def _pred_range(self, i: int, j: int, lo: Any) -> tuple[int, int]:
        mt = self.mt[j]
        return bisect_left(mt, lo), bisect_left(mt, self.tms[i])

    def _succ_range(self, i: int, j: int) -> tuple[int, int]:
        t = self.tms[i]
        return bisect_right(self.pt[j], t), bisect_right(self.plo[j], t)

    def _alive_pred(self) -> list[bool]:
        """Some predecessor in the window ends a trend prefix (forward, prefix sums over members)."""
        n, start_ok = self.n, self.start_ok
        pa = [[0] for _ in self.mem]
        out = [False] * n
        for i in range(n):
            for j, lo, _ in self.ins[i]:
                a, b = self._pred_range(i, j, lo)
                if b > a and pa[j][b] > pa[j][a]:
                    out[i] = True
                    break
            alive = start_ok[i] or out[i]
            for j in self.outs[i]:
                pa[j].append(pa[j][-1] + alive)
        return out

    def _suffix(self, step: Any) -> list[Any]:
        """Backward pass: r[i] = step(i, sum of r over i's successors); suffix sums over probers."""
        sc = [[0] * (len(p) + 1) for p in self.prob]
        out: list[Any] = [0] * self.n
        for i in range(self.n - 1, -1, -1):
            total = 0
            for j in self.outs[i]:
                a, b = self._succ_range(i, j)
                if b > a:
                    total += sc[j][a] - sc[j][b]
            r = out[i] = step(i, total)
            for j, _, p in self.ins[i]:
                sc[j][p] = sc[j][p + 1] + r
        return out

    def _co_succ(self) -> list[bool]:
        """Some successor in the window starts a trend suffix."""
        end_ok = self.end_ok
        out = [False] * self.n

        def step(i: int, s: int) -> int:
            out[i] = s > 0
            return 1 if end_ok[i] or s else 0

        self._suffix(step)
        return out

    def _reduced(self, need: list[bool]) -> list[list[int]]:
        """Reduced successors of each vertex (reduction.py), in position order."""
        tms = self.tms
        groups: list[Any] = []  # distinct times in order (the window is sorted by time): exact, any time type
        rank = []
        for t in tms:
            if not groups or groups[-1] != t:
                groups.append(t)
            rank.append(len(groups) - 1)
        tg = np.array(rank, dtype=np.int64)
        in_ptr, in_bid, in_lo = [0], [], []
        for entries in self.ins:
            for j, lo, _ in entries:
                in_bid.append(j)
                in_lo.append(0 if lo == NEG_INF else bisect_left(groups, lo))
            in_ptr.append(len(in_bid))
        out_ptr, out_bid = [0], []
        for own in self.outs:
            out_bid += own
            out_ptr.append(len(out_bid))
        arrays = (tg, *(np.array(a, dtype=np.int64) for a in (in_ptr, in_bid, in_lo, out_ptr, out_bid)))
        xs, ys = reduced_edges(arrays, np.array(need, dtype=np.bool_), len(self.mem), self.cfg.threads)
        rsucc: list[list[int]] = [[] for _ in range(self.n)]
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
            rsucc[x].append(y)
        return rsucc

    # ------------------------------------------------------------ counting
    def path_counts(self) -> list[int]:
        sink, useful = self.sink, self.useful
        if self.rsucc is None:
            cnt = self._suffix(lambda i, s: (1 if sink[i] else 0) + s)
        else:
            cnt = [0] * self.n
            for i in range(self.n - 1, -1, -1):
                if useful[i]:
                    cnt[i] = (1 if sink[i] else 0) + sum(cnt[j] for j in self.rsucc[i])
        return cnt

    # ------------------------------------------------------------ the walk
    def _successors(self, i: int) -> Iterator[int]:
        useful = self.useful
        if self.rsucc is not None:
            return (y for y in self.rsucc[i] if useful[y])
        parts = []
        for j in self.outs[i]:
            a, b = self._succ_range(i, j)
            if b > a:
                parts.append(self.prob[j][a:b])
        seq = parts[0] if len(parts) == 1 else heapq.merge(*parts) if parts else ()
        return (y for y in seq if useful[y])

    def walk(self) -> Iterator[Trend]:
        """Trends in depth-first pre-order from the sources (explicit stack: no recursion limit)."""
        verts, sink = self.verts, self.sink
        need_vs = self.cfg.with_events
        for s in self.sources:
            path = [s]
            ids = [verts[s].eid]
            if sink[s]:
                yield tuple(ids), (tuple(verts[i] for i in path) if need_vs else None)
            stack = [self._successors(s)]
            while stack:
                y = next(stack[-1], None)
                if y is None:
                    stack.pop()
                    path.pop()
                    ids.pop()
                    continue
                path.append(y)
                ids.append(verts[y].eid)
                if sink[y]:
                    yield tuple(ids), (tuple(verts[i] for i in path) if need_vs else None)
                stack.append(self._successors(y))
