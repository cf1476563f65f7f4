"""Every kernel of the columnar engine run once, so that numba's on-disk
cache holds them (`greta-stream warm-up`, at install time): the batch
kernels (`driver.compile_kernels`, `dominance.dominance_max`, `dominance_max2`,
the scan of `dominance_maxk` and `window_scan`) and the incremental ones that a stream's
carried trees use (`compile_incremental`). One place for the warm-up, above
the modules it exercises."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from greta_stream.compiler.compiled import compile_query
from greta_stream.engine.columnar import carried_kernel as lk
from greta_stream.engine.columnar.carried import _new_state
from greta_stream.engine.columnar.dominance import dominance_max, dominance_max2, dominance_maxk, window_scan
from greta_stream.engine.columnar.driver import compile_kernels as compile_batch
from greta_stream.engine.columnar.stream import ColumnarStream


def compile_all() -> Path:
    """Every kernel of the columnar engine; the folder numba caches beside."""
    where = compile_batch()
    compile_incremental()
    one, val = np.zeros(1, np.int64), np.zeros(1, np.float64)  # a negated SEQ's step with an edge predicate
    dominance_max(one, one, one, val, one, one + 1, one, 0, 1)
    dominance_max2(one, one, one, one, val, one, one + 1, one + 1, one + 1)  # two comparisons on the step
    dominance_maxk(one, one, [one] * 3, val, one, one + 1, [one + 1] * 3)  # three to five: its scan
    ranks = np.zeros((1, 6), np.int64)
    window_scan(one, one, ranks, val, one, one + 1, ranks + 1, one, ranks[:, :1], ranks[:, :1] + 1)  # six or more; `!=`
    return where


def compile_incremental() -> None:
    """Run the incremental kernels once (`feed` through a small stream over
    order, equality and no edges, and `compact`), so that numba's on-disk
    cache holds them for the argument types a stream passes."""
    events = [{"type": "S", "time": i, "p": float(i % 7), "q": i % 3} for i in range(40)]
    for where in ("S.p > NEXT(S).p", "S.q = NEXT(S).q", "S.p > 0"):
        stream = ColumnarStream(compile_query(f"RETURN COUNT(*), SUM(S.p), MAX(S.p) PATTERN S+ WHERE {where} "
                                              "WITHIN 20 seconds SLIDE 5 seconds"), incremental=True)
        for t in range(0, 40, 10):
            stream.add_many(events[t: t + 10])
            stream.advance(t + 10)
        stream.finish()
    state = _new_state(2, 0, 4)
    lk.compact(state, np.zeros(state.tnseg.shape[0], bool))
