"""Exact counts as multi-limb integers, for the columnar kernels (`kernel.py`).

A count is `L` limbs of 32 bits held in uint64, so sums of up to 2**31
values never carry out of a limb; a value is normalized (carries
propagated) once per event, and when it needs more than `L` limbs every
array is widened (`wider_*`, `grown*`) and the event computed again.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LIMB_BITS = 32
EXTRA_LIMBS = 2  # rows carry this many more limbs than vertices (sums of up to 2**64 values)


MASK = np.uint64(0xFFFFFFFF)  # the low limb of a uint64
SHIFT = np.uint64(32)


@njit(cache=True)
def normalize(acc: np.ndarray, c: int, top: int, j0: int, j1: int, carry: np.ndarray) -> bool:
    """Propagate carries in cell c, limbs 0..top-1, lanes j0..j1-1; True if
    something carries out of limb top-1."""
    n = j1 - j0
    if n == 1:  # one lane (a window closing alone): scalars, no views
        c1 = np.uint64(0)
        for lb in range(top):
            x = acc[c, lb, j0] + c1
            acc[c, lb, j0] = x & MASK
            c1 = x >> SHIFT
        return c1 != 0
    cy = carry[:n]
    cy[:] = 0
    for lb in range(top):
        row = acc[c, lb, j0:j1]  # views and 0-based loops: numba vectorizes these
        for j in range(n):
            x = row[j] + cy[j]
            row[j] = x & MASK
            cy[j] = x >> SHIFT
    return bool(cy.any())


@njit(cache=True)
def add_node(nodes, used, i, val, j0, j1, sig, shift=0):  # noqa: ANN001, ANN202
    """nodes[i] lanes j0 + shift..j1 + shift - 1 += val lanes j0..j1-1, cell c over its limbs 0..sig[c]-1.
    Limbs at or past used[i, c] of a node are not kept zero (a tree is reused
    from task to task without clearing): they are cleared, all lanes, when
    first needed. used[i, -1]: the node's lanes from there on are zero (`take_node` reads below it)."""
    n = j1 - j0
    top = used.shape[1] - 1
    if j1 + shift > used[i, top]:
        used[i, top] = j1 + shift
    for c in range(sig.shape[0]):
        u = used[i, c]
        if sig[c] > u:
            for lb in range(u, sig[c]):
                nodes[i, c, lb, :] = 0
            used[i, c] = sig[c]
        if n == 1:
            for lb in range(sig[c]):
                nodes[i, c, lb, j0 + shift] += val[c, lb, j0]
            continue
        for lb in range(sig[c]):
            dst = nodes[i, c, lb, j0 + shift:j1 + shift]
            src = val[c, lb, j0:j1]
            for j in range(n):
                dst[j] += src[j]


@njit(cache=True)
def take_node(acc, nodes, used, i, j0, j1):  # noqa: ANN001, ANN202
    """acc lanes j0..j1-1 += nodes[i] (each cell's used limbs), up to the node's last lane written
    (`used[i, -1]`): an earlier vertex's windows, an iteration count its state never reaches."""
    ncell = acc.shape[0]
    j1 = min(j1, used[i, ncell])
    n = j1 - j0
    if n <= 0:
        return
    if n == 1:
        for c in range(ncell):
            for lb in range(used[i, c]):
                acc[c, lb, j0] += nodes[i, c, lb, j0]
        return
    for c in range(ncell):
        for lb in range(used[i, c]):
            dst = acc[c, lb, j0:j1]
            src = nodes[i, c, lb, j0:j1]
            for j in range(n):
                dst[j] += src[j]


@njit(cache=True)
def wider_mid(a, limbs):  # noqa: ANN001, ANN202
    """(cells, limbs, lanes) zero-extended to `limbs` limbs."""
    out = np.zeros((a.shape[0], limbs, a.shape[2]), a.dtype)
    out[:, : a.shape[1], :] = a
    return out


@njit(cache=True)
def wider_last(a, limbs):  # noqa: ANN001, ANN202
    """(rows, cells, limbs) zero-extended to `limbs` limbs."""
    out = np.zeros((a.shape[0], a.shape[1], limbs), a.dtype)
    out[:, :, : a.shape[2]] = a
    return out


@njit(cache=True)
def wider4(a, limbs):  # noqa: ANN001, ANN202
    """(items, cells, limbs, lanes) zero-extended to `limbs` limbs."""
    out = np.zeros((a.shape[0], a.shape[1], limbs, a.shape[3]), a.dtype)
    out[:, :, : a.shape[2], :] = a
    return out


@njit(cache=True)
def significant(acc, c, top, j0, j1):  # noqa: ANN001, ANN202
    """Limbs of cell c (within 0..top-1) up to its highest nonzero one over lanes j0..j1-1."""
    if j1 - j0 == 1:
        for lb in range(top - 1, -1, -1):
            if acc[c, lb, j0] != 0:
                return lb + 1
        return 1
    for lb in range(top - 1, -1, -1):
        row = acc[c, lb, j0:j1]
        for j in range(j1 - j0):
            if row[j] != 0:
                return lb + 1
    return 1


@njit(cache=True)
def grown1(a, n):  # noqa: ANN001, ANN202
    out = np.empty(n, a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def grown2(a, n):  # noqa: ANN001, ANN202
    out = np.empty((n, a.shape[1]), a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def grown3(a, n):  # noqa: ANN001, ANN202
    out = np.zeros((n, a.shape[1], a.shape[2]), a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def grown4(a, n):  # noqa: ANN001, ANN202
    out = np.zeros((n, a.shape[1], a.shape[2], a.shape[3]), a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, inline="always")
def counted(acc, sig, j):  # noqa: ANN001, ANN202
    """Whether the event's trend count in lane j is not zero (numba: a loop, no generator)."""
    for lb in range(sig[0]):  # noqa: SIM110
        if acc[0, lb, j] != 0:
            return True
    return False


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
                cells[r, c, lb] = x & MASK
                cy = x >> SHIFT
            if cy != 0:
                over = True
    return over
