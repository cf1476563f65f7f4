"""The transitive reduction of a window's range-edge graph, by forward sweeps (numba).

An edge x -> y is *reduced* (usable by a complete trend) when no path
x -> w -> ... -> y bypasses it (graph.py). With range edges (ranges.py), y's
predecessors are the members of its buckets, so the edge is bypassed exactly
when some w reachable from x, later than x, lies in a bucket y probes, at or
after that bucket's `lo` for y. The sweep from x visits the later vertices in
time order and keeps, per bucket, the latest time group a vertex reached from
x joined it (marks of one time group apply only to later groups: time strictly
increases along a trend). It stops once every bucket of x has been reached:
every later successor of x is bypassed from then on. A sweep costs the
vertices up to that point, so a window costs about n times the distance to
the next reachable member of one's own bucket, not its edges.

Inputs are CSR arrays over window positions (`tg` = time group rank, `lo` as
a group rank); the output is the reduced edges as (x, y) position pairs in
increasing order of x, then y. Sweeps are independent: `reduced_edges` cuts
the sources into `threads` consecutive slices and runs the kernel (which
releases the GIL) on each in a thread, then concatenates the slices in
order, so the result does not depend on the number of threads.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

MIN_SLICE = 2048  # fewer sources per thread are not worth a thread


def reduced_edges(arrays: tuple[np.ndarray, ...], need: np.ndarray, nb: int, threads: int = 1) -> Any:
    """(xs, ys): the reduced edges; `arrays` = (tg, in_ptr, in_bid, in_lo, out_ptr, out_bid)."""
    n = need.shape[0]
    parts = max(1, min(threads, n // MIN_SLICE))
    if parts == 1:
        return _sweeps(need, nb, 0, n, *arrays)
    cuts = [n * i // parts for i in range(parts + 1)]
    with ThreadPoolExecutor(parts) as pool:
        done = list(pool.map(lambda i: _sweeps(need, nb, cuts[i], cuts[i + 1], *arrays), range(parts)))
    return np.concatenate([d[0] for d in done]), np.concatenate([d[1] for d in done])


@njit(cache=True, nogil=True)
def _sweeps(need, nb, x_lo, x_hi, tg, in_ptr, in_bid, in_lo, out_ptr, out_bid):  # noqa: ANN001, ANN202 - numba kernel
    n = tg.shape[0]
    last = np.full(nb, -1, np.int64)  # latest group of a reached member, this sweep
    direct = np.zeros(nb, np.bool_)  # x is a member
    covered = np.zeros(nb, np.bool_)
    touched = np.empty(nb, np.int64)
    pend = np.empty(n, np.int64)
    xs = np.empty(max(16, n), np.int64)
    ys = np.empty(max(16, n), np.int64)
    m = 0
    for x in range(x_lo, x_hi):
        if not need[x]:
            continue
        nt = 0
        remaining = 0
        for e in range(out_ptr[x], out_ptr[x + 1]):
            b = out_bid[e]
            if not direct[b]:
                direct[b] = True
                remaining += 1
                touched[nt] = b
                nt += 1
        gx = tg[x]
        gcur = gx
        npend = 0
        for z in range(x + 1, n):
            gz = tg[z]
            if gz != gcur:
                for p in range(npend):  # marks of the finished group
                    w = pend[p]
                    for e in range(out_ptr[w], out_ptr[w + 1]):
                        b = out_bid[e]
                        if last[b] < 0 and not direct[b]:
                            touched[nt] = b
                            nt += 1
                        last[b] = tg[w]
                        if direct[b] and not covered[b]:
                            covered[b] = True
                            remaining -= 1
                npend = 0
                gcur = gz
                if remaining == 0:
                    break
            if gz == gx:
                continue
            d = False
            v = False
            for e in range(in_ptr[z], in_ptr[z + 1]):
                b = in_bid[e]
                lo = in_lo[e]
                if direct[b] and gx >= lo:
                    d = True
                if last[b] >= 0 and last[b] >= lo:
                    v = True
            if d and not v:
                if m == xs.shape[0]:
                    xs = np.concatenate((xs, np.empty(m, np.int64)))
                    ys = np.concatenate((ys, np.empty(m, np.int64)))
                xs[m] = x
                ys[m] = z
                m += 1
            if d or v:
                pend[npend] = z
                npend += 1
        for t in range(nt):
            b = touched[t]
            last[b] = -1
            direct[b] = False
            covered[b] = False
    return xs[:m], ys[:m]
