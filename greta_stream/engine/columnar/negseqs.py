"""`NOT SEQ(C, D, ...)` of single events (NOTs of one between) on the columnar kernel (SEMANTICS section 3).

`SEQ(S+, NOT SEQ(C, D), E)` excludes an adjacency x -> y (x bound to S, y to E) when a match c, d of the
negated SEQ lies strictly between them: `x.time < c.time < d.time < y.time`, in the partition of the
common attributes, each part satisfying its own predicates. Let M(y) be the latest start of a match that
ends before y (the latest c.time over matches with d.time < y.time): the adjacency holds exactly when
`x.time >= M(y)`. So the step is a scanned store with one more order predicate (`plan.NOT_SEQ`)
comparing x's time with y's bound, and the match search is a few sorted passes: the latest start of a
chain ending at each event of a part is the running maximum of the previous part's, over its events
strictly before. With an edge predicate on a step (`NOT SEQ(C, D) WHERE C.v < NEXT(D).v`:
`plan.neg_edges`) it is the maximum over the previous part's events before it whose values the
comparison admits: a dominance query, a Fenwick tree of maxima over the value ranks filled in time order
(`dominance_max`); with two comparisons AND-ed on the step, a Fenwick tree over the first's ranks whose
nodes hold Fenwick trees over the second's (`dominance_max2`); with more, one fewer over each half of
the times against the other, bit by bit, down to two (`dominance_maxk`). A NOT of one event between two parts
(`NOT SEQ(C, NOT E, D)`) keeps the previous part's events at or after the latest E before it: a range,
whose maximum a sparse table gives (`_range_max`); with an edge predicate across it
(`NOT SEQ(C, NOT E, D) WHERE C.v < NEXT(D).v`), that range of times is one more rank of the dominance
query (`Matches._since`). A leading or trailing one bounds the windows of a
trend's first or last event (`negkeys.seq_bounds`), as a leading or trailing `NOT N` of one event does
(`keys.negated_starts`). Where a part is keyed by an equivalence attribute, the walk runs over entries of
(partition, value) instead of events (`View`, built by `negkeys.py`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit

from greta_stream.engine.columnar.keys import edge_values, partition_times
from greta_stream.engine.columnar.plan import KernelPlan, State
from greta_stream.engine.columnar.prepare import Prepared, local_mask, subset
from greta_stream.engine.columnar.vector import attrs_of
from greta_stream.query import ast


@dataclass(frozen=True)
class View:
    """Entries of a match walk keyed by an equivalence attribute (`negkeys.py`): the prepared event of each,
    its code (partition and value), the entries of each part (by alias) and of the readers."""

    rows: np.ndarray
    code: np.ndarray
    members: dict[str, np.ndarray]
    readers: np.ndarray


def part_events(plan: KernelPlan, prep: Prepared, part: State) -> np.ndarray:
    """The prepared events of a negated SEQ's part: of its type, taken by its own predicates."""
    mine = prep.state == plan.types.index(part.type)
    mine &= local_mask(plan, prep.cols, np.full(len(prep.t), plan.state_of_neg(part)), slots=False)
    return np.flatnonzero(mine)


