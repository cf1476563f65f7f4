"""Numba kernels of the columnar engine: Kleene propagation over arrays.

One call processes every partition of a pattern `X+` or a SEQ of event
types, each once or Kleene (`SEQ(S, M+, E)`): the events arrive sorted by
(partition, time) as plain arrays with their state in the SEQ, and nothing
on the path is a Python object. A state reads running totals of the states
before it (no predicate: every earlier vertex is a predecessor) and, when
Kleene with the edge predicate, its own vertices through the index. Per event, its intermediate aggregates for every
window it falls in (GRETA sections 4 and 6) are one lane each, and:

- **counts are exact** multi-limb integers: `L` limbs of 32 bits held in
  uint64, so sums of up to 2**31 values never carry out of a limb; a value is
  normalized (carries propagated) once per event. When a normalized count
  needs more than `L` limbs, every array is widened in place to 1.5 L + 1
  limbs and the event is computed again (exact big counts, fixed-width
  speed while they are small; nothing already computed is redone);
- **predecessors are combined by index** (issue 7): a Fenwick tree over the
  ranks of the edge predicate's key answers "sum of the admitted
  predecessors' aggregates" for an order comparison in O(log n) per lane
  block; an equality keeps one bucket per key; no predicate, one bucket;
- **time is cut into epochs** of `span` windows: at an epoch start the
  tree is rebuilt over the live vertices (those whose last window is still
  open) and the epoch's events only, with ranks local to them, so memory and
  work follow the events per window, never the stream length.

Per (partition, window) the kernel returns partial result rows (windows at
an epoch boundary get two partials); the caller sums them per group.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LIMB_BITS = 32
EXTRA_LIMBS = 2  # partial rows carry this many more limbs than vertices


_MASK = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


@njit(cache=True)
def _epochs(kmin: np.ndarray, kmax: np.ndarray, lo: int, hi: int, span: int, out: np.ndarray, at: int) -> int:
    """Cut events lo..hi-1 into epochs of fewer than `span` windows; append
    (a, b) to out from row `at`; return the next free row. Events of one
    time have the same windows, so an epoch never splits them."""
    a = lo
    while a < hi:
        first = kmin[a]
        b = a + 1
        while b < hi and kmax[b] - first < span:
            b += 1
        out[at, 0] = a
        out[at, 1] = b
        at += 1
        a = b
    return at


@njit(cache=True)
def _normalize(acc: np.ndarray, c0: int, c1: int, limbs: int, nl: int, carry: np.ndarray) -> bool:
    """Propagate carries in cells c0..c1-1 over lanes 0..nl-1; True if a
    value needs more than `limbs` limbs."""
    over = False
    for c in range(c0, c1):
        for j in range(nl):
            carry[j] = 0
        for lb in range(limbs):
            for j in range(nl):
                x = acc[c, lb, j] + carry[j]
                acc[c, lb, j] = x & _MASK
                carry[j] = x >> _SHIFT
        for j in range(nl):
            if carry[j] != 0:
                over = True
    return over


@njit(cache=True)
def _add_node(nodes, i, vc, off, j0, nl, ncell, limbs):  # noqa: ANN001, ANN202
    """nodes[i] lanes off+j += vertex lanes j, for j0 <= j < nl, limbs 0..limbs-1."""
    if nl - j0 == 1:  # one window per event (tumbling): a plain loop over limbs
        for c in range(ncell):
            for lb in range(limbs):
                nodes[i, c, lb, off + j0] += vc[c, lb, j0]
        return
    for c in range(ncell):
        for lb in range(limbs):
            for j in range(j0, nl):
                nodes[i, c, lb, off + j] += vc[c, lb, j]


@njit(cache=True)
def _take_node(acc, nodes, i, off, nl, ncell, limbs):  # noqa: ANN001, ANN202
    """acc lanes j += nodes[i] lanes off+j."""
    if nl == 1:
        for c in range(ncell):
            for lb in range(limbs):
                acc[c, lb, 0] += nodes[i, c, lb, off]
        return
    for c in range(ncell):
        for lb in range(limbs):
            for j in range(nl):
                acc[c, lb, j] += nodes[i, c, lb, off + j]


@njit(cache=True)
def _insert(nodes, used, r, m, point, vc, off, j0, nl, ncell, limbs):  # noqa: ANN001, ANN202
    """Add a vertex with `limbs` significant limbs at local rank r (0-based)
    to the tree (or its bucket); `used` bounds each node's significant limbs."""
    i = r + 1
    if point:
        _add_node(nodes, i, vc, off, j0, nl, ncell, limbs)
        if limbs > used[i]:
            used[i] = limbs
        return
    while i <= m:
        _add_node(nodes, i, vc, off, j0, nl, ncell, limbs)
        if limbs > used[i]:
            used[i] = limbs
        i += i & (-i)


