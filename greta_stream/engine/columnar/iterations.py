"""Bounded repetition on the columnar kernel (SEMANTICS section 8): `X{n}`, `X{n,m}`, `X{n,}` as one
Kleene state whose lanes count iterations.

A vertex's lanes hold, per window, its trends ending at it by their number of iterations 1..m
(`X{n,}`: 1..n, the last lane n or more). It starts a trend in lane 1 only; a vertex joins the stores
with its lanes moved up by one iteration (`stores.join`), so that its successors read, in lane q + 1,
what ends at it in lane q; a trend ends in lanes n..m. The kernel runs this as query lanes (one
"query" per iteration count) whose rows `compute_cells` adds up per group and window: the cost is
about m times a Kleene's on the same events, whatever the edge predicates or the strategy.
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
        out = np.zeros((1, self.nq), np.bool_)
        out[0, 0] = True
        return out

    @property
    def finalq(self) -> np.ndarray:
        assert self.plan.iterations is not None
        out = np.zeros((1, self.nq), np.bool_)
        out[0, self.plan.iterations[0] - 1:] = True
        return out

    @property
    def qlo(self) -> np.ndarray:
        return np.zeros(1, np.int64)

    @property
    def qhi(self) -> np.ndarray:
        return np.full(1, self.nq, np.int64)

    def stores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        return self.plan.stores()

    def first_windows(self, st: np.ndarray, t: np.ndarray, cols: dict[str, Any], prep: Any) -> np.ndarray:
        """Every iteration count from a vertex's first window (the caller bounds it by its last)."""
        return np.zeros((len(st), self.nq), np.int64) - 2**62
