"""CET's numba kernels compiled ahead of the first window (`greta-stream warm-up`).

Range edges (`reduction.py`) and order edges (`orderkernels.py`) run numba
kernels cached on disk (`cache=True`). `compile_kernels` runs each path
once on a tiny seeded stream, through the same `TrendExtractor` calls a run
makes, so the argument types (and so the cache entries) are the ones a
run looks up: at install time this fills the cache, later it loads it.
"""

from __future__ import annotations

import random
from typing import Any

from greta_stream.cet.config import ALL, COMPLETE, CetConfig
from greta_stream.cet.extractor import TrendExtractor

# One query per graph with kernels: equality edges (range graph), each order comparison (order graph).
_QUERIES = (
    "RETURN TRENDS PATTERN Check C+ WHERE C.src = NEXT(C).dest WITHIN 40 seconds SLIDE 20 seconds",
    "RETURN TRENDS PATTERN Stock S+ WHERE S.price < NEXT(S).price WITHIN 40 seconds SLIDE 20 seconds",
    "RETURN TRENDS PATTERN Stock S+ WHERE S.price >= NEXT(S).price WITHIN 40 seconds SLIDE 20 seconds",
)


def _events(n: int = 60) -> list[dict[str, Any]]:
    rnd = random.Random(0)
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append({"type": "Check", "time": i, "src": rnd.randrange(4), "dest": rnd.randrange(4)})
        out.append({"type": "Stock", "time": i, "price": float(rnd.randrange(10))})
    return out


def compile_kernels() -> None:
    """Run every CET kernel once (complete and all trends, one and two threads,
    with and without a cap)."""
    events = _events()
    for text in _QUERIES:
        for trends in (COMPLETE, ALL):
            for threads, cap in ((1, None), (2, 5)):
                run = TrendExtractor(text, config=CetConfig(trends=trends, max_trends=cap, threads=threads))
                run.add_many(events)
                run.finish()
