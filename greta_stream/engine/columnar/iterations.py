"""Bounded repetition on the columnar kernel (SEMANTICS section 8): `X{n}`, `X{n,m}`, `X{n,}` as one
Kleene state whose lanes count iterations.

A vertex's lanes hold, per window, its trends ending at it by their number of iterations 1..m
(`X{n,}`: 1..n, the last lane n or more). It starts a trend in lane 1 only; a vertex joins the stores
with its lanes moved up by one iteration (`stores.join`), so that its successors read, in lane q + 1,
what ends at it in lane q; a trend ends in lanes n..m. The kernel runs this as query lanes (one
"query" per iteration count) whose rows `compute_cells` adds up per group and window: the cost is
about m times a Kleene's on the same events, whatever the edge predicates or the strategy.

Inside a SEQ (`SEQ(A, B{n,m}, C)`, `KernelPlan.counts`) a lane counts the iterations of the counted
part a trend is in: the states outside the counted parts are in lane 0; B's vertex in lane q ends
trends of q + 1 iterations and joins B's own stores a lane up, as above, so that a B after it reads in
lane q what has q iterations; the stores the states after B read take every count n..m in lane 0
(`stores.join`: `wiring.lift` 2), so that C, and a second counted part after it, start again from
lane 0. `X{n,}` takes lanes 0..n: B's lane n (n + 1 or more) joins its stores in lane n itself (n or
more). An optional `B{0,m}` lets C read A's lane 0.

A counted group as the whole pattern (`(SEQ(A, B+)){2,3}`: a `loop` with `iterations`) counts the
loop's steps: every state is in every lane, and only the loop's store (B's vertices as the next A
reads them) moves up a lane, so lane q holds the trends in their iteration q + 1. Inside a SEQ
(`SEQ(X, (SEQ(A, B+)){2,3}, Y)`: a `loop` over states 1..2 and B in `counts`) the group's states are
in its lanes, X and Y in lane 0: A's first iteration reads X's lane 0, the loop's store moves up a
lane, and the store Y reads of B takes every count n..m in lane 0, as for a counted event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from greta_stream.engine.columnar.plan import KernelPlan


@dataclass(frozen=True)
class IterationLanes:
    """`driver.QueryLanes` of one plan with `iterations`: a lane per (window, iteration count)."""

    plan: KernelPlan

    @property
    def nq(self) -> int:
        return self.plan.iteration_lanes

    @property
    def startq(self) -> np.ndarray:
        start, *_ = self.plan.stores()
        out = np.zeros((len(start), self.nq), np.bool_)
        out[:, 0] = start  # no iteration before a trend starts; one at the counted state
        return out

    @property
    def finalq(self) -> np.ndarray:
        _, final, *_ = self.plan.stores()
        out = np.zeros((len(final), self.nq), np.bool_)
        if not self.plan.counts:  # `X{n,m}`, `(SEQ(A, B)){n,m}`: lane q ends trends of q + 1 iterations
            ((_, lo, _, _),) = self.plan.counted_states
            out[final, lo - 1:] = True
            return out
        out[:, 0] = final  # outside the counted parts: lane 0, every part before done (`stores.join`'s collapse)
        qhi = self.qhi
        # a counted group's ends: its last state's lanes end trends at each of them
        ends = {last: self.plan.iteration_ends((first, last)) for first, last in self.plan.counted_groups}
        for c, lo, _, _ in self.plan.counted_states:  # lane q: q + 1 iterations (open: the last, n + 1 or more)
            for e in ends.get(c, (c,)):
                out[e, 0] = False
                out[e, max(lo - 1, 0):qhi[e]] = final[e]
        return out

    @property
    def qlo(self) -> np.ndarray:
        return np.zeros(len(self.plan.states), np.int64)

    @property
    def qhi(self) -> np.ndarray:
        out = np.full(len(self.plan.states), self.nq, np.int64)
        if not self.plan.counts:
            return out
        out[:] = 1  # outside the counted parts: lane 0
        for c, _, hi, top in self.plan.counted_states:  # at most m iterations (open: lane n, n + 1 or more)
            out[c] = top if hi is not None else top + 1
        for first, last in self.plan.counted_groups:  # a counted group inside a SEQ: each state in each lane
            out[first:last + 1] = out[last]
        return out

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        return self.plan.stores()

    def first_windows(self, st: np.ndarray, t: np.ndarray, cols: dict[str, Any], prep: Any) -> np.ndarray:
        """Every iteration count from a vertex's first window (the caller bounds it by its last)."""
        return np.zeros((len(st), self.nq), np.int64) - 2**62
