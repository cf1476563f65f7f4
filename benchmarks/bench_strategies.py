"""Selection strategies as the window grows: CPU seconds of ``evaluate`` per strategy and window length.

Does a strategy's per-event work follow the window? On the stock events of
``bench_coverage.py`` (20 companies in 4 sectors, a seeded 1% relabelled
``Halt``), the Q1-like query

    RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+ SEMANTICS <strategy>
    WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN <w> seconds SLIDE 60 seconds

runs under each strategy and each ``--within`` length on the general engine
(the engine that runs skip-till-next-match and contiguous), and the
skip-till-any-match query once more on the columnar engine for reference.
Each line: the CPU seconds of one ``evaluate`` call (after one untimed
warm-up call of the same query on 400 events), its rows, and the ratio to the
same strategy at the shortest window. Skip-till-any-match's per-event work
grows with the predecessors in the window; skip-till-next-match's with the
predecessors still waiting for their next event, contiguous's with the
events of the previous time stamp: flat as the window grows.

Usage::

    python benchmarks/bench_strategies.py [--events 20000] [--within 60,300,1200] [--seed 0]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any

import bench_coverage
from benchlib import git_state

import greta_stream
from greta_stream.query import ast


def query(strategy: str, within: int) -> str:
    return (f"RETURN sector, COUNT(*), AVG(S.price) PATTERN Stock S+ SEMANTICS {strategy} WHERE [company, sector] "
            f"AND S.price > NEXT(S).price GROUP-BY sector WITHIN {within} seconds SLIDE 60 seconds")


def timed(text: str, frame: Any, warm: Any, engine: str) -> tuple[float, int]:
    greta_stream.evaluate(text, warm, engine=engine)
    start = time.process_time()
    rows = greta_stream.evaluate(text, frame, engine=engine)
    return time.process_time() - start, len(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--within", default="60,300,1200", help="window lengths in seconds (SLIDE 60 s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    withins = [int(w) for w in args.within.split(",")]
    print(f"# {shlex.join([sys.executable, *sys.argv])}\n# {git_state()}")
    frame = bench_coverage.make_events(args.events, args.seed)
    warm = bench_coverage.make_events(400, args.seed + 1)
    print(f"{'strategy':<22} {'engine':<9} {'WITHIN s':>8} {'CPU s':>7} {'x first':>7} {'rows':>6}")
    runs = [(s, "general") for s in ast.STRATEGIES] + [(ast.ANY_MATCH, "columnar")]
    for strategy, engine in runs:
        first = None
        for within in withins:
            cpu, rows = timed(query(strategy, within), frame, warm, engine)
            first = first or cpu
            print(f"{strategy:<22} {engine:<9} {within:>8} {cpu:>7.2f} {cpu / first:>7.2f} {rows:>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