@njit(cache=True)
def _wider_mid(a, limbs):  # noqa: ANN001, ANN202
    """(cells, limbs, lanes) zero-extended to `limbs` limbs."""
    out = np.zeros((a.shape[0], limbs, a.shape[2]), a.dtype)
    out[:, : a.shape[1], :] = a
    return out


@njit(cache=True)
def _wider_last(a, limbs):  # noqa: ANN001, ANN202
    """(rows, cells, limbs) zero-extended to `limbs` limbs."""
    out = np.zeros((a.shape[0], a.shape[1], limbs), a.dtype)
    out[:, :, : a.shape[2]] = a
    return out


@njit(cache=True)
def _wider4(a, limbs):  # noqa: ANN001, ANN202
    """(items, cells, limbs, lanes) zero-extended to `limbs` limbs."""
    out = np.zeros((a.shape[0], a.shape[1], limbs, a.shape[3]), a.dtype)
    out[:, :, : a.shape[2], :] = a
    return out


@njit(cache=True)
def _significant_cell(acc, c, limbs, nl):  # noqa: ANN001, ANN202
    """Limbs of cell c up to its highest nonzero one over the lanes."""
    for lb in range(limbs - 1, -1, -1):
        for j in range(nl):
            if acc[c, lb, j] != 0:
                return lb + 1
    return 1


@njit(cache=True)
def _significant(vc, ncell, limbs, nl):  # noqa: ANN001, ANN202
    """Limbs up to the highest nonzero one over every cell and lane."""
    for lb in range(limbs - 1, -1, -1):
        for c in range(ncell):
            for j in range(nl):
                if vc[c, lb, j] != 0:
                    return lb + 1
    return 1


@njit(cache=True)
def epochs(offsets: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, span: int) -> np.ndarray:
    """Epochs of every partition, as rows of (a, b): events a..b-1."""
    n = kmin.shape[0]
    eps = np.empty((max(n, 1), 2), np.int64)
    at = 0
    for p in range(offsets.shape[0] - 1):
        at = _epochs(kmin, kmax, offsets[p], offsets[p + 1], span, eps, at)
    return eps[:at]


