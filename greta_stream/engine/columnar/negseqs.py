"""`NOT SEQ(C, D, ...)` of single events on the columnar kernel (SEMANTICS section 3): middle, leading, trailing.

`SEQ(S+, NOT SEQ(C, D), E)` excludes an adjacency x -> y (x bound to S, y to E) when a match c, d of
the negated SEQ lies strictly between them: `x.time < c.time < d.time < y.time`, in the partition of
the common attributes, each part satisfying its own predicates. Let M(y) be the latest start of a
match that ends before y (the latest c.time over matches with d.time < y.time): the adjacency holds
exactly when `x.time >= M(y)`. So the step is a scanned store with one more order predicate
(`plan.NOT_SEQ`) comparing x's time with y's bound, and the match search is a few sorted passes:
the latest start of a chain ending at each event of a part is the running maximum of the previous
part's, over its events strictly before. A leading or trailing one bounds the windows of a trend's first
or last event (`seq_bounds`), as a leading or trailing `NOT N` of one event does (`keys.negated_starts`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from greta_stream.engine.columnar.keys import partition_times
from greta_stream.engine.columnar.plan import NOT_SEQ, KernelPlan, State
from greta_stream.engine.columnar.prepare import Prepared, local_mask
from greta_stream.engine.timebase import window_bounds
from greta_stream.query import ast


class Matches:
    """Matches of negated SEQs over the prepared events: chains of their parts' events (each part's own
    predicates), in the partitions of the common attributes, times compared by rank."""

    def __init__(self, plan: KernelPlan, prep: Prepared) -> None:
        self.plan, self.prep = plan, prep
        self.code, self.times, self.rank = partition_times(plan, prep)

    def latest_starts(self, parts: tuple[State, ...]) -> np.ndarray:
        """Per event: the time rank of the latest start of a match ending strictly before it (-1: none)."""
        return self._walk(parts, self.rank)

    def earliest_ends(self, parts: tuple[State, ...]) -> np.ndarray:
        """Per event: the time rank of the earliest end of a match starting strictly after it (-1: none):
        the latest start of the reversed SEQ over reversed time."""
        top = len(self.times) - 1
        got = self._walk(parts[::-1], top - self.rank)
        return np.where(got >= 0, top - got, -1)

    def _walk(self, parts: tuple[State, ...], order: np.ndarray) -> np.ndarray:
        plan, prep, n = self.plan, self.prep, len(self.rank)
        key = self.code * (len(self.times) + 2) + order  # (partition, time) as one sortable int
        src, val = np.zeros(0, np.int64), np.zeros(0)
        for k, part in enumerate(parts):
            mine = prep.state == plan.types.index(part.type)
            mine &= local_mask(plan, prep.cols, np.full(n, plan.state_of_neg(part)), slots=False)
            idx = np.flatnonzero(mine)
            val = order[idx].astype(np.float64) if k == 0 else _latest_before(key, self.code, src, val, idx)
            src = idx
        got = _latest_before(key, self.code, src, val, np.arange(n))
        return np.where(np.isfinite(got), got, -1).astype(np.int64)

    def time_of(self, rank: np.ndarray) -> np.ndarray:
        """The times of ranks as float64 (-inf for -1)."""
        return np.where(rank >= 0, self.times[np.maximum(rank, 0)].astype(np.float64), -np.inf)


def match_starts(plan: KernelPlan, prep: Prepared) -> list[np.ndarray]:
    """Per middle negated SEQ (`plan.negseqs` order), per prepared event: M, the latest start time of a
    match ending strictly before the event in its partition (-inf: none)."""
    n = len(prep.t)
    if not plan.negseqs or not n:
        return [np.full(n, -np.inf) for _ in plan.negseqs]
    matches = Matches(plan, prep)
    return [matches.time_of(matches.latest_starts(parts)) for _, parts in plan.negseqs]


def seq_bounds(plan: KernelPlan, prep: Prepared, kneg: np.ndarray, kend: np.ndarray) -> None:
    """A leading `NOT SEQ(C, D, ...)` raises each event's first window of a trend it starts (`kneg`) past
    the windows starting at or before the latest start of a match ending before it (SEMANTICS section 3:
    excluded if `window.start <= c.time` and `d.time < first.time`); a trailing one lowers the last window
    of a trend it ends (`kend`) below the windows holding the earliest end of a match starting after it
    (excluded if `last.time < c.time` and `d.time < window.end`)."""
    if not len(prep.t) or not (plan.lead_seq or plan.trail_seq):
        return
    matches = Matches(plan, prep)
    if plan.lead_seq:
        rank = matches.latest_starts(plan.lead_seq)
        ok = rank >= 0
        _, last = window_bounds(matches.times[rank[ok]], prep.window(plan), prep.int_time)
        kneg[ok] = np.maximum(kneg[ok], last + 1)
    if plan.trail_seq:
        rank = matches.earliest_ends(plan.trail_seq)
        ok = rank >= 0
        first, _ = window_bounds(matches.times[rank[ok]], prep.window(plan), prep.int_time)
        kend[ok] = np.minimum(kend[ok], first - 1)


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
