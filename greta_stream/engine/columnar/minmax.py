"""MIN and MAX propagated along a graph's edges, for the columnar kernels (`kernel.py`):
per lane, the max (or min) over the predecessors, and the event's own value
in the lanes where it ends a trend."""

from __future__ import annotations

import numpy as np
from numba import njit

from greta_stream.engine.columnar.limbs import counted


@njit(cache=True)
def vertex_mm(acc_mm, nodes_mm, path, npath, acc, sig, j0, j1, own, mmax):  # noqa: ANN001, ANN202
    """MIN/MAX over the trends ending at the event, per lane (GRETA's
    propagation with min/max for + and the own value for *): the
    predecessors' values, and the event's own value (NaN: not of the
    field's alias) in the lanes where it ends a trend."""
    for q in range(mmax.shape[0]):
        big = mmax[q]
        row = acc_mm[q]
        for j in range(j0, j1):
            row[j] = -np.inf if big else np.inf
        for r in range(npath):
            src = nodes_mm[path[r], q]
            for j in range(j0, j1):
                x = src[j]
                if (x > row[j]) if big else (x < row[j]):
                    row[j] = x
        val = own[q]
        if val == val:  # not NaN
            for j in range(j0, j1):
                if ((val > row[j]) if big else (val < row[j])) and counted(acc, sig, j):
                    row[j] = val


@njit(cache=True, inline="always")
def add_mm(nodes_mm, i, val_mm, j0, j1, mmax, shift=0):  # noqa: ANN001, ANN202
    """nodes_mm[i] lanes j0 + shift.. combined with val_mm lanes j0..j1-1 (MIN or MAX)."""
    for q in range(mmax.shape[0]):
        dst = nodes_mm[i, q]
        src = val_mm[q]
        if mmax[q]:
            for j in range(j0, j1):
                if src[j] > dst[j + shift]:
                    dst[j + shift] = src[j]
        else:
            for j in range(j0, j1):
                if src[j] < dst[j + shift]:
                    dst[j + shift] = src[j]


@njit(cache=True)
def clear_mm(nodes_mm, lo, hi, mmax):  # noqa: ANN001, ANN202
    for i in range(lo, hi):
        for q in range(mmax.shape[0]):
            nodes_mm[i, q, :] = -np.inf if mmax[q] else np.inf


# The per-event arrays, in (partition, time) order (numba takes named tuples of arrays).
