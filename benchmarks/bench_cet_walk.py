"""The walk of order edges alone (orderkernels.walk_*), CetConfig.threads 1 vs 2.

Builds one window of rising prices (`cet_scale.py`'s workload), then times
only `OrderView._walk` (the numba kernels over anchor slices, joined in
anchor order), without turning positions into records. Prints wall and
process CPU seconds per run: on an idle machine two threads should take about
half the wall time at the same CPU; on a loaded one only CPU is comparable.

Usage::

    .venv/bin/python benchmarks/bench_cet_walk.py [--events 10000] [--trends complete] [--limit 1000000]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cet_scale  # noqa: E402

from greta_stream.cet import CetConfig, TrendExtractor  # noqa: E402
from greta_stream.cet.orderview import OrderView  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--trends", default="complete", choices=["complete", "all"])
    ap.add_argument("--limit", type=int, default=1_000_000)
    args = ap.parse_args()
    n = args.events
    cfg = CetConfig(trends=args.trends)
    ex = TrendExtractor(cet_scale.query("rising", n), config=cfg)
    ex.add_many(cet_scale.events("rising", n))
    ex.advance(n)  # every event in; the window is still open
    (graph,) = [g for p in ex.partitions.values() for g in p.runs.values()]
    view = OrderView(graph, ex.plan, cfg, ex.budget, ex.plan.tb.first_window(n - 1))  # type: ignore[arg-type]
    print(f"# {args.trends}, {view.n} vertices, {len(view.sources)} anchors, limit {args.limit:,}, "
          f"load average {os.getloadavg()[0]:.1f}")
    view._walk(1000)  # noqa: SLF001 - load the compiled kernels
    for threads in (1, 2, 1, 2):
        view.cfg = dataclasses.replace(cfg, threads=threads)
        t0, c0 = time.perf_counter(), time.process_time()
        flat, offs = view._walk(args.limit)  # noqa: SLF001
        print(f"threads {threads}: {len(offs) - 1:,} trends, {len(flat):,} positions, "
              f"wall {time.perf_counter() - t0:.2f} s, cpu {time.process_time() - c0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
