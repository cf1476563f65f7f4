"""Dominance queries of a negated SEQ's match walk (`negseqs.Matches`): per event of `dst`, the largest value
of the events of `src` of its code with a smaller order (time) and every rank below its own.

One rank is a Fenwick tree of maxima filled in time order (`dominance_max`); two, a Fenwick tree over the
first's ranks whose nodes hold trees over the second's (`dominance_max2`); three to `TREE_RANGES`, a
division over the order's bits down to two (`dominance_maxk`), O(n log^k n). Past that, the cost of the
division outgrows a scan of the pairs within a window's length of each event (`window_scan`).
"""

from __future__ import annotations

import numpy as np
from numba import njit


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
            out[do] = window_scan(scode[so], src_order[so], np.stack(src_ranks, 1)[so], src_val[so], dcode[do],
                                  dst_order[do], np.stack(dst_ranks, 1)[do], np.full(len(do), _ANY, np.int64),
                                  np.zeros((len(so), 0), np.int64), np.zeros((len(do), 0), np.int64))
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
TREE_RANGES = 5  # ranges of a search up to which `dominance_maxk` divides (O(n log^k n)); past it, `window_scan`
_ANY = np.iinfo(np.int64).min  # a reach that leaves out no event: `dominance_maxk`'s scan of every pair of a code


@njit(cache=True)
def window_scan(src_code: np.ndarray, src_order: np.ndarray, src_ranks: np.ndarray, src_val: np.ndarray,
                 dst_code: np.ndarray, dst_order: np.ndarray, dst_ranks: np.ndarray, dst_reach: np.ndarray,
                 src_unequal: np.ndarray, dst_unequal: np.ndarray) -> np.ndarray:
    """`dominance_maxk` by a scan of the pairs of each code whose src order lies in [reach, order) of the
    dst event (`_ANY`: every order below its own), both sides sorted by code, then order, the reach rising
    with the order: O(the src events within a window's length of each dst event). A pair is admitted where
    each src rank is below the dst's and each of `src_unequal` (columns: `!=` comparisons) differs from
    the dst's."""
    nd, ns, k, u = dst_code.shape[0], src_code.shape[0], src_ranks.shape[1], src_unequal.shape[1]
    out = np.full(nd, -np.inf)
    lo = 0
    for q in range(nd):
        while lo < ns and (src_code[lo] < dst_code[q] or src_code[lo] == dst_code[q] and src_order[lo] < dst_reach[q]):
            lo += 1
        best = -np.inf
        i = lo
        while i < ns and src_code[i] == dst_code[q] and src_order[i] < dst_order[q]:
            if src_val[i] > best:
                ok = True
                for r in range(k):
                    if src_ranks[i, r] >= dst_ranks[q, r]:
                        ok = False
                        break
                for r in range(u):
                    if ok and src_unequal[i, r] == dst_unequal[q, r]:
                        ok = False
                if ok:
                    best = src_val[i]
            i += 1
        out[q] = best
    return out
