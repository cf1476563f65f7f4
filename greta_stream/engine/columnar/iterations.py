"""Bounded repetition on the columnar kernel (SEMANTICS section 8): `X{n}`, `X{n,m}`, `X{n,}` as one
Kleene state whose lanes count iterations.

A vertex's lanes hold, per window, its trends ending at it by their number of iterations 1..m
(`X{n,}`: 1..n, the last lane n or more). It starts a trend in lane 1 only; a vertex joins the stores
with its lanes moved up by one iteration (`stores.join`), so that its successors read, in lane q + 1,
what ends at it in lane q; a trend ends in lanes n..m. The kernel runs this as query lanes (one
"query" per iteration count) whose rows `compute_cells` adds up per group and window: the cost is
about m times a Kleene's on the same events, whatever the edge predicates or the strategy.

Inside a SEQ (`SEQ(A, B{n,m}, C)`, `KernelPlan.counted` is B's state) the lanes are 0..m: a lane of any
state counts the iterations of B on the trend so far. The states before B are in lane 0; B's vertex
in lane q ends trends of q + 1 iterations and joins its stores a lane up, as above, so that a B after it
reads in lane q what has q iterations. The stores that the states after B read are B's own and take
every count n..m in lane n (`stores.join`: `wiring.collapse`): C and the states after it keep one lane,
n, where a trend may go on and end, whatever B's count. `X{n,}` takes lanes 0..n: B's lane n (n + 1 or more)
joins its stores in lane n itself (n or more). An optional `B{0,m}` lets C read A's lane 0.

A counted group as the whole pattern (`(SEQ(A, B+)){2,3}`: a `loop` with `iterations`) counts the
loop's steps: every state is in every lane, and only the loop's store (B's vertices as the next A
reads them) moves up a lane, so lane q holds the trends in their iteration q + 1.
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
    def open(self) -> bool:
        """`X{n,}`: the last lane counts n or more iterations."""
        return self.plan.iterations is not None and self.plan.iterations[1] is None

    @property
    def startq(self) -> np.ndarray:
        start, *_ = self.plan.stores()
        out = np.zeros((len(start), self.nq), np.bool_)
        out[:, 0] = start  # no iteration before a trend starts; one at the counted state
        return out

    @property
    def finalq(self) -> np.ndarray:
        assert self.plan.iterations is not None
        lo = self.plan.iterations[0]
        _, final, *_ = self.plan.stores()
        out = np.zeros((len(final), self.nq), np.bool_)
        if self.plan.counted < 0:  # `X{n,m}`, `(SEQ(A, B)){n,m}`: lane q ends trends of q + 1 iterations
            out[final, lo - 1:] = True
            return out
        c = self.plan.counted
        out[:c, 0] = final[:c] & (lo == 0)  # `SEQ(A, B{0,m})`: A ends the trends without a B
        out[c, max(lo - 1, 0):] = final[c]  # lane q: q + 1 iterations (the open one's last: n + 1 or more)
        out[c + 1:, lo] = final[c + 1:]  # lane n: n..m iterations (`stores.join`'s collapse)
        return out

    @property
    def qlo(self) -> np.ndarray:
        out = np.zeros(len(self.plan.states), np.int64)
        if self.plan.counted < 0:
            return out
        out[self.plan.counted + 1:] = self.lo
        return out

    @property
    def lo(self) -> int:
        return self.plan.iterations[0] if self.plan.iterations else 0

    @property
    def qhi(self) -> np.ndarray:
        out = np.full(len(self.plan.states), self.nq, np.int64)
        if self.plan.counted < 0:
            return out
        c = self.plan.counted
        out[:c] = 1  # before the counted state: no iteration yet
        out[c] = self.nq - 1 if not self.open else self.nq  # at most m iterations (open: lane n, n + 1 or more)
        out[c + 1:] = self.lo + 1  # after it: n..m iterations, all in lane n
        return out

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        return self.plan.stores()

    def first_windows(self, st: np.ndarray, t: np.ndarray, cols: dict[str, Any], prep: Any) -> np.ndarray:
        """Every iteration count from a vertex's first window (the caller bounds it by its last)."""
        return np.zeros((len(st), self.nq), np.int64) - 2**62
