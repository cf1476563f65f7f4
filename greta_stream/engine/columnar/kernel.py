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
from greta_stream.engine.columnar.limbs import wider4 as _wider4
from greta_stream.engine.columnar.limbs import wider_last as _wider_last
from greta_stream.engine.columnar.limbs import wider_mid as _wider_mid
from greta_stream.engine.columnar.minmax import clear_mm as _clear_mm
from greta_stream.engine.columnar.minmax import vertex_mm as _vertex_mm
from greta_stream.engine.columnar.propagate import ANY_MATCH, CONTIGUOUS, NEXT_MATCH
from greta_stream.engine.columnar.propagate import neutral_mm as _neutral_mm
from greta_stream.engine.columnar.propagate import predecessors as _predecessors
from greta_stream.engine.columnar.propagate import scan as _scan
from greta_stream.engine.columnar.propagate import span as _span
from greta_stream.engine.columnar.propagate import vertex as _vertex
from greta_stream.engine.columnar.stores import defer as _defer
from greta_stream.engine.columnar.stores import join as _join
from greta_stream.engine.columnar.stores import join_deferred as _join_deferred
from greta_stream.engine.columnar.stores import scan_layout as _scan_layout
from greta_stream.engine.columnar.stores import task_keys as _task_keys

__all__ = ["ANY_MATCH", "CONTIGUOUS", "EXTRA_LIMBS", "NEXT_MATCH", "LIMB_BITS", "Events", "Wiring", "normalize_rows", "run"]


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
    "flo",  # contiguous: the first vertex a predecessor may be (of the partition's previous time stamp among every
    # event of the pattern's types; -1: the previous time stamp of the vertices themselves)
    "pv",  # (n, parts) float64: the parts of the scanned pair comparisons (`pairs.Programs.values`)
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
    "pointp",  # (P,) int8: how scanned edge predicate p compares (keys.py: 0 order, 1 equality, 2 `!=`, 3 a pair program)
    "pred_store",  # (P,) int: the store scanned edge predicate p belongs to
    "pred_conj", "pred_clause",  # (P,) int: p's conjunct and clause in its store (`Scan.where`): contiguous
    "mmprop",  # MIN/MAX propagate along edges (a SEQ, a negation)
    "nq",  # queries of the traversal (1: one query); lane = query * windows per block + window (`union.py`)
    "masked",  # query lanes in use: per (vertex, query) masks, starts and finals (`qfrom`, `startq`, `finalq`)
    "startq",  # (states, nq) bool: a trend of the query starts at this state
    "finalq",  # (states, nq) bool: a trend of the query ends at this state
    "qlo", "qhi",  # (states,) the queries qlo..qhi-1 hold every query that has the state (a vertex's lane range)
    "strategy",  # SEMANTICS section 8: ANY_MATCH, NEXT_MATCH (taken marks) or CONTIGUOUS (`ev.flo`)
    "iterate",  # the nq lanes are iteration counts of `X{n,m}` (1; 2: the last is n or more), not queries (0);
    # so many pieces of a vertex join its stores (`stores.join`)
    "counted",  # (states,) int8: the vertices join some stores a lane up (`iterations.py`): 1, 2 open (`X{n,}`)
    "ctop",  # (states,) int: a counted state's last lane (its last iteration's: X{n,m}'s goes no further)
    "clo",  # (states,) int: a counted state's least number of iterations (n of `X{n,m}`)
    "lift",  # (stores,) int8: how a counted state joins it: 0 as is, 1 an iteration up, 2 counts n.. in lane 0
    "steps", "steps_at",  # the pair comparisons' programs: scanned predicate p's are steps[steps_at[p]:steps_at[p+1]]
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
         stores it reads (`propagate.predecessors`, `propagate.scan`,
         `propagate.vertex`: GRETA's propagation);
      2. a final vertex adds to its group's windows (`groups.to_group`);
      3. then the events join the stores of their states (`stores.join`), all
         after every event of the time stamp has read them.
    A block's group sums become rows when the block is done (`_flush`);
    a task's events are `_task`'s."""
    nm = ev.mmval.shape[1]
    nstore = wiring.store_src.shape[0]
    lo_limbs = limbs + EXTRA_LIMBS
    mmw = nm if wiring.mmprop and nm > 0 else 0  # MIN/MAX lanes carried per vertex
    width = lanes * wiring.nq  # lanes of a block: its windows for each query, query after query
    out = _rows_of(256, ncell, lo_limbs, nm)  # result rows
    tree = _tree_arrays(64, nstore, ncell, limbs, width, mmw)
    return _tasks(task, t_lo, t_hi, k_first, lanes, group_of_part, ev, wiring, max_tree_words, out,
                  _event_arrays(ncell, limbs, width, mmw), tree, _store_arrays(nstore),
                  _block_sums(n_groups, ncell, lo_limbs, nm, width))


@njit(cache=True, inline="always")
def _joining(wiring):  # noqa: ANN001, ANN202
    """Per state: its events join some store."""
    joins = np.zeros(wiring.start.shape[0], np.bool_)
    for js in range(wiring.store_src.shape[0]):
        joins[wiring.store_src[js]] = True
    return joins


@njit(cache=True, inline="always")
def _paired(wiring):  # noqa: ANN001, ANN202
    """Per store: some scanned predicate of it is a pair comparison (`pairs.py`)."""
    paired = np.zeros(wiring.store_src.shape[0], np.bool_)
    for q in range(wiring.pointp.shape[0]):
        if wiring.pointp[q] == 3:
            paired[wiring.pred_store[q]] = True
    return paired


@njit(cache=True, inline="always")
def _event_arrays(ncell, limbs, width, mmw):  # noqa: ANN001, ANN202
    """One event's lanes and those of its time stamp waiting to join (reused from task to task):
    lm, acc, pend, pend_sig, acc_mm, pend_mm, carry, hi, sig."""
    lm = np.ones(width, np.bool_)  # with query lanes: the event is a vertex of the lane's query there
    acc = np.zeros((ncell, limbs, width), np.uint64)
    pend = np.zeros((4, ncell, limbs, width), np.uint64)
    pend_sig = np.zeros((4, ncell), np.int64)
    acc_mm = np.zeros((mmw, width), np.float64)
    pend_mm = np.zeros((4, mmw, width), np.float64)
    carry = np.zeros(width + 1, np.uint64)
    hi = np.zeros(ncell, np.int64)  # per cell: limbs of the event's sum before normalizing
    sig = np.zeros(ncell, np.int64)  # per cell: significant limbs of the event's aggregates
    return lm, acc, pend, pend_sig, acc_mm, pend_mm, carry, hi, sig


@njit(cache=True, inline="always")
def _tree_arrays(ncap, nstore, ncell, limbs, width, mmw):  # noqa: ANN001, ANN202
    """A task's tree for `ncap` nodes (reused from task to task): path, nodes, nodes_mm, used, vert_ev,
    taken, nxt."""
    path = np.zeros(ncap + 1 + nstore, np.int64)  # the nodes an event reads
    nodes = np.zeros((ncap, ncell, limbs, width), np.uint64)
    nodes_mm = np.zeros((ncap, mmw, width), np.float64)
    used = np.zeros((ncap, ncell + 1), np.int64)  # per node and cell: limbs in use; last: lanes written below
    vert_ev = np.zeros(ncap, np.int64)  # a scanned store's node: the event of its vertex
    taken = np.zeros(ncap, np.int64)  # skip-till-next-match: the time stamp (first event) that took the vertex
    nxt = np.zeros(ncap, np.int64)  # skip-till-next-match: the next vertex of its store still waiting
    return path, nodes, nodes_mm, used, vert_ev, taken, nxt


@njit(cache=True, inline="always")
def _store_arrays(nstore):  # noqa: ANN001, ANN202
    """storegen: per generation store, the generation of its vertices; per
    scanned store, vbase: its first node, nv: vertices joined, the first one
    still in a window of the event, the first one still waiting for its next
    event (skip-till-next-match)."""
    return np.zeros(nstore, np.int64), np.zeros(nstore, np.int64), np.zeros((nstore, 3), np.int64)


@njit(cache=True, inline="always")
def _layout(st, gr, a, b, kstate, store_src, scanned, any_scan, vbase, pieces):  # noqa: ANN001, ANN202
    """The tree of the task of events a..b-1: (keys, nodes in use). Nodes
    1..m: the keyed store (a Fenwick tree or buckets over the ranks of the m
    keys in this task); node m + 1 + j: the running total of store j; then,
    with scanned stores, one node per vertex of each (from `vbase[j]`)."""
    keys = _task_keys(st, gr, a, b, kstate)
    nn = keys.shape[0] + 1 + store_src.shape[0]
    if any_scan:
        nn = _scan_layout(st, a, b, store_src, scanned, nn, vbase, pieces)
    return keys, nn


@njit(cache=True, inline="always")
def _widened(limbs, acc, pend, nodes, gacc, out_c):  # noqa: ANN001, ANN202
    """The arrays of counts widened to `limbs` limbs (the sums and rows to `limbs` + EXTRA_LIMBS)."""
    lo_limbs = limbs + EXTRA_LIMBS
    return (_wider_mid(acc, limbs), _wider4(pend, limbs), _wider4(nodes, limbs), _wider4(gacc, lo_limbs),
            _wider_last(out_c, lo_limbs))


@njit(cache=True, inline="always")
def _clear_tree(used, nodes_mm, nn, storegen, nv, mmprop, mmax, taken, nxt, vbase, strategy):  # noqa: ANN001, ANN202
    """Nodes 0..nn-1 empty, before a task (none taken, each waiting list in node order)."""
    used[:nn] = 0
    if mmprop:
        _clear_mm(nodes_mm, 0, nn, mmax)
    storegen[:] = -1
    nv[:] = 0
    nv[:, 2] = vbase
    if strategy == NEXT_MATCH:
        for i in range(nn):
            taken[i] = -1
            nxt[i] = i + 1


@njit(cache=True, inline="always")
def _block_sums(n_groups, ncell, lo_limbs, nm, width):  # noqa: ANN001, ANN202
    """A block's sums per group: slot_of (the slot of each group, -1: none yet) and the slots (`groups.group_sums`)."""
    slot_of = np.full(max(n_groups, 1), -1, np.int64)
    slot_g, gacc, gmm, ghas = _group_sums(16, ncell, lo_limbs, nm, width)
    return slot_of, slot_g, gacc, gmm, ghas


@njit(cache=True, inline="always")
def _free_slots(slot_of, slot_g, nslots):  # noqa: ANN001, ANN202
    """A block is done: no group has a slot (returns the slots in use: none)."""
    for sl in range(nslots):
        slot_of[slot_g[sl]] = -1
    return 0


@njit(cache=True, inline="always")
def _slot(slot_of, g, nslots, slot_g, gacc, gmm, ghas, mmax):  # noqa: ANN001, ANN202
    """Group g's slot of the block's sums, a new one when it has none yet."""
    sl = slot_of[g]
    if sl < 0:
        sl = nslots
        nslots += 1
        slot_of[g] = sl
        slot_g, gacc, gmm, ghas = _new_slot(sl, g, slot_g, gacc, gmm, ghas, mmax)
    return sl, nslots, slot_g, gacc, gmm, ghas


@njit(cache=True, inline="always")
def _stamp_end(newt, e, b):  # noqa: ANN001, ANN202
    """End of the time stamp of event e (events e..end-1, before b)."""
    g1 = e + 1
    while g1 < b and not newt[g1]:
        g1 += 1
    return g1


@njit(cache=True, inline="always")
def _tasks(task, t_lo, t_hi, k_first, lanes, group_of_part, ev, wiring, max_tree_words, out, bufs, tree, stores,  # noqa: ANN001, ANN202
           sums):
    """`run`'s tasks t_lo..t_hi-1 over its arrays (`out`: `_rows_of`, `bufs`:
    `_event_arrays`, `tree`: `_tree_arrays`, `stores`: `_store_arrays`, `sums`:
    `_block_sums`). One body from task to event: a helper call per task or
    event would copy `ev` and `wiring` (their arrays' references) each time."""
    out_k, out_g, out_c, out_m = out
    lm, acc, pend, pend_sig, acc_mm, pend_mm, carry, hi, sig = bufs
    path, nodes, nodes_mm, used, vert_ev, taken, nxt = tree
    storegen, vbase, nv = stores
    slot_of, slot_g, gacc, gmm, ghas = sums
    ncell, limbs, width = acc.shape
    ncap, nstore, mmprop = nodes.shape[0], storegen.shape[0], acc_mm.shape[0] > 0
    kstate = wiring.store_src[wiring.keyed] if wiring.keyed >= 0 else -1
    any_scan = wiring.scanned.any()
    joins = _joining(wiring)  # events of the state join some store
    paired = _paired(wiring)  # a scanned store with pair comparisons
    unjudged = np.zeros((0, 0), np.int8)  # what `_scan` judges of a store without pair comparisons: nothing
    rows, nslots, cur_blk = 0, 0, -1
    for x in range(t_lo, t_hi + 1):
        blk = task[x, 0] if x < t_hi else -1
        if blk != cur_blk and nslots:  # the block is done: its rows
            rows, out_k, out_g, out_c, out_m = _flush(k_first + cur_blk * lanes, lanes, wiring.nq, nslots, slot_g,
                                                      gacc, gmm, ghas, rows, out_k, out_g, out_c, out_m)
            nslots = _free_slots(slot_of, slot_g, nslots)
        if x == t_hi:
            break
        cur_blk = blk
        p, a, b = task[x, 1], task[x, 2], task[x, 3]
        k0 = k_first + blk * lanes
        sl = slot_of[group_of_part[p]]
        if sl < 0:
            sl, nslots, slot_g, gacc, gmm, ghas = _slot(slot_of, group_of_part[p], nslots, slot_g, gacc, gmm, ghas,
                                                        wiring.mmax)
        keys, nn = _layout(ev.st, ev.gr, a, b, kstate, wiring.store_src, wiring.scanned, any_scan, vbase,
                           wiring.iterate if wiring.iterate else 1)
        if nn > ncap:
            ncap = max(2 * ncap, nn)
            if lanes > 1 and 0 < max_tree_words < ncap * ncell * limbs * width:
                return -1, out_k, out_g, out_c, out_m  # too big: the caller runs again with fewer lanes
            path, nodes, nodes_mm, used, vert_ev, taken, nxt = _tree_arrays(ncap, nstore, ncell, limbs, width,
                                                                             acc_mm.shape[0])
        _clear_tree(used, nodes_mm, nn, storegen, nv, mmprop, wiring.mmax, taken, nxt, vbase, wiring.strategy)
        e = prev = a  # prev: the first event of the time stamp before e's (contiguous)
        while e < b:
            g1 = _stamp_end(ev.newt, e, b)  # events e..g1-1: one time stamp
            v = e
            while v < g1:
                s = ev.st[v]
                w0, w1, j0, j1 = _span(ev.kmin[v], ev.kmax[v], k0, lanes, s, wiring)  # its windows, its lanes
                if wiring.masked:  # a lane is the vertex's where its query has it in that window
                    for j in range(j0, j1):
                        q = j // lanes
                        w = j - q * lanes
                        lm[j] = w0 <= w < w1 and (wiring.iterate > 0 or k0 + w >= ev.qfrom[v, q])
                npath = _predecessors(path, s, ev.gq[v], wiring.reads, wiring.keyed, keys, wiring.point, keys.shape[0],
                                      wiring.gen, storegen, ev.gread[v], wiring.scanned)
                for js in range(nstore if any_scan else 0):
                    if wiring.scanned[js] and wiring.reads[s, js]:
                        while nv[js, 1] < nv[js, 0] and ev.kmax[vert_ev[vbase[js] + nv[js, 1]]] < w0 + k0:
                            nv[js, 1] += 1  # a vertex none of whose windows is the event's: never again
                        if paired[js]:
                            npath = _scan(path, npath, v, e, prev, ev, wiring, js, vert_ev, vbase[js] + nv[js, 1],
                                          vbase[js] + nv[js, 0], taken, nxt, nv, unjudged, True)
                        else:
                            npath = _scan(path, npath, v, e, prev, ev, wiring, js, vert_ev, vbase[js] + nv[js, 1],
                                          vbase[js] + nv[js, 0], taken, nxt, nv, unjudged, False)
                over = _vertex(acc, nodes, used, path, npath, hi, sig, carry, j0, j1, limbs, wiring.ndig, ev.mult[v],
                               wiring.start[s], max(ev.kneg[v] - k0, -1), wiring.masked, lanes, lm, wiring.startq[s])
                if over:  # a count needs more limbs: widen every array by half and redo this event
                    limbs = limbs + limbs // 2 + 1
                    if lanes > 1 and 0 < max_tree_words < ncap * ncell * limbs * width:
                        return -1, out_k, out_g, out_c, out_m
                    acc, pend, nodes, gacc, out_c = _widened(limbs, acc, pend, nodes, gacc, out_c)
                    continue
                if mmprop:
                    _vertex_mm(acc_mm, nodes_mm, path, npath, acc, sig, j0, j1, ev.mmval[v], wiring.mmax)
                    if wiring.masked:
                        _neutral_mm(acc_mm, lm, j0, j1, wiring.mmax)
                if wiring.final[s] and wiring.masked:
                    _to_group_q(gacc, gmm, ghas, sl, acc, sig, ev.mmval[v], wiring.mmax, j0, j1, mmprop, acc_mm,
                                lanes, lm, wiring.finalq[s], min(ev.kend[v] - k0 + 1, lanes))
                elif wiring.final[s]:
                    je = min(j1, ev.kend[v] - k0 + 1)  # a trailing NOT: the windows it may end trends in
                    if je > j0:
                        _to_group(gacc, gmm, ghas, sl, acc, sig, ev.mmval[v], wiring.mmax, j0, je, mmprop, acc_mm)
                if joins[s] and g1 - e == 1:  # alone at its time stamp: joins the tree now
                    _join(nodes, used, acc, sig, s, ev.gr[v], j0, j1, wiring, keys, nodes_mm, acc_mm,
                          storegen, ev.gjoin[v], vert_ev, vbase, nv, v, mmprop, lanes)
                elif joins[s]:  # joins after every event of its time stamp has read the tree
                    pend, pend_sig, pend_mm = _defer(pend, pend_sig, pend_mm, v - e, acc, sig, acc_mm, j0, j1)
                v += 1
            if g1 - e > 1:
                _join_deferred(nodes, used, pend, pend_sig, pend_mm, e, g1, k0, lanes, joins, ev, wiring, keys,
                               nodes_mm, storegen, vert_ev, vbase, nv, mmprop)
            prev, e = e, g1
    return rows, out_k, out_g, out_c, out_m
