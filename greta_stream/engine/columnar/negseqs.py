"""A middle `NOT SEQ(C, D, ...)` of single events on the columnar kernel (SEMANTICS section 3).

`SEQ(S+, NOT SEQ(C, D), E)` excludes an adjacency x -> y (x bound to S, y to E) when a match c, d of
the negated SEQ lies strictly between them: `x.time < c.time < d.time < y.time`, in the partition of
the common attributes, each part satisfying its own predicates. Let M(y) be the latest start of a
match that ends before y (the latest c.time over matches with d.time < y.time): the adjacency holds
exactly when `x.time >= M(y)`. So the step is a scanned store with one more order predicate
(`plan.NOT_SEQ`) comparing x's time with y's bound, and the match search is a few sorted passes:
the latest start of a chain ending at each event of a part is the running maximum of the previous
part's, over its events strictly before.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from greta_stream.engine.columnar.keys import _codes
from greta_stream.engine.columnar.plan import NOT_SEQ, KernelPlan
from greta_stream.engine.columnar.prepare import Prepared, local_mask
from greta_stream.query import ast


def match_starts(plan: KernelPlan, prep: Prepared) -> list[np.ndarray]:
    """Per negated SEQ (`plan.negseqs` order), per prepared event: M, the latest start time of a match
    ending strictly before the event in its partition (-inf: none)."""
    n = len(prep.t)
    if not plan.negseqs or not n:
        return [np.full(n, -np.inf) for _ in plan.negseqs]
    code = _codes(prep.cols, plan.cq.common, n)
    _, rank = np.unique(prep.t, return_inverse=True)
    key = code * (int(rank.max()) + 2) + rank  # (partition, time) as one sortable int
    t = prep.t.astype(np.float64)
    out = []
    for _, parts in plan.negseqs:
        src, val = np.zeros(0, np.int64), np.zeros(0)
        for k, part in enumerate(parts):
            mine = prep.state == plan.types.index(part.type)
            mine &= local_mask(plan, prep.cols, np.full(n, plan.state_of_neg(part)), slots=False)
            idx = np.flatnonzero(mine)
            val = t[idx] if k == 0 else _latest_before(key, code, src, val, idx)
            src = idx
        out.append(_latest_before(key, code, src, val, np.arange(n)))
    return out


def _latest_before(key: np.ndarray, code: np.ndarray, src: np.ndarray, val: np.ndarray,
                   dst: np.ndarray) -> np.ndarray:
    """Per event of `dst`: the largest `val` of the events `src` of its partition strictly before it."""
    out = np.full(len(dst), -np.inf)
    if not len(src) or not len(dst):
        return out
    order = np.argsort(key[src], kind="stable")
    skey, scode = key[src][order], code[src][order]
    best = pd.Series(val[order]).groupby(scode).cummax().to_numpy()
    at = np.searchsorted(skey, key[dst], side="left") - 1  # the last src event before it
    ok = at >= 0
    ok[ok] = scode[at[ok]] == code[dst[ok]]
    out[ok] = best[at[ok]]
    return out


def fill_ranks(plan: KernelPlan, grs: np.ndarray, gqs: np.ndarray, t: np.ndarray, bounds: list[np.ndarray]) -> None:
    """Write the ranks of each negated SEQ's predicate (`grs[u] < gqs[v]` iff `t[u] >= M(v)`) into its
    scan columns; `t` and `bounds` per vertex, in the kernel's order."""
    p = 0
    for sc in plan.scans:
        for op, x, _ in sc.edges:
            if op == NOT_SEQ and isinstance(x, ast.Literal):
                m = bounds[int(x.value)]
                values = np.unique(np.concatenate([t.astype(np.float64), m[np.isfinite(m)]]))
                grs[:, p] = -np.searchsorted(values, t.astype(np.float64))
                gqs[:, p] = np.where(np.isfinite(m), 1 - np.searchsorted(values, m), 1)
            p += 1
