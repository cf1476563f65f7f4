"""Numba kernels over one window of an `OrderGraph` (orderview.py), all nogil.

Inputs are per window position (time order): `gend` = the first position of
the next time group, `ka` / `kb` = the rank of the key / probe among the
window's values (-1: NaN), with the comparison turned into `<` (`strict`) or
`<=` by flipping ranks for `>` and `>=`. So u -> v is an edge exactly when
`gend[u] <= v`, `ka[u] >= 0`, `kb[v] >= 0` and `ka[u] < kb[v]` (`<=`).

Trees are bottom-up segment trees over positions (leaf = size + position):
"the first position at or after p whose node passes" descends from the first
passing node to its right, O(log n). Counts saturate at `SAT` (exact counts
are Python integers, orderview.py); they only size the slices of the walk.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INF = 1 << 62  # an empty leaf of a min tree; `m` starts at INF - 1 (no bound)
SAT = 1 << 61  # saturated count: at least this many


@njit(cache=True, nogil=True)
def _pow2(n):  # noqa: ANN001, ANN202 - numba kernel
    size = 1
    while size < n:
        size *= 2
    return size


@njit(cache=True, nogil=True)
def max_tree(kb):  # noqa: ANN001, ANN202
    """Max of `kb` per node (padding -1)."""
    n = kb.shape[0]
    size = _pow2(max(n, 1))
    t = np.full(2 * size, -1, np.int64)
    t[size:size + n] = kb
    for i in range(size - 1, 0, -1):
        t[i] = max(t[2 * i], t[2 * i + 1])
    return t


@njit(cache=True, nogil=True)
def next_succ(t, p, k, strict):  # noqa: ANN001, ANN202
    """The first position q >= p with kb[q] > k (`strict`) or >= k; -1 if none."""
    size = t.shape[0] // 2
    if p >= size:
        return -1
    i = p + size
    while True:
        if t[i] > k or (not strict and t[i] == k):
            while i < size:
                c = 2 * i
                i = c if (t[c] > k or (not strict and t[c] == k)) else c + 1
            return i - size
        while i & 1:
            i >>= 1
        if i == 0:
            return -1
        i += 1


@njit(cache=True, nogil=True)
def _passes(mina, minb, i, m, strict):  # noqa: ANN001, ANN202
    return mina[i] < m or minb[i] < m or (strict and minb[i] == m)


@njit(cache=True, nogil=True)
def _first(mina, minb, p, m, strict):  # noqa: ANN001, ANN202
    """The first inserted position q >= p with ka[q] < m or kb[q] <= m (`strict`) / < m."""
    size = mina.shape[0] // 2
    if p >= size:
        return -1
    i = p + size
    while True:
        if _passes(mina, minb, i, m, strict):
            while i < size:
                c = 2 * i
                i = c if _passes(mina, minb, c, m, strict) else c + 1
            return i - size
        while i & 1:
            i >>= 1
        if i == 0:
            return -1
        i += 1


@njit(cache=True, nogil=True)
def _set(t, i, v):  # noqa: ANN001, ANN202 - a min tree: leaf i := v
    size = t.shape[0] // 2
    j = i + size
    t[j] = v
    j >>= 1
    while j:
        t[j] = min(t[2 * j], t[2 * j + 1])
        j >>= 1


@njit(cache=True, nogil=True)
def reduced_edges(gend, ka, kb, strict):  # noqa: ANN001, ANN202
    """The transitive reduction: (xs, ys) in increasing x, then y.

    u -> v is bypassed when some w between them (time) has u -> w and w -> v.
    (A longer bypass u -> w1 -> ... -> v always has such a w when u -> v is an
    edge: take the last wi with u -> wi; if it is not the last of the path,
    key(wi) op probe(w(i+1)), and not key(u) op probe(w(i+1)), give key(wi) op
    probe(v).) The u are taken by decreasing key, so the candidates w with
    u -> w (probe above the key of u) are inserted once, in decreasing probe
    order; from u, a walk over the inserted positions after u's time group
    keeps m = the least key among them in earlier groups: v is reduced exactly
    when kb[v] <= m (`<`: w -> v needs ka[w] < kb[v]) or kb[v] < m (`<=`).
    Only positions that can change m or be reduced stop the walk, which ends
    once m is at most ka[u] (no probe is left between them).
    """
    n = ka.shape[0]
    size = _pow2(max(n, 1))
    mina = np.full(2 * size, INF, np.int64)
    minb = np.full(2 * size, INF, np.int64)
    by_key = np.argsort(-ka, kind="mergesort")
    by_probe = np.argsort(-kb, kind="mergesort")
    xs = np.empty(max(16, n), np.int64)
    ys = np.empty(max(16, n), np.int64)
    e = 0
    nxt = 0
    for u in by_key:
        k = ka[u]
        if k < 0:
            break
        while nxt < n and kb[by_probe[nxt]] >= 0 and (kb[by_probe[nxt]] > k or (not strict and kb[by_probe[nxt]] == k)):
            w = by_probe[nxt]
            _set(mina, w, ka[w] if ka[w] >= 0 else INF)
            _set(minb, w, kb[w])
            nxt += 1
        m = INF - 1
        q = _first(mina, minb, gend[u], m, strict)
        while q >= 0 and m > k:
            ge = gend[q]
            newm = m
            while 0 <= q < ge:
                b = kb[q]
                if b >= 0 and (b < m or (strict and b == m)):
                    if e == xs.shape[0]:
                        xs = np.concatenate((xs, np.empty(e, np.int64)))
                        ys = np.concatenate((ys, np.empty(e, np.int64)))
                    xs[e] = u
                    ys[e] = q
                    e += 1
                a = ka[q]
                if 0 <= a < newm:
                    newm = a
                q = _first(mina, minb, q + 1, m, strict)
            m = newm
            if q >= 0:
                q = _first(mina, minb, q, m, strict)  # nothing in [ge, q) passed the larger m
    order = np.argsort(xs[:e] * n + ys[:e])
    return xs[:e][order], ys[:e][order]


@njit(cache=True, nogil=True)
def csr(xs, n):  # noqa: ANN001, ANN202
    ptr = np.zeros(n + 1, np.int64)
    for x in xs:
        ptr[x + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    return ptr


@njit(cache=True, nogil=True)
def counts_csr(ptr, ys, sink):  # noqa: ANN001, ANN202
    """Saturated path counts from each vertex to a sink over the reduced edges."""
    n = sink.shape[0]
    cnt = np.zeros(n, np.int64)
    for i in range(n - 1, -1, -1):
        c = 1 if sink[i] else 0
        for e in range(ptr[i], ptr[i + 1]):
            c = min(c + cnt[ys[e]], SAT)
        cnt[i] = c
    return cnt


@njit(cache=True, nogil=True)
def counts_all(gend, ka, kb, nranks, strict):  # noqa: ANN001, ANN202
    """Saturated path counts from each vertex (every vertex ends a trend): a Fenwick
    tree over probe ranks (reversed: suffixes), filled one time group at a time, backward."""
    n = ka.shape[0]
    fen = np.zeros(nranks + 1, np.int64)
    cnt = np.zeros(n, np.int64)
    hi = n
    while hi > 0:
        lo = hi - 1
        while lo > 0 and gend[lo - 1] == hi:
            lo -= 1
        for i in range(lo, hi):
            c = 1
            if ka[i] >= 0:
                j = nranks - ka[i] - (1 if strict else 0)  # reversed ranks < this one: probes above (or at) the key
                while j > 0:
                    c = min(c + fen[j], SAT)
                    j -= j & -j
            cnt[i] = c
        for i in range(lo, hi):
            if kb[i] >= 0:
                j = nranks - kb[i]
                while j <= nranks:
                    fen[j] = min(fen[j] + cnt[i], SAT)
                    j += j & -j
        hi = lo
    return cnt


@njit(cache=True, nogil=True)
def _emit(flat, offs, nt, path, depth):  # noqa: ANN001, ANN202
    start = offs[nt]
    if start + depth + 1 > flat.shape[0]:
        flat = np.concatenate((flat, np.empty(max(flat.shape[0], depth + 1), np.int64)))
    flat[start:start + depth + 1] = path[:depth + 1]
    if nt + 1 == offs.shape[0] - 1:
        offs = np.concatenate((offs, np.empty(offs.shape[0], np.int64)))
    offs[nt + 1] = start + depth + 1
    return flat, offs


@njit(cache=True, nogil=True)
def walk_all(prefix, anchors, limit, gend, ka, tree, strict):  # noqa: ANN001, ANN202
    """Up to `limit` trends (every path) that extend `prefix` by one of the anchors,
    depth-first pre-order: (flat positions, offsets)."""
    n = ka.shape[0]
    k = prefix.shape[0]
    path = np.empty(n, np.int64)
    path[:k] = prefix
    cursor = np.empty(n, np.int64)
    flat = np.empty(1024, np.int64)
    offs = np.zeros(1024, np.int64)
    nt = 0
    for s in anchors:
        if nt >= limit:
            break
        depth = k
        path[depth] = s
        cursor[depth] = gend[s]
        flat, offs = _emit(flat, offs, nt, path, depth)
        nt += 1
        while depth >= k and nt < limit:
            u = path[depth]
            q = -1 if ka[u] < 0 else next_succ(tree, cursor[depth], ka[u], strict)
            if q < 0:
                depth -= 1
                continue
            cursor[depth] = q + 1
            depth += 1
            path[depth] = q
            cursor[depth] = gend[q]
            flat, offs = _emit(flat, offs, nt, path, depth)
            nt += 1
    return flat[:offs[nt]], offs[:nt + 1]


@njit(cache=True, nogil=True)
def walk_csr(prefix, anchors, limit, ptr, ys, sink):  # noqa: ANN001, ANN202
    """Up to `limit` paths to a sink over the reduced edges that extend `prefix` by one
    of the anchors, depth-first: (flat positions, offsets)."""
    n = sink.shape[0]
    k = prefix.shape[0]
    path = np.empty(n, np.int64)
    path[:k] = prefix
    cursor = np.empty(n, np.int64)
    flat = np.empty(1024, np.int64)
    offs = np.zeros(1024, np.int64)
    nt = 0
    for s in anchors:
        if nt >= limit:
            break
        depth = k
        path[depth] = s
        cursor[depth] = ptr[s]
        if sink[s]:
            flat, offs = _emit(flat, offs, nt, path, depth)
            nt += 1
        while depth >= k and nt < limit:
            u = path[depth]
            if cursor[depth] == ptr[u + 1]:
                depth -= 1
                continue
            q = ys[cursor[depth]]
            cursor[depth] += 1
            depth += 1
            path[depth] = q
            cursor[depth] = ptr[q]
            if sink[q]:
                flat, offs = _emit(flat, offs, nt, path, depth)
                nt += 1
    return flat[:offs[nt]], offs[:nt + 1]