class Matches:
    """Matches of negated SEQs over the prepared events: chains of their parts' events (each part's own
    predicates), in the partitions of the common attributes, times compared by rank."""

    def __init__(self, plan: KernelPlan, prep: Prepared, view: View | None = None) -> None:
        self.plan, self.prep, self.view = plan, prep, view
        self.code, self.times, self.rank = partition_times(plan, prep)
        if view is not None:  # entries of its own: events at their values, readers at theirs (`negkeys.py`)
            self.code, self.rank = view.code, self.rank[view.rows]
        self.edges: dict[tuple[str, str], list[tuple[tuple[str, ast.Expr, ast.Expr], ...]]] = {}
        for x, y, clause in plan.neg_edges:  # a step's clauses are OR-ed
            self.edges.setdefault((x, y), []).append(clause)

    def latest_starts(self, parts: tuple[State, ...]) -> np.ndarray:
        """Per event (per reader of the view): the time rank of the latest start of a match ending strictly
        before it (-1: none)."""
        return self._walk(parts, self.rank)

    def earliest_ends(self, parts: tuple[State, ...]) -> np.ndarray:
        """Per event (per reader): the time rank of the earliest end of a match starting strictly after it (-1: none):
        the latest start of the reversed SEQ over reversed time."""
        top = len(self.times) - 1
        got = self._walk(parts[::-1], top - self.rank, walked_back=True)
        return np.where(got >= 0, top - got, -1)

    def _walk(self, parts: tuple[State, ...], order: np.ndarray, walked_back: bool = False) -> np.ndarray:
        """Per event, the latest `order` at which a chain of `parts` (in walking order: `order` rises along
        it; `walked_back`: the SEQ's parts last first, over reversed time) starts, over the chains ending
        strictly before it; an edge predicate of a step (`neg_edges`) admits the step's pairs only."""
        key = self.code * (len(self.times) + 2) + order  # (partition, time) as one sortable int
        src, val, prev = np.zeros(0, np.int64), np.zeros(0), None
        blockers: list[np.ndarray] = []  # the events of the NOTs since the previous part (`State.negated`)
        for part in parts:
            idx = part_events(self.plan, self.prep, part) if self.view is None else self.view.members[part.alias]
            if part.negated:
                blockers.append(idx)
                continue
            if prev is None:
                val = order[idx].astype(np.float64)
            else:
                step = (part.alias, prev.alias) if walked_back else (prev.alias, part.alias)
                ors = self.edges.get(step)
                if ors is None:
                    val = (self._latest_unblocked(key, src, val, idx, np.concatenate(blockers), order) if blockers
                           else _latest_before(key, self.code, src, val, idx))
                else:  # across a NOT: the events of `src` at or after the latest blocker, one range more
                    since = (self._since(key, src, idx, np.concatenate(blockers), order) if blockers else None)
                    val = np.max([self._latest_admitted(e, key, src, val, idx, walked_back, since) for e in ors],
                                 axis=0)
            src, prev, blockers = idx, part, []
        readers = np.arange(len(self.rank)) if self.view is None else self.view.readers
        got = _latest_before(key, self.code, src, val, readers)
        return np.where(np.isfinite(got), got, -1).astype(np.int64)

    def _latest_unblocked(self, key: np.ndarray, src: np.ndarray, val: np.ndarray, dst: np.ndarray,
                          blockers: np.ndarray, order: np.ndarray) -> np.ndarray:
        """`_latest_before` over the events of `src` with no event of `blockers` strictly between them and
        the event of `dst` (`NOT SEQ(C, NOT E, D)`): those at or after the latest blocker before it, a
        range of the partition's `src` in time order, whose maximum a sparse table gives."""
        last = _latest_before(key, self.code, blockers, order[blockers].astype(np.float64), dst)
        span = len(self.times) + 2
        so = np.argsort(key[src], kind="stable")
        skey = key[src][so]
        lo = np.searchsorted(skey, self.code[dst] * span + np.maximum(last, -1).astype(np.int64), side="left")
        hi = np.searchsorted(skey, key[dst], side="left")  # strictly before it
        return _range_max(val[so], lo, hi)

    def _since(self, key: np.ndarray, src: np.ndarray, dst: np.ndarray, blockers: np.ndarray,
               order: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """A step across a NOT as one more range of `_dominance` (mode 0): an event of `src` is admitted
        when its `order` is at or after that of the latest blocker strictly before the event of `dst`
        (`NOT SEQ(C, NOT E, D)`: no E strictly between the C and the D), ranks counted from the top."""
        last = _latest_before(key, self.code, blockers, order[blockers].astype(np.float64), dst)
        top = len(self.times) + 1
        return 0, top - order[src], top + 1 - np.maximum(last, -1).astype(np.int64)

    def _latest_admitted(self, clause: tuple[tuple[str, ast.Expr, ast.Expr], ...], key: np.ndarray,
                         src: np.ndarray, val: np.ndarray, dst: np.ndarray, walked_back: bool,
                         since: tuple[int, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """`_latest_before` over the pairs a step's clause admits (up to five order comparisons AND-ed; `since`:
        and no blocker between them): per event of `dst`, the largest `val` of the events `src` of its
        partition strictly before it whose values compare with its own as each comparison says (walking
        back, `dst` holds X)."""
        x, y = (dst, src) if walked_back else (src, dst)
        rows = np.union1d(x, y)
        at = rows if self.view is None else self.view.rows[rows]
        cols = {a: subset(self.prep.cols[a], at) for c in clause for a in attrs_of(c[1]) | attrs_of(c[2])}
        got = np.full(len(dst), -np.inf)
        extra = [] if since is None else [since]
        for combo in itertools.product(*[self._alternatives(c, cols, rows, x, y, walked_back) for c in clause]):
            got = np.maximum(got, self._dominance((*combo, *extra), key, src, val, dst))
        return got

    def _alternatives(self, edge: tuple[str, ast.Expr, ast.Expr], cols: dict, rows: np.ndarray, x: np.ndarray,
                      y: np.ndarray, walked_back: bool) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """A comparison as alternatives (OR-ed) (mode, ranks of `src`, ranks of `dst`): mode 0 admits a src
        rank below the dst's, 1 at or below, 2 equal. X's key against Y's probe (`keys.edge_values`);
        walking back, the reader is X, and ranks from the top down make a prefix again; `!=` is `<` or `>`."""
        xkey, probe, op = edge_values(self.plan, cols, np.zeros(len(rows), np.int64), edge, (0, 0))
        values = np.unique(np.concatenate([xkey, probe]))
        rank_x = np.searchsorted(values, xkey[np.searchsorted(rows, x)])
        rank_y = np.searchsorted(values, probe[np.searchsorted(rows, y)])
        src_rank, dst_rank = (rank_y, rank_x) if walked_back else (rank_x, rank_y)
        top = len(values) - 1
        return [(mode, top - src_rank, top - dst_rank) if flipped else (mode, src_rank, dst_rank)
                for mode, flipped in ([(0, walked_back), (0, not walked_back)] if op == "!=" else
                                      [({"<": 0, "<=": 1, "=": 2}[op], walked_back)])]

    def _dominance(self, combo: tuple[tuple[int, np.ndarray, np.ndarray], ...], key: np.ndarray, src: np.ndarray,
                   val: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Per event of `dst`, the largest `val` of the events `src` of its partition strictly before it
        that every (mode, src ranks, dst ranks) of `combo` admits: an equality refines the partition, at
        or below is below the next rank; one range left is `dominance_max`, two `dominance_max2`, more
        `dominance_maxk`."""
        scode, dcode = self.code[src], self.code[dst]
        ranged = []
        for mode, s, d in combo:
            if mode == 2:
                span = int(max(s.max(initial=0), d.max(initial=0))) + 1
                scode, dcode = scode * span + s, dcode * span + d
            else:
                ranged.append((s, d + mode))
        if not ranged:  # equalities only: the latest before it in the refined partition
            ranged.append((np.zeros(len(src), np.int64), np.ones(len(dst), np.int64)))
        got = np.full(len(dst), -np.inf)
        if not len(src) or not len(dst):
            return got
        if len(ranged) >= 3:  # sorts by code and order of its own, bit by bit
            span = len(self.times) + 2
            return dominance_maxk(scode, key[src] % span, [s for s, _ in ranged], val,
                                  dcode, key[dst] % span, [d for _, d in ranged])
        so, do = np.lexsort((key[src], scode)), np.lexsort((key[dst], dcode))
        (s1, d1), *rest = ranged
        nr = int(max(s1.max(), d1.max())) + 1
        if rest:
            (s2, d2), = rest
            got[do] = dominance_max2(scode[so], key[src][so], s1[so], s2[so], val[so],
                                     dcode[do], key[dst][do], d1[do], d2[do])
        else:
            got[do] = dominance_max(scode[so], key[src][so], s1[so], val[so], dcode[do], key[dst][do], d1[do], 0, nr)
        return got

    def time_of(self, rank: np.ndarray) -> np.ndarray:
        """The times of ranks as float64 (-inf for -1)."""
        return np.where(rank >= 0, self.times[np.maximum(rank, 0)].astype(np.float64), -np.inf)


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo[i]:hi[i]]) per i (-inf where empty): a sparse table of maxima over spans of 2**j."""
    out = np.full(len(lo), -np.inf)
    length = hi - lo
    table = [values]
    while len(values) and (1 << len(table)) <= len(values):
        half = 1 << (len(table) - 1)
        table.append(np.maximum(table[-1][:-half], table[-1][half:]))
    ok = np.flatnonzero(length > 0)
    level = np.floor(np.log2(np.maximum(length[ok], 1))).astype(np.int64)
    level -= (np.left_shift(1, level) > length[ok]).astype(np.int64)  # exact, whatever log2 rounds
    level += (np.left_shift(1, level + 1) <= length[ok]).astype(np.int64)
    for j in np.unique(level):
        sel = ok[level == j]
        out[sel] = np.maximum(table[j][lo[sel]], table[j][hi[sel] - (1 << int(j))])
    return out


def _latest_before(key: np.ndarray, code: np.ndarray, src: np.ndarray, val: np.ndarray,
                   dst: np.ndarray) -> np.ndarray:
    """Per event of `dst`: the largest `val` of the events `src` of its partition strictly before it."""
    out = np.full(len(dst), -np.inf)
    if not len(src) or not len(dst):
        return out
    order = np.argsort(key[src], kind="stable")
    skey, scode = key[src][order], code[src][order]
    best = pd.Series(val[order]).groupby(scode).cummax().to_numpy()
    at = np.searchsorted(skey, key[dst], side="left") - 1  # the last src event before it
    ok = at >= 0
    ok[ok] = scode[at[ok]] == code[dst[ok]]
    out[ok] = best[at[ok]]
    return out


@njit(cache=True)
def dominance_max(src_code, src_key, src_rank, src_val, dst_code, dst_key, dst_rank, mode, nr):  # noqa: ANN001, ANN202
    """Per event of `dst` (sorted by key: partition, then time), the largest `src_val` of the events
    of `src` (sorted alike) of its partition with a smaller key and a rank below its own (mode 0), at
    or below (1) or equal (2): a Fenwick tree of maxima over the ranks, filled in time order and
    emptied at each partition (-inf: none)."""
    out = np.full(dst_code.shape[0], -np.inf)
    tree = np.full(nr + 1, -np.inf)
    point = np.full(nr, -np.inf)
    filled = np.empty(src_code.shape[0], np.int64)  # the ranks in the tree since its partition began
    nfill, j, cur = 0, 0, -1
    for q in range(dst_code.shape[0]):
        if dst_code[q] != cur:  # a new partition: an empty tree
            for f in range(nfill):
                point[filled[f]] = -np.inf
                i = filled[f] + 1
                while i <= nr:
                    tree[i] = -np.inf
                    i += i & (-i)
            nfill, cur = 0, dst_code[q]
        while j < src_code.shape[0] and (src_code[j] < cur or (src_code[j] == cur and src_key[j] < dst_key[q])):
            if src_code[j] == cur:
                r = src_rank[j]
                point[r] = max(point[r], src_val[j])
                i = r + 1
                while i <= nr:
                    tree[i] = max(tree[i], src_val[j])
                    i += i & (-i)
                filled[nfill] = r
                nfill += 1
            j += 1
        if mode == 2:
            out[q] = point[dst_rank[q]]
            continue
        best = -np.inf
        i = dst_rank[q] + (1 if mode == 1 else 0)  # ranks 0..i-1
        while i > 0:
            best = max(best, tree[i])
            i -= i & (-i)
        out[q] = best
    return out


@njit(cache=True)
def dominance_max2(src_code, src_key, src_a, src_b, src_val, dst_code, dst_key, dst_a, dst_b):  # noqa: ANN001, ANN202
    """`dominance_max` in two ranks: per event of `dst` (sorted by code, then key), the largest `src_val`
    of the events of `src` (sorted alike) with its code, a smaller key and both ranks below its own
    (-inf: none). Per code, a Fenwick tree over the `a` ranks whose every node holds a Fenwick tree of
    maxima over the sorted `b` ranks of the events that will enter it, filled in key order:
    O(log^2) per event."""
    nd, ns = dst_code.shape[0], src_code.shape[0]
    out = np.full(nd, -np.inf)
    q0, i0 = 0, 0
    while q0 < nd:
        code = dst_code[q0]
        q1 = q0
        while q1 < nd and dst_code[q1] == code:
            q1 += 1
        while i0 < ns and src_code[i0] < code:
            i0 += 1
        i1 = i0
        while i1 < ns and src_code[i1] == code:
            i1 += 1
        if i1 > i0:
            ua = np.unique(src_a[i0:i1])
            k = ua.shape[0]
            size = np.zeros(k + 2, np.int64)
            for s in range(i0, i1):
                i = np.searchsorted(ua, src_a[s]) + 1
                while i <= k:
                    size[i + 1] += 1
                    i += i & (-i)
            start = np.cumsum(size)  # node i's b ranks: bs[start[i]:start[i + 1]]
            bs = np.empty(start[k + 1], np.int64)
            fill = start.copy()
            for s in range(i0, i1):
                i = np.searchsorted(ua, src_a[s]) + 1
                while i <= k:
                    bs[fill[i]] = src_b[s]
                    fill[i] += 1
                    i += i & (-i)
            for i in range(1, k + 1):
                bs[start[i]:start[i + 1]] = np.sort(bs[start[i]:start[i + 1]])
            tree = np.full(start[k + 1], -np.inf)
            j = i0
            for q in range(q0, q1):
                while j < i1 and src_key[j] < dst_key[q]:
                    i = np.searchsorted(ua, src_a[j]) + 1
                    while i <= k:
                        lo, hi = start[i], start[i + 1]
                        p = np.searchsorted(bs[lo:hi], src_b[j]) + 1
                        while p <= hi - lo:
                            tree[lo + p - 1] = max(tree[lo + p - 1], src_val[j])
                            p += p & (-p)
                        i += i & (-i)
                    j += 1
                best = -np.inf
                i = np.searchsorted(ua, dst_a[q])  # the a ranks below its own: nodes of prefix i
                while i > 0:
                    lo, hi = start[i], start[i + 1]
                    p = np.searchsorted(bs[lo:hi], dst_b[q])  # the b ranks below its own
                    while p > 0:
                        best = max(best, tree[lo + p - 1])
                        p -= p & (-p)
                    i -= i & (-i)
                out[q] = best
        q0 = q1
        i0 = i1
    return out


def dominance_maxk(src_code: np.ndarray, src_order: np.ndarray, src_ranks: list[np.ndarray], src_val: np.ndarray,
                   dst_code: np.ndarray, dst_order: np.ndarray, dst_ranks: list[np.ndarray]) -> np.ndarray:
    """`dominance_max2` in any number k >= 2 of ranks: per event of `dst`, the largest `src_val` of the
    events of `src` with its code, a smaller order (time) and each rank below its own (-inf: none), in any
    order of either. Divide and conquer over the order's bits: at bit b, an event of `src` whose bit is 0
    precedes every event of `dst` with the same higher bits whose bit is 1, and each pair of a smaller
    order meets at exactly one bit. Among those pairs the order no longer matters, so the first rank
    takes its place and the higher bits join the code: k - 1 ranks, down to `dominance_max2`'s two.
    O(n log^k n); where few pairs share a code (at most `_SCAN_PAIRS` per event), a scan of them."""
    out = np.full(len(dst_code), -np.inf)
    if not len(src_code) or not len(dst_code):
        return out
    uniq, codes = np.unique(np.concatenate([src_code, dst_code]), return_inverse=True)
    scode, dcode = codes[:len(src_code)].astype(np.int64), codes[len(src_code):].astype(np.int64)
    pairs = np.bincount(scode, minlength=len(uniq)) @ np.bincount(dcode, minlength=len(uniq))
    if len(src_ranks) == 2 or pairs <= _SCAN_PAIRS * (len(scode) + len(dcode)):
        so, do = np.lexsort((src_order, scode)), np.lexsort((dst_order, dcode))
        if len(src_ranks) == 2:
            out[do] = dominance_max2(scode[so], src_order[so], src_ranks[0][so], src_ranks[1][so], src_val[so],
                                     dcode[do], dst_order[do], dst_ranks[0][do], dst_ranks[1][do])
        else:
            out[do] = _dominance_scan(scode[so], src_order[so], np.stack(src_ranks, 1)[so], src_val[so], dcode[do],
                                      dst_order[do], np.stack(dst_ranks, 1)[do])
        return out
    top = int(max(src_order.max(), dst_order.max())) + 1
    for bit in range(top.bit_length()):
        s = np.flatnonzero((src_order >> bit) & 1 == 0)
        d = np.flatnonzero((dst_order >> bit) & 1 == 1)
        if not len(s) or not len(d):
            continue
        blocks = (top >> (bit + 1)) + 1
        sc, dc = scode[s] * blocks + (src_order[s] >> (bit + 1)), dcode[d] * blocks + (dst_order[d] >> (bit + 1))
        (sa, *sr), (da, *dr) = [r[s] for r in src_ranks], [r[d] for r in dst_ranks]
        got = dominance_maxk(sc, sa, sr, src_val[s], dc, da, dr)
        out[d] = np.maximum(out[d], got)
    return out


_SCAN_PAIRS = 64  # pairs of one code per event below which `dominance_maxk` scans them


@njit(cache=True)
def _dominance_scan(src_code: np.ndarray, src_order: np.ndarray, src_ranks: np.ndarray, src_val: np.ndarray,
                    dst_code: np.ndarray, dst_order: np.ndarray, dst_ranks: np.ndarray) -> np.ndarray:
    """`dominance_maxk` by a scan of the pairs of each code (both sides sorted by code)."""
    nd, ns, k = dst_code.shape[0], src_code.shape[0], src_ranks.shape[1]
    out = np.full(nd, -np.inf)
    i0 = 0
    for q in range(nd):
        while i0 < ns and src_code[i0] < dst_code[q]:
            i0 += 1
        best = -np.inf
        i = i0
        while i < ns and src_code[i] == dst_code[q]:
            if src_order[i] < dst_order[q] and src_val[i] > best:
                ok = True
                for r in range(k):
                    if src_ranks[i, r] >= dst_ranks[q, r]:
                        ok = False
                        break
                if ok:
                    best = src_val[i]
            i += 1
        out[q] = best
    return out
