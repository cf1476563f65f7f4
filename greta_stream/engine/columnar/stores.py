"""How the vertices of the columnar kernel (`kernel.run`) join the stores of
their states: a task's tree (`task_keys`, `scan_layout`), a vertex joining
(`join`), or waiting for the other events of its time stamp (`defer`,
`join_deferred`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from greta_stream.engine.columnar.limbs import add_node as _add_node
from greta_stream.engine.columnar.limbs import grown2 as _grown2
from greta_stream.engine.columnar.limbs import grown3 as _grown3
from greta_stream.engine.columnar.limbs import grown4 as _grown4
from greta_stream.engine.columnar.minmax import add_mm as _add_mm
from greta_stream.engine.columnar.minmax import clear_mm as _clear_mm
from greta_stream.engine.columnar.propagate import span as _span


@njit(cache=True)
def join_deferred(nodes, used, pend, pend_sig, pend_mm, e, g1, k0, lanes, joins, ev, wiring, keys,  # noqa: ANN001, ANN202
                   nodes_mm, storegen, vert_ev, vbase, nv, mmprop):
    """The deferred vertices of time stamp e..g1-1 join the stores of their states."""
    for v in range(e, g1):
        if joins[ev.st[v]]:
            _, _, j0, j1 = _span(ev.kmin[v], ev.kmax[v], k0, lanes, ev.st[v], wiring)
            join(nodes, used, pend[v - e], pend_sig[v - e], ev.st[v], ev.gr[v], j0, j1, wiring, keys, nodes_mm,
                  pend_mm[v - e], storegen, ev.gjoin[v], vert_ev, vbase, nv, v, mmprop, lanes)


@njit(cache=True)
def task_keys(st, gr, a, b, kstate):  # noqa: ANN001, ANN202
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
def scan_layout(st, a, b, store_src, scanned, nn, vbase, pieces):  # noqa: ANN001, ANN202
    """Nodes for the vertices of each scanned store among events a..b-1, from
    node nn on (`vbase[js]`: its first), `pieces` per vertex (with iteration
    lanes, one per iteration count it joins as); returns the nodes in use."""
    for js in range(store_src.shape[0]):
        if not scanned[js]:
            continue
        vbase[js] = nn
        for u in range(a, b):
            if st[u] == store_src[js]:
                nn += pieces
    return nn



@njit(cache=True, inline="always")
def defer(pend, pend_sig, pend_mm, i, acc, sig, acc_mm, j0, j1):  # noqa: ANN001, ANN202
    """Keep the i-th vertex of a time stamp until every event of it has read the tree."""
    if i >= pend.shape[0]:
        pend, pend_sig = _grown4(pend, 2 * (i + 1)), _grown2(pend_sig, 2 * (i + 1))
        pend_mm = _grown3(pend_mm, 2 * (i + 1))
    pend[i, :, :, j0:j1] = acc[:, :, j0:j1]
    pend_sig[i] = sig
    pend_mm[i, :, j0:j1] = acc_mm[:, j0:j1]
    return pend, pend_sig, pend_mm


@njit(cache=True)
def join(nodes, used, val, sig, s, grv, j0, j1, wiring, keys, nodes_mm, val_mm, storegen, gjoin, vert_ev, vbase,  # noqa: ANN001, ANN202
          nv, v, mmprop, per_q):
    """A vertex of state s (lanes j0..j1-1 of `val`, sig[c] limbs per cell) joins the stores of its state.

    With iteration lanes (`wiring.iterate`; `per_q` lanes per iteration count), its lanes of
    iteration q go to the nodes' lanes of iteration q + 1 (what a successor extends): the last
    iteration's nowhere (`X{n,m}`: no trend goes on), or to themselves (`X{n,}`: n or more). Only the
    counted state's vertices move up, and only into the stores `wiring.lift` marks 1 (in a SEQ the other
    states keep their lanes; a counted group moves up at its loop's step); a store marked 2 (what the
    states after a counted part read) takes every iteration count n.. in lane 0 (`iterations.py`)."""
    if not wiring.iterate or not wiring.counted[s]:
        _join(nodes, used, val, sig, s, grv, j0, j1, wiring, keys, nodes_mm, val_mm, storegen, gjoin, vert_ev,
              vbase, nv, v, mmprop, 0, 0, True)
        return
    if _lifted(wiring, s, 0):  # the stores it joins as it is (a group's own loop of B+)
        _join(nodes, used, val, sig, s, grv, j0, j1, wiring, keys, nodes_mm, val_mm, storegen, gjoin, vert_ev,
              vbase, nv, v, mmprop, 0, 0, True)
    last = wiring.ctop[s] * per_q  # the last iteration's first lane
    if j0 < min(j1, last):  # every iteration but the last, one up (a scanned store: a node for each piece)
        _join(nodes, used, val, sig, s, grv, j0, min(j1, last), wiring, keys, nodes_mm, val_mm, storegen, gjoin,
              vert_ev, vbase, nv, v, mmprop, per_q, 1, True)
    if wiring.counted[s] == 2 and max(j0, last) < j1:
        _join(nodes, used, val, sig, s, grv, max(j0, last), j1, wiring, keys, nodes_mm, val_mm, storegen, gjoin,
              vert_ev, vbase, nv, v, mmprop, 0, 1, True)
    if not _lifted(wiring, s, 2):
        return
    fresh = True
    for q in range(max(wiring.clo[s] - 1, 0), wiring.ctop[s] + 1):  # lane q: q + 1 iterations, to lane 0
        a, b = max(j0, q * per_q), min(j1, (q + 1) * per_q)
        if a < b:
            _join(nodes, used, val, sig, s, grv, a, b, wiring, keys, nodes_mm, val_mm, storegen, gjoin, vert_ev,
                  vbase, nv, v, mmprop, -q * per_q, 2, fresh)
            fresh = False


@njit(cache=True, inline="always")
def _lifted(wiring, s, lift):  # noqa: ANN001, ANN202
    """Some store of state s is marked `lift` (`wiring.lift`)."""
    for js in range(wiring.store_src.shape[0]):  # noqa: SIM110 (numba: no generator in any())
        if wiring.store_src[js] == s and wiring.lift[js] == lift:
            return True
    return False


@njit(cache=True, inline="always")
def _join(nodes, used, val, sig, s, grv, j0, j1, wiring, keys, nodes_mm, val_mm, storegen, gjoin, vert_ev, vbase,  # noqa: ANN001, ANN202
          nv, v, mmprop, shift, lift, fresh):
    """`join`'s lanes j0..j1-1 of `val` into the nodes' lanes from j0 + shift, of the stores of s that
    `wiring.lift` marks `lift`; a scanned store's vertex takes a node of its own when `fresh`, else adds
    to the one it took last."""
    m = keys.shape[0]
    store_src, keyed = wiring.store_src, wiring.keyed
    for js in range(store_src.shape[0]):
        if store_src[js] != s or wiring.lift[js] != lift:
            continue
        if wiring.scanned[js]:  # a node of its own, in join order
            if fresh:
                i = vbase[js] + nv[js, 0]
                vert_ev[i] = v
                nv[js, 0] += 1
            else:
                i = vbase[js] + nv[js, 0] - 1
            _add_node(nodes, used, i, val, j0, j1, sig, shift)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax, shift)
            continue
        if js != keyed:
            i = m + 1 + js
            if wiring.gen[js] and gjoin != storegen[js]:  # a negated event came: the store starts again
                storegen[js] = gjoin
                used[i, :] = 0
                if mmprop:
                    _clear_mm(nodes_mm, i, i + 1, wiring.mmax)
            _add_node(nodes, used, i, val, j0, j1, sig, shift)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax, shift)
            continue
        i = np.searchsorted(keys, grv) + 1
        if wiring.point:
            _add_node(nodes, used, i, val, j0, j1, sig, shift)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax, shift)
            continue
        while i <= m:
            _add_node(nodes, used, i, val, j0, j1, sig, shift)
            if mmprop:
                _add_mm(nodes_mm, i, val_mm, j0, j1, wiring.mmax, shift)
            i += i & (-i)
