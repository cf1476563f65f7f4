"""Tasks of the kernel: which events of a partition meet which block of windows.

Windows are cut into blocks of `lanes` consecutive windows and the kernel
(`kernel.run`) builds one tree per (partition, block): a *task*. Events
come sorted by (partition, time), so within a partition first and last
windows never decrease and the events that meet a block are one range.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _task_rows(offsets, kmin, kmax, k_first, lanes, out):  # noqa: ANN001, ANN202
    """Write the tasks to `out` (when it has rows) and return how many there are."""
    at = 0
    for p in range(offsets.shape[0] - 1):
        a, b = offsets[p], offsets[p + 1]
        lo = a  # first event whose last window is in or after the block
        hi = a  # first event whose first window is after the block
        blk = (kmin[a] - k_first) // lanes if b > a else 0
        while lo < b:
            k0 = k_first + blk * lanes
            while lo < b and kmax[lo] < k0:
                lo += 1
            if lo == b:
                break
            if kmin[lo] >= k0 + lanes:  # no event in this block: on to the block of the next one
                blk = (kmin[lo] - k_first) // lanes
                continue
            while hi < b and kmin[hi] < k0 + lanes:
                hi += 1
            if at < out.shape[0]:
                out[at, 0] = blk
                out[at, 1] = p
                out[at, 2] = lo
                out[at, 3] = hi
            at += 1
            blk += 1
    return at


@njit(cache=True)
def tasks(offsets: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, k_first: int, lanes: int) -> np.ndarray:
    """Rows (block, partition, a, b): events a..b-1 of the partition meet
    the block's windows k_first + block * lanes + (0..lanes-1); ordered by
    block, then partition. Within a partition (sorted by time) first and last
    windows never decrease, so the events of a block are one range; blocks
    without events get no task."""
    out = np.empty((_task_rows(offsets, kmin, kmax, k_first, lanes, np.empty((0, 4), np.int64)), 4), np.int64)
    _task_rows(offsets, kmin, kmax, k_first, lanes, out)
    return out[np.argsort(out[:, 0], kind="mergesort")]