@njit(cache=True, nogil=True)
def run(
    eps: np.ndarray,  # (epochs, 2): event ranges, partition by partition
    ep_part: np.ndarray,  # partition of each epoch
    first_ep: int,  # start here (a partition's first epoch)
    end_ep: int,  # stop before this epoch (a partition's first epoch, or the end)
    kmin: np.ndarray,
    kmax: np.ndarray,
    newt: np.ndarray,  # event starts a new time stamp within its partition
    st: np.ndarray,  # state of each event (its position in the SEQ)
    kneg: np.ndarray,  # first window in which the event may start a trend (a leading NOT's bound)
    start: np.ndarray,  # (states,) bool: a trend starts at this state
    final: np.ndarray,  # (states,) bool: a trend ends at this state
    store_src: np.ndarray,  # (stores,) state whose vertices a store sums
    reads: np.ndarray,  # (states, stores) bool: the stores an event of a state reads
    keyed: int,  # the store indexed by the edge predicate's key (-1: none)
    gr: np.ndarray,  # global rank of the event's key (as a predecessor)
    gq: np.ndarray,  # prefix length (order) or bucket rank (point, -1 = none) of its probe
    point: bool,
    mult: np.ndarray,  # (n, ncell - 1, digits) uint64: own multiplier of cells 1.., in 32-bit digits
    mmval: np.ndarray,  # (n, nm) float64: values of MIN/MAX
    mmax: np.ndarray,  # (nm,) bool: MAX (else MIN)
    ncell: int,
    limbs: int,
    kwidth: int,  # most windows of one event
    rows_cap: int,
) -> tuple:
    """Process epochs first_ep..end_ep-1 in order (releases the GIL, so
    disjoint ranges of partitions run in parallel threads). Returns (rows,
    out_k, out_part, out_c, out_m); `out_c` has as many limbs (plus
    EXTRA_LIMBS) as the largest count needed, `limbs` is where they start.

    States and stores: an event of state s reads the stores of `reads[s]`
    (the keyed one by its probe, the others whole: a running total), starts
    a trend of its own if `start[s]`, and joins every store summing state s;
    the vertices of final states add up to the windows' results."""
    nm = mmval.shape[1]
    nstore = store_src.shape[0]
    lo_limbs = limbs + EXTRA_LIMBS
    out_k = np.empty(rows_cap, np.int64)
    out_part = np.empty(rows_cap, np.int64)
    out_c = np.zeros((rows_cap, ncell, lo_limbs), np.uint64)
    out_m = np.empty((rows_cap, nm), np.float64)
    rows = 0
    acc = np.zeros((ncell, limbs, kwidth), np.uint64)
    carry = np.zeros(kwidth + 1, np.uint64)
    vcap = 64
    vc = np.zeros((vcap, ncell, limbs, kwidth), np.uint64)
    base = 0  # event index of vc[0]
    i0 = 0  # first live event
    cur_part = -1
    kstate = store_src[keyed] if keyed >= 0 else -1
    for x in range(first_ep, end_ep):
        a, b = eps[x, 0], eps[x, 1]
        if ep_part[x] != cur_part:
            cur_part = ep_part[x]
            i0 = a
            base = a
        lo = kmin[a]
        width = kmax[b - 1] - lo + 1
        while kmax[i0] < lo:
            i0 += 1
        # keep the live vertices [i0, a) at the front of the vertex buffer
        need = b - i0
        if need > vcap:
            ncap = 2 * need
            nvc = np.zeros((ncap, ncell, limbs, kwidth), np.uint64)
            for u in range(i0, a):
                nvc[u - i0] = vc[u - base]
            vc, vcap = nvc, ncap
        elif i0 > base:
            for u in range(i0, a):
                vc[u - i0] = vc[u - base]
        base = i0
        # nodes 1..m: the keyed store (a Fenwick tree or buckets over key
        # ranks); node m + 1 + j: the running total of store j otherwise
        if kstate >= 0:
            keys = np.unique(gr[i0:b][st[i0:b] == kstate])
        else:
            keys = np.zeros(0, np.int64)
        m = keys.shape[0]
        nodes = np.zeros((m + 1 + nstore, ncell, limbs, width), np.uint64)
        res = np.zeros((ncell, limbs, width), np.uint64)
        mres = np.empty((nm, width), np.float64)
        for q in range(nm):
            mres[q, :] = -np.inf if mmax[q] else np.inf
        has = np.zeros(width, np.bool_)
        used = np.zeros(m + 1 + nstore, np.int64)
        # rebuild from the live vertices, clipped to this epoch's windows, in
        # O(m) lane blocks: each into its own node, then every node into its
        # Fenwick parent once
        for u in range(i0, a):
            off = kmin[u] - lo
            nl = kmax[u] - kmin[u] + 1
            j0 = -off if off < 0 else 0
            sig = _significant(vc[u - base], ncell, limbs, nl)
            for js in range(nstore):
                if store_src[js] != st[u]:
                    continue
                i = np.searchsorted(keys, gr[u]) + 1 if js == keyed else m + 1 + js
                _add_node(nodes, i, vc[u - base], off, j0, nl, ncell, sig)
                if sig > used[i]:
                    used[i] = sig
        if not point and a > i0:
            for i in range(1, m + 1):
                p = i + (i & (-i))
                if p <= m and used[i] > 0:
                    for c in range(ncell):
                        for lb in range(used[i]):
                            for j in range(width):
                                nodes[p, c, lb, j] += nodes[i, c, lb, j]
                    if used[i] > used[p]:
                        used[p] = used[i]
        e = a
        while e < b:
            g1 = e + 1
            while g1 < b and not newt[g1]:
                g1 += 1
            # every event of this time stamp reads the graph before it ...
            v = e
            while v < g1:
                off = kmin[v] - lo
                nl = kmax[v] - kmin[v] + 1
                s = st[v]
                for c in range(ncell):
                    for lb in range(limbs):
                        for j in range(nl):
                            acc[c, lb, j] = 0
                for js in range(nstore):
                    if not reads[s, js]:
                        continue
                    if js != keyed:
                        i = m + 1 + js
                        _take_node(acc, nodes, i, off, nl, ncell, used[i])
                    elif point:
                        if gq[v] >= 0:
                            idx = np.searchsorted(keys, gq[v])
                            if idx < m and keys[idx] == gq[v]:
                                _take_node(acc, nodes, idx + 1, off, nl, ncell, used[idx + 1])
                    else:
                        i = np.searchsorted(keys, gq[v])  # local keys admitted: global rank < gq
                        while i > 0:
                            _take_node(acc, nodes, i, off, nl, ncell, used[i])
                            i -= i & (-i)
                if start[s]:
                    for j in range(nl):
                        if kmin[v] + j >= kneg[v]:
                            acc[0, 0, j] += 1  # the event starts a trend in each of its windows
                over = _normalize(acc, 0, ncell, limbs, nl, carry)
                if ncell > 1:
                    sig0 = _significant_cell(acc, 0, limbs, nl)
                    for c in range(1, ncell):
                        for d in range(mult.shape[2]):
                            k = mult[v, c - 1, d]
                            if k == 0:
                                continue
                            if sig0 + d > limbs:
                                over = True
                                break
                            # count * digit d of the value, at limb offset d: < 2**64 with the limb
                            for lb in range(sig0):
                                for j in range(nl):
                                    acc[c, lb + d, j] += acc[0, lb, j] * k
                            over = _normalize(acc, c, c + 1, limbs, nl, carry) or over
                if over:  # a count needs more limbs: widen every array by half and redo this event
                    limbs = limbs + limbs // 2 + 1
                    lo_limbs = limbs + EXTRA_LIMBS
                    acc = _wider_mid(acc, limbs)
                    res = _wider_mid(res, limbs)
                    out_c = _wider_last(out_c, lo_limbs)
                    vc = _wider4(vc, limbs)
                    nodes = _wider4(nodes, limbs)
                    continue
                slot = v - base
                for c in range(ncell):
                    for lb in range(limbs):
                        for j in range(nl):
                            vc[slot, c, lb, j] = acc[c, lb, j]
                if final[s]:
                    for c in range(ncell):
                        for lb in range(limbs):
                            for j in range(nl):
                                res[c, lb, off + j] += acc[c, lb, j]
                    for q in range(nm):
                        val = mmval[v, q]
                        for j in range(nl):
                            if (val > mres[q, off + j]) if mmax[q] else (val < mres[q, off + j]):
                                mres[q, off + j] = val
                    for j in range(nl):
                        has[off + j] = True
                v += 1
            # ... then they join it
            for v in range(e, g1):
                off = kmin[v] - lo
                nl = kmax[v] - kmin[v] + 1
                sig = _significant(vc[v - base], ncell, limbs, nl)
                for js in range(nstore):
                    if store_src[js] != st[v]:
                        continue
                    if js == keyed:
                        r = np.searchsorted(keys, gr[v])
                        _insert(nodes, used, r, m, point, vc[v - base], off, 0, nl, ncell, sig)
                    else:
                        i = m + 1 + js
                        _add_node(nodes, i, vc[v - base], off, 0, nl, ncell, sig)
                        if sig > used[i]:
                            used[i] = sig
            e = g1
        for w in range(width):
            if not has[w]:
                continue
            out_k[rows] = lo + w
            out_part[rows] = cur_part
            for c in range(ncell):
                cy = np.uint64(0)
                for lb in range(lo_limbs):
                    x = (res[c, lb, w] if lb < limbs else np.uint64(0)) + cy
                    out_c[rows, c, lb] = x & _MASK
                    cy = x >> _SHIFT
            for q in range(nm):
                out_m[rows, q] = mres[q, w]
            rows += 1
    return rows, out_k, out_part, out_c, out_m


@njit(cache=True)
def normalize_rows(cells: np.ndarray) -> bool:
    """Carries of summed partial rows (rows, cells, limbs), in place; True if
    the top limb overflowed (the caller adds limbs first, so it never does)."""
    over = False
    for r in range(cells.shape[0]):
        for c in range(cells.shape[1]):
            cy = np.uint64(0)
            for lb in range(cells.shape[2]):
                x = cells[r, c, lb] + cy
                cells[r, c, lb] = x & _MASK
                cy = x >> _SHIFT
            if cy != 0:
                over = True
    return over
