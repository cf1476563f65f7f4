"""Per-group sums of a block of windows: where the kernel's final vertices add their aggregates.

A block (`kernel.py`) keeps one *slot* per group it has met: the group, its
exact cells per lane (multi-limb counts, not yet normalized), its MIN/MAX per
lane and whether a lane has a trend. A final vertex adds its lanes to its
group's slot; when the block's partitions are done, `flush` normalizes the
slots into result rows (window, group, cells, MIN/MAX). With query lanes a
row's group is group * queries + query.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from greta_stream.engine.columnar.limbs import MASK as _MASK
from greta_stream.engine.columnar.limbs import SHIFT as _SHIFT
from greta_stream.engine.columnar.limbs import grown1 as _grown1
from greta_stream.engine.columnar.limbs import grown2 as _grown2
from greta_stream.engine.columnar.limbs import grown3 as _grown3
from greta_stream.engine.columnar.limbs import grown4 as _grown4

__all__ = ["flush", "group_sums", "new_slot", "rows_of", "to_group", "to_group_q"]


@njit(cache=True)
def rows_of(cap, ncell, limbs, nm):  # noqa: ANN001, ANN202
    """Empty result rows: window, group, exact cells, MIN/MAX."""
    return (np.empty(cap, np.int64), np.empty(cap, np.int64), np.zeros((cap, ncell, limbs), np.uint64),
            np.empty((cap, nm), np.float64))


@njit(cache=True)
def group_sums(cap, ncell, limbs, nm, lanes):  # noqa: ANN001, ANN202
    """A block's sums per group slot: its group, exact cells, MIN/MAX and whether a lane has a trend."""
    return (np.empty(cap, np.int64), np.zeros((cap, ncell, limbs, lanes), np.uint64),
            np.empty((cap, nm, lanes), np.float64), np.zeros((cap, lanes), np.bool_))


@njit(cache=True)
def new_slot(sl, g, slot_g, gacc, gmm, ghas, mmax):  # noqa: ANN001, ANN202
    """Slot `sl` of the block's group sums, empty, for group g (the arrays grown when full)."""
    if sl == slot_g.shape[0]:
        cap = 2 * sl
        slot_g, gacc, gmm, ghas = _grown1(slot_g, cap), _grown4(gacc, cap), _grown3(gmm, cap), _grown2(ghas, cap)
    slot_g[sl] = g
    gacc[sl] = 0
    ghas[sl] = False
    for q in range(mmax.shape[0]):
        gmm[sl, q, :] = -np.inf if mmax[q] else np.inf
    return slot_g, gacc, gmm, ghas


@njit(cache=True, inline="always")
def to_group(gacc, gmm, ghas, sl, acc, sig, mmval, mmax, j0, j1, mmprop, acc_mm):  # noqa: ANN001, ANN202
    """A final vertex's aggregates (lanes j0..j1-1) added to its group's
    windows of the block; MIN/MAX its own value (`X+`: every event ends a
    trend in each of its windows) or, propagated, those of its trends."""
    if j1 - j0 == 1:
        for c in range(acc.shape[0]):
            for lb in range(sig[c]):
                gacc[sl, c, lb, j0] += acc[c, lb, j0]
    else:
        for c in range(acc.shape[0]):
            for lb in range(sig[c]):
                dst = gacc[sl, c, lb, j0:j1]
                src = acc[c, lb, j0:j1]
                for j in range(j1 - j0):
                    dst[j] += src[j]
    for q in range(mmax.shape[0]):
        for j in range(j0, j1):
            val = acc_mm[q, j] if mmprop else mmval[q]
            if (val > gmm[sl, q, j]) if mmax[q] else (val < gmm[sl, q, j]):
                gmm[sl, q, j] = val
    for j in range(j0, j1):
        ghas[sl, j] = True


@njit(cache=True)
def to_group_q(gacc, gmm, ghas, sl, acc, sig, mmval, mmax, j0, j1, mmprop, acc_mm, per_q, lm, finalq, wend):  # noqa: ANN001, ANN202
    """`_to_group` with query lanes: only the lanes of queries whose trends end
    at the vertex's state (`finalq`), where it is their vertex (`lm`), in windows before `wend`
    (a trailing NOT's: the first whose end passes its next match)."""
    for j in range(j0, j1):
        if not lm[j] or not finalq[j // per_q] or j % per_q >= wend:
            continue
        for c in range(acc.shape[0]):
            for lb in range(sig[c]):
                gacc[sl, c, lb, j] += acc[c, lb, j]
        for q in range(mmax.shape[0]):
            val = acc_mm[q, j] if mmprop else mmval[q]
            if (val > gmm[sl, q, j]) if mmax[q] else (val < gmm[sl, q, j]):
                gmm[sl, q, j] = val
        ghas[sl, j] = True


@njit(cache=True)
def flush(k0, lanes, nq, nslots, slot_g, gacc, gmm, ghas, rows, out_k, out_g, out_c, out_m):  # noqa: ANN001, ANN202
    """Append the rows of a block's group sums (normalized) to the outputs
    (`lanes` windows of each of `nq` queries; the group of a row is group * nq + query)."""
    nm = gmm.shape[1]
    cap = out_k.shape[0]
    for sl in range(nslots):
        for j in range(lanes * nq):
            if not ghas[sl, j]:
                continue
            if rows == cap:
                cap *= 2
                out_k, out_g = _grown1(out_k, cap), _grown1(out_g, cap)
                out_c, out_m = _grown3(out_c, cap), _grown2(out_m, cap)
            out_k[rows] = k0 + j % lanes
            out_g[rows] = slot_g[sl] * nq + j // lanes
            for c in range(gacc.shape[1]):
                cy = np.uint64(0)
                for lb in range(gacc.shape[2]):
                    v = gacc[sl, c, lb, j] + cy
                    out_c[rows, c, lb] = v & _MASK
                    cy = v >> _SHIFT
            for q in range(nm):
                out_m[rows, q] = gmm[sl, q, j]
            rows += 1
    return rows, out_k, out_g, out_c, out_m
