"""Numba kernels of the columnar engine: Kleene propagation over arrays.

One call processes a range of *tasks*: a task is one partition's events in
one *block* of `lanes` consecutive windows. The events arrive sorted by
(partition, time) as plain arrays with their state in the SEQ, and nothing
on the path is a Python object. A state reads running totals of the states
before it (no predicate: every earlier vertex is a predecessor) and, when
Kleene with the edge predicate, its own vertices through the index. Per
event, its intermediate aggregates for every window of the block it falls in
(GRETA sections 4 and 6) are one lane each, and:

- **counts are exact** multi-limb integers: `L` limbs of 32 bits held in
  uint64, so sums of up to 2**31 values never carry out of a limb; a value is
  normalized (carries propagated) once per event. When a normalized count
  needs more than `L` limbs, every array is widened in place to 1.5 L + 1
  limbs and the event is computed again (exact big counts, fixed-width
  speed while they are small; nothing already computed is redone);
- **predecessors are combined by index**: a Fenwick tree over the
  ranks of the edge predicate's key answers "sum of the admitted
  predecessors' aggregates" for an order comparison in O(log n) per lane
  block; an equality keeps one bucket per key; no predicate, one bucket;
- **windows are cut into blocks** of `lanes` windows, each block of each
  partition a tree of its own over the events of those windows only (ranks
  local to them). A tree holds `lanes` windows, not every window of its
  events, so it stays small enough for the cache (a tree over all 61
  windows of Q1 with 100-digit counts takes tens of MB per partition and
  every event read and wrote it from memory); an event is visited once per
  block its windows meet, about K / lanes + 1 times for K windows per
  event, with its lanes in that block each time.

With *query lanes* (`union.py`: queries whose patterns differ around one
Kleene part), one traversal carries a lane per (query, window): a block
holds `lanes` windows of each query, query after query, and a vertex
computes the lanes of its state's queries; per (vertex, query) masks zero
the lanes whose query does not have the event there, and per (state,
query) starts and finals say where each query's trends begin and end.

Result rows are summed per (group, window) of a block as the block's
partitions are processed (`groups.py`): the kernel returns one row per (group, window) of
each block it processed (a block split between two threads gives two rows,
which the caller adds).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from greta_stream.engine.columnar.groups import flush as _flush
from greta_stream.engine.columnar.groups import group_sums as _group_sums
from greta_stream.engine.columnar.groups import new_slot as _new_slot
from greta_stream.engine.columnar.groups import rows_of as _rows_of
from greta_stream.engine.columnar.groups import to_group as _to_group
from greta_stream.engine.columnar.groups import to_group_q as _to_group_q
from greta_stream.engine.columnar.limbs import EXTRA_LIMBS, LIMB_BITS, normalize_rows
from greta_stream.engine.columnar.limbs import MASK as _MASK
from greta_stream.engine.columnar.limbs import SHIFT as _SHIFT
from greta_stream.engine.columnar.limbs import add_node as _add_node
from greta_stream.engine.columnar.limbs import grown2 as _grown2
from greta_stream.engine.columnar.limbs import grown3 as _grown3
from greta_stream.engine.columnar.limbs import grown4 as _grown4
from greta_stream.engine.columnar.limbs import normalize as _normalize
from greta_stream.engine.columnar.limbs import significant as _significant
from greta_stream.engine.columnar.limbs import take_node as _take_node
from greta_stream.engine.columnar.limbs import wider4 as _wider4
from greta_stream.engine.columnar.limbs import wider_last as _wider_last
from greta_stream.engine.columnar.limbs import wider_mid as _wider_mid
from greta_stream.engine.columnar.minmax import add_mm as _add_mm
from greta_stream.engine.columnar.minmax import clear_mm as _clear_mm
from greta_stream.engine.columnar.minmax import vertex_mm as _vertex_mm

__all__ = ["EXTRA_LIMBS", "LIMB_BITS", "Events", "Wiring", "normalize_rows", "run"]


@njit(cache=True, inline="always")
def _predecessors(path, s, probe, reads, keyed, keys, point, m, gen, storegen, gread, scanned):  # noqa: ANN001, ANN202
    """Write to `path` the nodes an event of state s reads (the stores of its
    state's predecessors: a running total whole, a generation store when its
    vertices are of the event's generation `gread`, the keyed store by its
    probe); return how many. A scanned store is not read here (`_scan`)."""
    npath = 0
    for js in range(reads.shape[1]):
        if not reads[s, js]:
            continue
        if scanned[js]:
            continue  # read vertex by vertex (`_scan`)
        if js != keyed:
            if gen[js] and storegen[js] != gread:
                continue  # a negated event came since its vertices: none is a predecessor
            path[npath] = m + 1 + js
            npath += 1
        elif point:
            if probe >= 0:
                idx = np.searchsorted(keys, probe)
                if idx < m and keys[idx] == probe:
                    path[npath] = idx + 1
                    npath += 1
        else:
            i = np.searchsorted(keys, probe)  # local keys admitted: global rank < probe
            while i > 0:
                path[npath] = i
                npath += 1
                i -= i & (-i)
    return npath


@njit(cache=True, inline="always")
def _scan(path, npath, v, ev, wiring, js, vert_ev, lo, hi):  # noqa: ANN001, ANN202
    """Append to `path` the vertices (nodes lo..hi-1) of scanned store js that
    every one of its edge predicates admits for event v (by ranks:
    `grs[u, p] < gqs[v, p]` for an order, `==` for an equality, `!=` for `!=`), of v's
    generation when the store is across a middle NOT; return the new length."""
    grs, gqs, pointp, pred_store = ev.grs, ev.gqs, wiring.pointp, wiring.pred_store
    gen = wiring.gen[js]
    gread = ev.gread[v]
    for i in range(lo, hi):
        u = vert_ev[i]
        if gen and ev.gjoin[u] != gread:
            continue
        ok = True
        for q in range(pointp.shape[0]):
            if pred_store[q] != js:
                continue
            if pointp[q] == 1:
                if grs[u, q] != gqs[v, q]:
                    ok = False
                    break
            elif pointp[q] == 2:
                if grs[u, q] == gqs[v, q]:
                    ok = False
                    break
            elif grs[u, q] >= gqs[v, q]:
                ok = False
                break
        if ok:
            path[npath] = i
            npath += 1
    return npath


@njit(cache=True, inline="always")
def _vertex(acc, nodes, used, path, npath, hi, sig, carry, j0, j1, limbs, ndig, own, starts, first_lane,  # noqa: ANN001, ANN202
            masked, per_q, lm, startq):
    """An event's aggregates in lanes j0..j1-1 of `acc` (GRETA's propagation):
    the sum of its predecessors' nodes, plus one trend it starts in every
    lane from `first_lane` on (if `starts`), plus count * its own multiplier
    `own` (in 32-bit digits) in cells 1..; carried, with sig[c] the
    significant limbs of cell c. True if some cell needs more than `limbs`.

    With query lanes (`masked`; lane = query * per_q + window), a lane the
    event is not a vertex of for its query (`lm` false) is zero, and the
    event starts a trend only in its queries' lanes that start at its state
    (`startq[query]`; a union has no leading NOT: `first_lane` is not read)."""
    ncell = acc.shape[0]
    # 1. how many limbs each cell's sum can need: fewer than 2**32 values of
    # `used` limbs carry into one more; cell c adds count * value (ndig digits)
    for c in range(ncell):
        hi[c] = 1
        for r in range(npath):
            if used[path[r], c] > hi[c]:
                hi[c] = used[path[r], c]
    top0 = min(limbs, hi[0] + 1)
    for c in range(ncell):
        hi[c] = min(limbs, (hi[c] if c == 0 else max(hi[c], top0 + ndig[c])) + 1)
        acc[c, : hi[c], j0:j1] = 0
    # 2. sum the predecessors, start a trend, carry the count
    for r in range(npath):
        _take_node(acc, nodes, used, path[r], j0, j1)
    if masked:
        for j in range(j0, j1):
            if not lm[j]:  # not this query's vertex here: it neither counts nor passes counts on
                for c in range(ncell):
                    for lb in range(hi[c]):
                        acc[c, lb, j] = 0
            elif startq[j // per_q]:
                acc[0, 0, j] += 1
    elif starts:
        for j in range(max(j0, first_lane), j1):
            acc[0, 0, j] += 1  # the event starts a trend in each of its windows
    if _normalize(acc, 0, hi[0], j0, j1, carry):
        return True
    sig[0] = _significant(acc, 0, hi[0], j0, j1)
    # 3. the other cells: + count * the event's own multiplier, in 32-bit digits
    n = j1 - j0
    for c in range(1, ncell):
        for d in range(ndig[c]):
            k = own[c - 1, d]
            if k == 0:
                continue
            if sig[0] + d + (1 if k > 1 else 0) >= hi[c]:  # only when hi[c] is all the limbs
                return True
            if n == 1:
                for lb in range(sig[0]):
                    x = acc[0, lb, j0]
                    if k == 1:
                        acc[c, lb + d, j0] += x
                    else:
                        x = x * k
                        acc[c, lb + d, j0] += x & _MASK
                        acc[c, lb + d + 1, j0] += x >> _SHIFT
                continue
            for lb in range(sig[0]):
                dst = acc[c, lb + d, j0:j1]
                src = acc[0, lb, j0:j1]
                if k == 1:  # COUNT(X): the count itself
                    for j in range(n):
                        dst[j] += src[j]
                else:  # the product's halves: limbs never overflow before the one carry pass
                    up = acc[c, lb + d + 1, j0:j1]
                    for j in range(n):
                        x = src[j] * k
                        dst[j] += x & _MASK
                        up[j] += x >> _SHIFT
        if _normalize(acc, c, hi[c], j0, j1, carry):
            return True
        sig[c] = _significant(acc, c, hi[c], j0, j1)
    return False


Events = namedtuple("Events", [
    "kmin", "kmax",  # first and last window of the event
    "newt",  # the event starts a new time stamp within its partition
    "st",  # its state (position in the SEQ)
    "kneg",  # first window in which it may start a trend (a leading NOT's bound)
    "gr",  # global rank of its key (as a predecessor of the edge predicate)
    "gq",  # prefix length (order) or bucket rank (point, -1 = none) of its probe
    "mult",  # (n, ncell - 1, digits) uint64: own multiplier of cells 1.., in 32-bit digits
    "mmval",  # (n, nm) float64: values of MIN/MAX (NaN: the event is not of the field's alias)
    "kend",  # last window in which it may end a trend (a trailing NOT's bound)
    "gjoin",  # its generation as a vertex of a generation store: negated events up to its time
    "gread",  # its generation as a reader of one: negated events before its time
    "grs",  # (n, P) int64: key ranks of every scanned edge predicate
    "gqs",  # (n, P) int64: probes of every scanned edge predicate
    "qfrom",  # (n, nq) int64: with query lanes, the first window each query has the event as a vertex in (2**62: none)
])
# How the states read and feed the stores (`KernelPlan.stores`), and the cells.
Wiring = namedtuple("Wiring", [
    "start", "final",  # (states,) bool: a trend starts / ends at this state
    "store_src",  # (stores,) state whose vertices a store sums
    "reads",  # (states, stores) bool: the stores an event of a state reads
    "keyed",  # the store indexed by the edge predicate's key (-1: none)
    "point",  # the keyed store is by equality (buckets), else by order (a Fenwick tree)
    "ndig",  # (ncell,) digits in use of each cell's multipliers (0 for cell 0)
    "mmax",  # (nm,) bool: MAX (else MIN)
    "gen",  # (stores,) bool: a generation store (across a middle NOT: only vertices after the latest N)
    "scanned",  # (stores,) bool: a store scanned vertex by vertex (its own edge predicates)
    "pointp",  # (P,) int8: how scanned edge predicate p compares (keys.py: 0 order, 1 equality, 2 `!=`)
    "pred_store",  # (P,) int: the store scanned edge predicate p belongs to
    "mmprop",  # MIN/MAX propagate along edges (a SEQ, a negation)
    "nq",  # queries of the traversal (1: one query); lane = query * windows per block + window (`union.py`)
    "masked",  # query lanes in use: per (vertex, query) masks, starts and finals (`qfrom`, `startq`, `finalq`)
    "startq",  # (states, nq) bool: a trend of the query starts at this state
    "finalq",  # (states, nq) bool: a trend of the query ends at this state
    "qlo", "qhi",  # (states,) the queries qlo..qhi-1 hold every query that has the state (a vertex's lane range)
])


@njit(cache=True, nogil=True)
def run(
    task: np.ndarray,  # (tasks, 4): block, partition, event range a..b-1 (see `blocks.tasks`)
    t_lo: int,  # process tasks t_lo..t_hi-1
    t_hi: int,
    k_first: int,  # window of lane 0 of block 0
    lanes: int,  # windows per block
    group_of_part: np.ndarray,  # group id of each partition
    n_groups: int,
    ev: Events,
    wiring: Wiring,
    ncell: int,
    limbs: int,
    max_tree_words: int,  # a tree may not grow past this many words while lanes > 1 (0: no bound)
) -> tuple:
    """Process tasks t_lo..t_hi-1 in order (releases the GIL, so disjoint
    ranges run in parallel threads). Returns (rows, out_k, out_g, out_c,
    out_m), rows -1 when a tree would pass `max_tree_words`: per (block,
    group, window) with a final vertex, the window, the group, the exact
    cells (normalized, `limbs` + EXTRA_LIMBS limbs for the largest count
    met) and MIN/MAX.

    Per task (a partition in a block of windows), per time stamp:
      1. every event of the time stamp computes its aggregates from the
         stores it reads (`_predecessors`, `_vertex`: GRETA's propagation);
      2. a final vertex adds to its group's windows (`_to_group`);
      3. then the events join the stores of their states (`_join`), all
         after every event of the time stamp has read them.
    A block's group sums become rows when the block is done (`_flush`)."""
    nm = ev.mmval.shape[1]
    nstore = wiring.store_src.shape[0]
    lo_limbs = limbs + EXTRA_LIMBS
    kstate = wiring.store_src[wiring.keyed] if wiring.keyed >= 0 else -1
    scanned = wiring.scanned
    any_scan = scanned.any()
    mmprop = wiring.mmprop and nm > 0
    joins = np.zeros(wiring.start.shape[0], np.bool_)  # events of the state join some store
    for js in range(nstore):
        joins[wiring.store_src[js]] = True
    rows = 0
    out_k, out_g, out_c, out_m = _rows_of(256, ncell, lo_limbs, nm)  # result rows
    nq, masked = wiring.nq, wiring.masked
    width = lanes * nq  # lanes of a block: its windows for each query, query after query
    lm = np.ones(width, np.bool_)  # with query lanes: the event is a vertex of the lane's query there
    # one event's lanes, those of its time stamp waiting to join, and the tree (reused from task to task)
    acc = np.zeros((ncell, limbs, width), np.uint64)
    pend = np.zeros((4, ncell, limbs, width), np.uint64)
    pend_sig = np.zeros((4, ncell), np.int64)
    mmw = nm if mmprop else 0  # MIN/MAX lanes carried per vertex
    acc_mm = np.zeros((mmw, width), np.float64)
    pend_mm = np.zeros((4, mmw, width), np.float64)
    carry = np.zeros(width + 1, np.uint64)
    hi = np.zeros(ncell, np.int64)  # per cell: limbs of the event's sum before normalizing
    sig = np.zeros(ncell, np.int64)  # per cell: significant limbs of the event's aggregates
    ncap = 64
    path = np.zeros(ncap + 1 + nstore, np.int64)  # the nodes an event reads
    nodes = np.zeros((ncap, ncell, limbs, width), np.uint64)
    nodes_mm = np.zeros((ncap, mmw, width), np.float64)
    used = np.zeros((ncap, ncell), np.int64)  # per node and cell: limbs in use
    storegen = np.zeros(nstore, np.int64)  # per generation store: the generation of its vertices
    vert_ev = np.zeros(ncap, np.int64)  # a scanned store's node: the event of its vertex
    # per scanned store: its first node, vertices joined, the first one still in a window of the event
    vbase = np.zeros(nstore, np.int64)
    nv = np.zeros((nstore, 2), np.int64)
    # the block's sums per group: slot of each group (-1: none yet)
    slot_of = np.full(max(n_groups, 1), -1, np.int64)
    slot_g, gacc, gmm, ghas = _group_sums(16, ncell, lo_limbs, nm, width)
    nslots = 0
    cur_blk = -1
    for x in range(t_lo, t_hi + 1):
        blk = task[x, 0] if x < t_hi else -1
        if blk != cur_blk and nslots:  # the block is done: its rows
            rows, out_k, out_g, out_c, out_m = _flush(
                k_first + cur_blk * lanes, lanes, nq, nslots, slot_g, gacc, gmm, ghas, rows, out_k, out_g, out_c, out_m)
            for sl in range(nslots):
                slot_of[slot_g[sl]] = -1
            nslots = 0
        if x == t_hi:
            break
        cur_blk = blk
        p, a, b = task[x, 1], task[x, 2], task[x, 3]
        k0 = k_first + blk * lanes
        g = group_of_part[p]
        sl = slot_of[g]
        if sl < 0:
            sl = nslots
            nslots += 1
            slot_of[g] = sl
            slot_g, gacc, gmm, ghas = _new_slot(sl, g, slot_g, gacc, gmm, ghas, wiring.mmax)
        # the tree of this task: nodes 1..m, the keyed store (a Fenwick tree or
        # buckets over the ranks of the keys in this task, or one node per
        # vertex when scanned); node m + 1 + j: the running total of store j
        keys = _task_keys(ev.st, ev.gr, a, b, kstate)
        m = keys.shape[0]
        nn = m + 1 + nstore
        if any_scan:  # then one node per vertex of each scanned store
            nn = _scan_layout(ev.st, a, b, wiring.store_src, scanned, nn, vbase)
        if nn > ncap:
            ncap = max(2 * ncap, nn)
            if lanes > 1 and 0 < max_tree_words < ncap * ncell * limbs * width:
                return -1, out_k, out_g, out_c, out_m  # too big: the caller runs again with fewer lanes
            nodes = np.zeros((ncap, ncell, limbs, width), np.uint64)
            nodes_mm = np.zeros((ncap, mmw, width), np.float64)
            used = np.zeros((ncap, ncell), np.int64)
            path = np.zeros(ncap + 1 + nstore, np.int64)
            vert_ev = np.zeros(ncap, np.int64)
        used[:nn] = 0
        if mmprop:
            _clear_mm(nodes_mm, 0, nn, wiring.mmax)
        storegen[:] = -1
        nv[:] = 0
        e = a
        while e < b:
            g1 = e + 1  # events e..g1-1: one time stamp
            while g1 < b and not ev.newt[g1]:
                g1 += 1
            v = e
            while v < g1:
                s = ev.st[v]
                w0, w1, j0, j1 = _span(ev.kmin[v], ev.kmax[v], k0, lanes, s, wiring)  # its windows, its lanes
                if masked:  # a lane is the vertex's where its query has it in that window
                    for j in range(j0, j1):
                        q = j // lanes
                        w = j - q * lanes
                        lm[j] = w0 <= w < w1 and k0 + w >= ev.qfrom[v, q]
                npath = _predecessors(path, s, ev.gq[v], wiring.reads, wiring.keyed, keys, wiring.point, m,
                                      wiring.gen, storegen, ev.gread[v], scanned)
                if any_scan:
                    for js in range(nstore):
                        if scanned[js] and wiring.reads[s, js]:
                            while nv[js, 1] < nv[js, 0] and ev.kmax[vert_ev[vbase[js] + nv[js, 1]]] < w0 + k0:
                                nv[js, 1] += 1  # a vertex none of whose windows is the event's: never again
                            npath = _scan(path, npath, v, ev, wiring, js, vert_ev, vbase[js] + nv[js, 1],
                                          vbase[js] + nv[js, 0])
                over = _vertex(acc, nodes, used, path, npath, hi, sig, carry, j0, j1, limbs, wiring.ndig,
                               ev.mult[v], wiring.start[s], max(ev.kneg[v] - k0, -1), masked, lanes, lm, wiring.startq[s])
                if over:  # a count needs more limbs: widen every array by half and redo this event
                    limbs = limbs + limbs // 2 + 1
                    lo_limbs = limbs + EXTRA_LIMBS
                    if lanes > 1 and 0 < max_tree_words < ncap * ncell * limbs * width:
                        return -1, out_k, out_g, out_c, out_m
                    acc, pend, nodes = _wider_mid(acc, limbs), _wider4(pend, limbs), _wider4(nodes, limbs)
                    gacc, out_c = _wider4(gacc, lo_limbs), _wider_last(out_c, lo_limbs)
                    continue
                if mmprop:
                    _vertex_mm(acc_mm, nodes_mm, path, npath, acc, sig, j0, j1, ev.mmval[v], wiring.mmax)
                    if masked:
                        _neutral_mm(acc_mm, lm, j0, j1, wiring.mmax)
                if wiring.final[s] and masked:
                    _to_group_q(gacc, gmm, ghas, sl, acc, sig, ev.mmval[v], wiring.mmax, j0, j1, mmprop, acc_mm,
                                lanes, lm, wiring.finalq[s])
                elif wiring.final[s]:
                    je = min(j1, ev.kend[v] - k0 + 1)  # a trailing NOT: the windows it may end trends in
                    if je > j0:
                        _to_group(gacc, gmm, ghas, sl, acc, sig, ev.mmval[v], wiring.mmax, j0, je, mmprop, acc_mm)
                if joins[s]:
                    if g1 - e == 1:  # alone at its time stamp: joins the tree now
                        _join(nodes, used, acc, sig, s, ev.gr[v], j0, j1, wiring, keys, nodes_mm, acc_mm,
                              storegen, ev.gjoin[v], vert_ev, vbase, nv, v, mmprop)
                    else:  # joins after every event of its time stamp has read the tree
                        pend, pend_sig, pend_mm = _defer(pend, pend_sig, pend_mm, v - e, acc, sig, acc_mm, j0, j1)
                v += 1
            if g1 - e > 1:
                _join_deferred(nodes, used, pend, pend_sig, pend_mm, e, g1, k0, lanes, joins, ev, wiring, keys,
                               nodes_mm, storegen, vert_ev, vbase, nv, mmprop)
            e = g1
    return rows, out_k, out_g, out_c, out_m


@njit(cache=True)
def _join_deferred(nodes, used, pend, pend_sig, pend_mm, e, g1, k0, lanes, joins, ev, wiring, keys,  # noqa: ANN001, ANN202
                   nodes_mm, storegen, vert_ev, vbase, nv, mmprop):
    """The deferred vertices of time stamp e..g1-1 join the stores of their states."""
    for v in range(e, g1):
        if joins[ev.st[v]]:
            _, _, j0, j1 = _span(ev.kmin[v], ev.kmax[v], k0, lanes, ev.st[v], wiring)
            _join(nodes, used, pend[v - e], pend_sig[v - e], ev.st[v], ev.gr[v], j0, j1, wiring, keys, nodes_mm,
                  pend_mm[v - e], storegen, ev.gjoin[v], vert_ev, vbase, nv, v, mmprop)


@njit(cache=True)
def _task_keys(st, gr, a, b, kstate):  # noqa: ANN001, ANN202
    """The distinct key ranks of the keyed state's events a..b-1, sorted (none without a keyed store)."""
    if kstate < 0:
        return np.zeros(0, np.int64)
    sel = np.empty(b - a, np.int64)
    ns = 0
    for u in range(a, b):
        if st[u] == kstate:
            sel[ns] = gr[u]
            ns += 1
    return np.unique(sel[:ns])


@njit(cache=True)
def _scan_layout(st, a, b, store_src, scanned, nn, vbase):  # noqa: ANN001, ANN202
    """Nodes for the vertices of each scanned store among events a..b-1, from
    node nn on (`vbase[js]`: its first); returns the nodes in use."""
    for js in range(store_src.shape[0]):
        if not scanned[js]:
            continue
        vbase[js] = nn
        for u in range(a, b):
            if st[u] == store_src[js]:
                nn += 1
    return nn


@njit(cache=True, inline="always")
def _span(kmin, kmax, k0, lanes, s, wiring):  # noqa: ANN001, ANN202
    """(w0, w1, j0, j1): a vertex's windows w0..w1-1 in the block of `lanes`
    windows from k0, and its lanes j0..j1-1 (with query lanes, from its
    state's first query's window w0 to its last query's window w1 - 1)."""
    w0 = max(kmin, k0) - k0
    w1 = min(kmax, k0 + lanes - 1) - k0 + 1
    if not wiring.masked:
        return w0, w1, w0, w1
    return w0, w1, wiring.qlo[s] * lanes + w0, (wiring.qhi[s] - 1) * lanes + w1


@njit(cache=True, inline="always")
def _neutral_mm(acc_mm, lm, j0, j1, mmax):  # noqa: ANN001, ANN202
    """MIN/MAX lanes of queries the event is no vertex of: neutral (nothing to pass on)."""
    for q in range(mmax.shape[0]):
        for j in range(j0, j1):
            if not lm[j]:
                acc_mm[q, j] = -np.inf if mmax[q] else np.inf


@njit(cache=True, inline="always")
def _defer(pend, pend_sig, pend_mm, i, acc, sig, acc_mm, j0, j1):  # noqa: ANN001, ANN202
    """Keep the i-th vertex of a time stamp until every event of it has read the tree."""
    if i >= pend.shape[0]:
        pend, pend_sig = _grown4(pend, 2 * (i + 1)), _grown2(pend_sig, 2 * (i + 1))
        pend_mm = _grown3(pend_mm, 2 * (i + 1))
    pend[i, :, :, j0:j1] = acc[:, :, j0:j1]
    pend_sig[i] = sig
    pend_mm[i, :, j0:j1] = acc_mm[:, j0:j1]
    return pend, pend_sig, pend_mm


@njit(cache=True)
def _join(nodes, used, val, sig, s, grv, j0, j1, wiring, keys, nodes_mm, val_mm, storegen, gjoin, vert_ev, vbase,  # noqa: ANN001, ANN202
          nv, v, mmprop):
    """A vertex of state s (lanes j0..j1-1 of `val`, sig[c] limbs per cell) joins the stores of its state."""
    m = keys.shape[0]
    store_src, keyed = wiring.store_src, wiring.keyed
    for js in range(store_src.shape[0]):
        if store_src[js] != s:
            continue
        if wiring.scanned[js]:  # a node of its own, in join order
            i = vbase[js] + nv[js, 0]
            vert_ev[i] = v
            nv[js, 0] += 1
            _add_node(nodes, used, i, val, j0, j1, sig)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax)
            continue
        if js != keyed:
            i = m + 1 + js
            if wiring.gen[js] and gjoin != storegen[js]:  # a negated event came: the store starts again
                storegen[js] = gjoin
                used[i, :] = 0
                if mmprop:
                    _clear_mm(nodes_mm, i, i + 1, wiring.mmax)
            _add_node(nodes, used, i, val, j0, j1, sig)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax)
            continue
        i = np.searchsorted(keys, grv) + 1
        if wiring.point:
            _add_node(nodes, used, i, val, j0, j1, sig)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax)
            continue
        while i <= m:
            _add_node(nodes, used, i, val, j0, j1, sig)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax)
            i += i & (-i)
