"""Numba kernel of the incremental stream: Kleene propagation that carries over micro-batches.

The batch kernel (`kernel.py`) builds one tree per (partition, block of
windows) and throws it away when the block is done. Here a task's tree
lives as long as its block has a window open, and each micro-batch adds
only the events the watermark passed since the last one. The tree must then
take keys that arrive later, which a Fenwick tree over ranks fixed in
advance cannot. The keyed store of a task is instead a short list of
*segments* (the logarithmic method of Bentley and Saxe, for a decomposable
query: "sum of the predecessors whose key is admitted by this probe"):

- the events of one micro-batch in one task form a Fenwick tree over their
  own keys (known when the batch comes), read and written as in the batch
  kernel;
- when the task's events of the batch are done, that tree becomes a static
  segment: its keys sorted, with the inclusive prefix sums of their
  aggregates (limb by limb, not carried, so a difference of two prefix sums
  is exact: an equality probe reads a key's range as P[hi] - P[lo]);
- a segment at least half as long as the one before it is merged into it,
  so a task has O(log n) segments, each event is merged O(log n) times, and
  a probe reads one prefix sum per segment after a binary search;
- a micro-batch brings a task few events (one or two per 10 s in a busy
  stream): those go to the task's *tail* instead, up to `TAIL` vertices in
  arrival order that a probe scans, sealed into a segment when full. So a
  small batch builds no tree, and segments start `TAIL` long (fewer merges).

A key is a float64 (`keys.edge_values`): what the batch kernel ranks, so
ties, -0.0 and the order of the batch are kept. Without an edge predicate
a task's store is one running total.

Counts are exact multi-limb integers as in `kernel.py` (32-bit limbs in
uint64), each cell with limbs of its own: a vertex's aggregates are one
column of rows, cell c's limbs at rows off[c]..off[c+1]-1 (a COUNT needs one
or two limbs where a SUM of scaled floats needs four or more), so a carried
vector is as small as its cells allow. A normalized vertex keeps each cell's
top limb zero, so sums of fewer than 2**31 vertices never overflow a limb;
when a cell would need its top limb, every array gives that cell more limbs
and the event is computed again. Group sums per (group, block) are limb-wise
sums of final vertices, carried when a row is emitted.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

_MASK = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)

MAX_SEGMENTS = 48  # per task: merging keeps far fewer (log2 of its events)
TAIL = 16  # vertices a task's tail holds before it is sealed into a segment

# The carried state (numba takes named tuples of arrays; `feed` returns a new one when it grows an array).
State = namedtuple("State", [
    "off",  # (cells + 1,) int64: cell c's limbs are rows off[c]..off[c+1]-1 of a vector
    "pk",  # (P,) float64: keys of every segment, pooled
    "pv",  # (P, rows, lanes) uint64: their inclusive prefix sums
    "tseg",  # (tasks, MAX_SEGMENTS, 2) int64: (start in the pool, length) of each segment of a task
    "tnseg",  # (tasks,) int64: segments in use
    "ttail",  # (tasks, 2) int64: (start in the pool, length) of a task's tail (start -1: none yet)
    "trun",  # (tasks, rows, lanes) uint64: running total of a task without an edge predicate
    "gacc",  # (slots, rows, lanes) uint64: sums of final vertices per (group, block)
    "gmm",  # (slots, nm, lanes) float64: MIN/MAX per (group, block)
    "ghas",  # (slots, lanes) bool: a lane has a trend
    "top",  # (1,) int64: end of the used pool
])


# Per event of a micro-batch, in (partition, time) order.
Batch = namedtuple("Batch", [
    "kmin", "kmax",  # first and last window (kmin clipped to the first window not reported)
    "newt",  # starts a new time stamp within its partition
    "key",  # float64: its key as a predecessor (edge predicate)
    "probe",  # float64: what it admits of its predecessors' keys
    "mult",  # (n, cells - 1, digits) uint64: own multiplier of cells 1..
    "mmval",  # (n, nm) float64
])


@njit(cache=True)
def _grow_pool(st, need):  # noqa: ANN001, ANN202
    cap = st.pk.shape[0]
    if need <= cap:
        return st
    cap = max(need, 2 * cap, 64)
    pk = np.empty(cap, np.float64)
    pk[: st.pk.shape[0]] = st.pk
    pv = np.empty((cap, st.pv.shape[1], st.pv.shape[2]), np.uint64)
    pv[: st.pv.shape[0]] = st.pv
    return State(st.off, pk, pv, st.tseg, st.tnseg, st.ttail, st.trun, st.gacc, st.gmm, st.ghas, st.top)


@njit(cache=True)
def relaid(a, off, new):  # noqa: ANN001, ANN202
    """(items, rows, lanes) with each cell's limbs moved from layout `off` to `new` (more limbs: zeros)."""
    out = np.zeros((a.shape[0], new[-1], a.shape[2]), a.dtype)
    for c in range(off.shape[0] - 1):
        n = off[c + 1] - off[c]
        out[:, new[c]: new[c] + n, :] = a[:, off[c]: off[c] + n, :]
    return out


@njit(cache=True)
def _widened(st, c):  # noqa: ANN001, ANN202
    """The state with more limbs for cell c (a quarter more, at least two)."""
    n = st.off[c + 1] - st.off[c]
    new = st.off.copy()
    new[c + 1:] += max(2, n // 4)
    return State(new, st.pk, relaid(st.pv, st.off, new), st.tseg, st.tnseg, st.ttail, relaid(st.trun, st.off, new),
                 relaid(st.gacc, st.off, new), st.gmm, st.ghas, st.top)


@njit(cache=True)
def _carry(acc, a, b, j0, j1):  # noqa: ANN001, ANN202
    """Carry limbs a..b-1 of `acc` (lanes j0..j1-1); True when the top one is then nonzero (the caller widens)."""
    for j in range(j0, j1):
        cy = np.uint64(0)
        for lb in range(a, b):
            x = acc[lb, j] + cy
            acc[lb, j] = x & _MASK
            cy = x >> _SHIFT
        if cy != 0 or acc[b - 1, j] != 0:
            return True
    return False


@njit(cache=True)
def _vertex(acc, off, mult, ndig, j0, j1):  # noqa: ANN001, ANN202
    """Given the predecessors' sums in `acc`: start a trend in every lane, carry the
    count, add count * own multiplier to cells 1.. The cell that runs out of limbs, else -1."""
    c0, c1 = off[0], off[1]
    for j in range(j0, j1):
        acc[c0, j] += 1
    if _carry(acc, c0, c1, j0, j1):
        return 0
    for c in range(1, off.shape[0] - 1):
        base, lim = off[c], off[c + 1] - off[c]
        for d in range(ndig):
            k = mult[c - 1, d]
            if k == 0:
                continue
            for lb in range(c1 - c0):
                if lb + d + 1 >= lim:  # no room for this limb's product: it must be zero
                    for j in range(j0, j1):
                        if acc[c0 + lb, j] != 0:
                            return c
                    continue
                lo = acc[base + lb + d]
                up = acc[base + lb + d + 1]
                src = acc[c0 + lb]
                for j in range(j0, j1):
                    x = src[j] * k
                    lo[j] += x & _MASK
                    up[j] += x >> _SHIFT
        if _carry(acc, base, off[c + 1], j0, j1):
            return c
    return -1


@njit(cache=True)
def _add(dst, src, j0, j1):  # noqa: ANN001, ANN202
    for r in range(dst.shape[0]):
        d = dst[r]
        s = src[r]
        for j in range(j0, j1):
            d[j] += s[j]


@njit(cache=True)
def _sub(dst, src, j0, j1):  # noqa: ANN001, ANN202
    for r in range(dst.shape[0]):
        d = dst[r]
        s = src[r]
        for j in range(j0, j1):
            d[j] -= s[j]


@njit(cache=True)
def _read(acc, st, fen, keys, m, tid, probe, keyed, point, strict, j0, j1):  # noqa: ANN001, ANN202
    """acc lanes j0..j1-1 += the aggregates of the predecessors the probe admits."""
    if not keyed:
        _add(acc, st.trun[tid], j0, j1)
        return
    for s in range(st.tnseg[tid]):
        a = st.tseg[tid, s, 0]
        n = st.tseg[tid, s, 1]
        seg = st.pk[a: a + n]
        if point:
            lo = np.searchsorted(seg, probe, side="left")
            hi = np.searchsorted(seg, probe, side="right")
            if hi > lo:
                _add(acc, st.pv[a + hi - 1], j0, j1)
                if lo > 0:
                    _sub(acc, st.pv[a + lo - 1], j0, j1)
        else:
            i = np.searchsorted(seg, probe, side="left") if strict else np.searchsorted(seg, probe, side="right")
            if i > 0:
                _add(acc, st.pv[a + i - 1], j0, j1)
    a, n = st.ttail[tid, 0], st.ttail[tid, 1]
    for i in range(a, a + n):
        k = st.pk[i]
        if (k == probe) if point else ((k < probe) if strict else (k <= probe)):
            _add(acc, st.pv[i], j0, j1)
    if m == 0:
        return
    if point:
        i = np.searchsorted(keys, probe)
        if i < m and keys[i] == probe:
            _add(acc, fen[i + 1], j0, j1)
    else:
        i = np.searchsorted(keys, probe, side="left") if strict else np.searchsorted(keys, probe, side="right")
        while i > 0:
            _add(acc, fen[i], j0, j1)
            i -= i & (-i)


@njit(cache=True)
def _join(st, fen, keys, m, tid, key, val, keyed, point, j0, j1):  # noqa: ANN001, ANN202
    """A vertex joins its task's store (the batch's tree, or the running total)."""
    if not keyed:
        _add(st.trun[tid], val, j0, j1)
        return
    i = np.searchsorted(keys, key) + 1
    if point:
        _add(fen[i], val, j0, j1)
        return
    while i <= m:
        _add(fen[i], val, j0, j1)
        i += i & (-i)


@njit(cache=True)
def _seal(st, fen, keys, m, tid, point):  # noqa: ANN001, ANN202
    """The batch's tree of a task becomes a segment (prefix sums), then merges."""
    lanes = fen.shape[2]
    if not point:  # the Fenwick tree's nodes back to one value per key (its construction undone)
        for i in range(m, 0, -1):
            p = i + (i & (-i))
            if p <= m:
                _sub(fen[p], fen[i], 0, lanes)
    for i in range(2, m + 1):
        _add(fen[i], fen[i - 1], 0, lanes)
    top = st.top[0]
    st = _grow_pool(st, top + m)
    st.pk[top: top + m] = keys
    st.pv[top: top + m] = fen[1: m + 1]
    return _segment(st, tid, top, m)


@njit(cache=True)
def _seal_tail(st, tid):  # noqa: ANN001, ANN202
    """A task's tail becomes a segment: its vertices sorted by key, prefix-summed."""
    a, n = st.ttail[tid, 0], st.ttail[tid, 1]
    if n == 0:
        return st
    top = st.top[0]
    st = _grow_pool(st, top + n)
    lanes = st.pv.shape[2]
    order = np.argsort(st.pk[a: a + n], kind="mergesort")
    for i in range(n):
        st.pk[top + i] = st.pk[a + order[i]]
        st.pv[top + i] = st.pv[a + order[i]]
        if i:
            _add(st.pv[top + i], st.pv[top + i - 1], 0, lanes)
    st.ttail[tid, 1] = 0
    return _segment(st, tid, top, n)


@njit(cache=True)
def _segment(st, tid, top, m):  # noqa: ANN001, ANN202
    """Entries top..top+m-1 of the pool become the task's last segment; merge by size."""
    n = st.tnseg[tid]
    st.tseg[tid, n, 0] = top
    st.tseg[tid, n, 1] = m
    st.tnseg[tid] = n + 1
    st.top[0] = top + m
    while st.tnseg[tid] >= 2:
        n = st.tnseg[tid]
        la, lb = st.tseg[tid, n - 2, 1], st.tseg[tid, n - 1, 1]
        if 2 * lb < la and n < MAX_SEGMENTS:
            break
        st = _merge(st, tid, n - 2)
    return st


@njit(cache=True)
def _merge(st, tid, s):  # noqa: ANN001, ANN202
    """Segments s and s + 1 of a task become one (written at the pool's top)."""
    a1, n1 = st.tseg[tid, s, 0], st.tseg[tid, s, 1]
    a2, n2 = st.tseg[tid, s + 1, 0], st.tseg[tid, s + 1, 1]
    top = st.top[0]
    st = _grow_pool(st, top + n1 + n2)
    pk, pv = st.pk, st.pv
    lanes = pv.shape[2]
    i, j, o = 0, 0, top
    while i < n1 or j < n2:
        first = j >= n2 or (i < n1 and pk[a1 + i] <= pk[a2 + j])
        src, at = (a1, i) if first else (a2, j)
        pk[o] = pk[src + at]
        pv[o] = pv[src + at]  # this key's value: its prefix sum minus the one before, plus the running sum
        if at > 0:
            _sub(pv[o], pv[src + at - 1], 0, lanes)
        if o > top:
            _add(pv[o], pv[o - 1], 0, lanes)
        if first:
            i += 1
        else:
            j += 1
        o += 1
    st.tseg[tid, s, 0] = top
    st.tseg[tid, s, 1] = n1 + n2
    st.tnseg[tid] -= 1
    st.top[0] = top + n1 + n2
    return st


@njit(cache=True)
def feed(
    st: State,
    task: np.ndarray,  # (tasks, 5): task id, group slot, block, event range a..b-1
    lanes: int,
    ev: Batch,
    ndig: int,  # digits in use of the multipliers
    mmax: np.ndarray,  # (nm,) bool: MAX (else MIN)
    keyed: bool,
    point: bool,  # the edge predicate is an equality (else an order: `strict` <, or <=)
    strict: bool,
) -> State:
    """Propagate a micro-batch's events through their tasks, in order; the
    state is updated in place and returned (a new tuple when an array grew)."""
    rows = st.off[-1]
    acc = np.zeros((rows, lanes), np.uint64)
    pend = np.zeros((4, rows, lanes), np.uint64)
    fen = np.zeros((64, rows, lanes), np.uint64)
    for x in range(task.shape[0]):
        tid, sl, blk, a, b = task[x, 0], task[x, 1], task[x, 2], task[x, 3], task[x, 4]
        k0 = blk * lanes
        tail = keyed and b - a <= TAIL  # a few events: into the tail, no tree
        if keyed and st.ttail[tid, 1] + (b - a if tail else 1) > TAIL:
            st = _seal_tail(st, tid)
        if tail and st.ttail[tid, 0] < 0:  # the task's tail, once, at the pool's top
            st = _grow_pool(st, st.top[0] + TAIL)
            st.ttail[tid, 0] = st.top[0]
            st.top[0] += TAIL
        keys = np.unique(ev.key[a:b]) if keyed and not tail else np.zeros(0, np.float64)
        m = keys.shape[0]
        if m + 1 > fen.shape[0]:
            fen = np.zeros((max(2 * fen.shape[0], m + 1), rows, lanes), np.uint64)
        fen[: m + 1] = 0
        e = a
        while e < b:
            g1 = e + 1  # events e..g1-1: one time stamp
            while g1 < b and not ev.newt[g1]:
                g1 += 1
            if g1 - e > pend.shape[0]:
                pend = np.zeros((2 * (g1 - e), rows, lanes), np.uint64)
            v = e
            while v < g1:
                j0 = max(ev.kmin[v], k0) - k0
                j1 = min(ev.kmax[v], k0 + lanes - 1) - k0 + 1
                acc[:, j0:j1] = 0
                _read(acc, st, fen, keys, m, tid, ev.probe[v], keyed, point, strict, j0, j1)
                c = _vertex(acc, st.off, ev.mult[v], ndig, j0, j1)
                if c >= 0:  # cell c needs more limbs: every array gets them, v is computed again
                    off = st.off
                    st = _widened(st, c)
                    rows = st.off[-1]
                    acc = np.zeros((rows, lanes), np.uint64)
                    pend = relaid(pend, off, st.off)
                    fen = relaid(fen, off, st.off)
                    continue
                _add(st.gacc[sl], acc, j0, j1)
                for q in range(mmax.shape[0]):
                    val = ev.mmval[v, q]
                    for j in range(j0, j1):
                        if (val > st.gmm[sl, q, j]) if mmax[q] else (val < st.gmm[sl, q, j]):
                            st.gmm[sl, q, j] = val
                for j in range(j0, j1):
                    st.ghas[sl, j] = True
                pend[v - e, :, :] = 0
                pend[v - e, :, j0:j1] = acc[:, j0:j1]
                v += 1
            for v in range(e, g1):  # after every event of the time stamp has read the store
                j0 = max(ev.kmin[v], k0) - k0
                j1 = min(ev.kmax[v], k0 + lanes - 1) - k0 + 1
                if tail:
                    at = st.ttail[tid, 0] + st.ttail[tid, 1]
                    st.pk[at] = ev.key[v]
                    st.pv[at] = pend[v - e]
                    st.ttail[tid, 1] += 1
                else:
                    _join(st, fen, keys, m, tid, ev.key[v], pend[v - e], keyed, point, j0, j1)
            e = g1
        if keyed and m:
            st = _seal(st, fen, keys, m, tid, point)
    return st


@njit(cache=True)
def compact(st: State, alive: np.ndarray) -> State:
    """The pool without the segments of tasks no longer `alive` nor replaced by merges."""
    total = 0
    for tid in range(st.tnseg.shape[0]):
        if alive[tid]:
            for s in range(st.tnseg[tid]):
                total += st.tseg[tid, s, 1]
            if st.ttail[tid, 0] >= 0:
                total += TAIL
    cap = 2 * total + 1024  # room to grow before the next copy
    pk = np.empty(cap, np.float64)
    pv = np.empty((cap, st.pv.shape[1], st.pv.shape[2]), np.uint64)
    o = 0
    for tid in range(st.tnseg.shape[0]):
        if not alive[tid]:
            st.tnseg[tid] = 0
            st.ttail[tid, 0] = -1
            st.ttail[tid, 1] = 0
            continue
        a, n = st.ttail[tid, 0], st.ttail[tid, 1]
        if a >= 0:
            pk[o: o + n] = st.pk[a: a + n]
            pv[o: o + n] = st.pv[a: a + n]
            st.ttail[tid, 0] = o
            o += TAIL
        for s in range(st.tnseg[tid]):
            a, n = st.tseg[tid, s, 0], st.tseg[tid, s, 1]
            pk[o: o + n] = st.pk[a: a + n]
            pv[o: o + n] = st.pv[a: a + n]
            st.tseg[tid, s, 0] = o
            o += n
    top = np.zeros(1, np.int64)
    top[0] = o
    return State(st.off, pk, pv, st.tseg, st.tnseg, st.ttail, st.trun, st.gacc, st.gmm, st.ghas, top)
