"""Streaming cost per micro-batch: the engine alone (no Spark), batches in time order.

A stream of Q1 (configs/q1_stock.greta: 10-minute windows sliding every
10 s, or the window of ``--within`` and ``--slide``) is fed to a streaming
engine in micro-batches of ``--batch-s`` seconds of event time, the
watermark at the batch's end, as a Spark shard sees it with a
`processingTime` trigger. With Q1's window one closes every 10 s of event
time, so 1 s batches close one window every tenth batch and 10 s batches one
window per batch.

Engines: ``columnar`` computes each closing window from the kept events
(the default streaming path), ``incremental`` propagates each event once
into trees carried across micro-batches (``ColumnarStream(incremental=True)``),
``general`` is the general engine.

Printed per row: events/s over the whole stream, the mean ms per batch of
``add_many`` and ``advance`` over the second half (the windows are full by
then), the state after the middle micro-batch (its snapshot, zlib'd as a
Spark shard stores it, and the carried trees held in memory), the peak
memory the run added (each run in a forked process: peak RSS less the RSS
at the fork), and the same events through one batch ``evaluate`` for
comparison (its events/s and added peak memory, and whether the streamed
rows equal its rows).

With ``--floor``, each engine also runs with its kernels replaced by no-ops
(`kernel.run` returns no rows, `carried_kernel.feed` carries nothing): what is
left is the per-micro-batch work around the kernels (ingest, preparing and
laying out the events, ids, rows), the throughput no kernel can take a
stream past (the general engine has no kernel: its floor is its cost).
Its events/s are printed in a last column (rows are not compared: there
are none).

    .venv/bin/python benchmarks/bench_stream.py
    .venv/bin/python benchmarks/bench_stream.py --per-window 10000,100000 --batch-s 1,10 --windows 2
    .venv/bin/python benchmarks/bench_stream.py --within 3600 --slide 10 --per-window 10000 --batch-s 10
    .venv/bin/python benchmarks/bench_stream.py --per-window 10000,100000 --batch-s 10 --floor
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import generators  # noqa: E402
from bench_columnar import q1_text, rate_for  # noqa: E402

import greta_stream  # noqa: E402
from greta_stream.compiler.compiled import compile_query  # noqa: E402
from greta_stream.engine import Engine  # noqa: E402
from greta_stream.engine.columnar.stream import ColumnarStream  # noqa: E402

Q1_WINDOW = "WITHIN 10 minutes SLIDE 10 seconds"


def query(within_s: float, slide_s: float) -> str:
    """Q1 with its window set to `within_s`, sliding every `slide_s` seconds."""
    text = q1_text()
    assert Q1_WINDOW in text
    return text.replace(Q1_WINDOW, f"WITHIN {within_s:g} seconds SLIDE {slide_s:g} seconds")


def run(engine: str, text: str, events: list[dict[str, Any]], batch_s: float, floor: bool = False) -> dict[str, float]:
    if floor:  # in the forked child only: the kernels do nothing (see the module's docstring)
        _no_kernels()
    cq = compile_query(text)
    if engine == "general":
        stream: Any = Engine(cq)
    else:
        stream = ColumnarStream(cq, incremental=engine == "incremental")
    timings: list[tuple[float, float]] = []
    rows: list[dict[str, Any]] = []
    i, end = 0, 0.0
    middle, state, held = events[len(events) // 2]["time"], 0, 0
    start = time.perf_counter()
    while i < len(events):
        end += batch_s
        j = i
        while j < len(events) and events[j]["time"] < end:
            j += 1
        a = time.perf_counter()
        stream.expect(end - batch_s)
        stream.add_many(events[i:j])
        b = time.perf_counter()
        rows += stream.advance(end)
        timings.append((b - a, time.perf_counter() - b))
        if not state and end > middle:
            state, held = len(zlib.compress(stream.snapshot(), 1)), getattr(stream, "carried_bytes", 0)
        i = j
    rows += stream.finish()
    wall = time.perf_counter() - start
    half = timings[len(timings) // 2:] or timings
    return {"ev_s": len(events) / wall, "rows": _key(rows), "add_ms": 1000 * sum(x for x, _ in half) / len(half),
            "advance_ms": 1000 * sum(y for _, y in half) / len(half), "state": state, "held": held}


def _no_kernels() -> None:
    from greta_stream.engine.columnar import carried_kernel, kernel

    def run(task: Any, lo: int, hi: int, k_first: int, lanes: int, group_of_part: Any, n_groups: int, ev: Any,
            wiring: Any, ncell: int, limbs: int, max_words: int) -> tuple[Any, ...]:
        return (0, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, ncell, limbs + kernel.EXTRA_LIMBS),
                np.uint64), np.zeros((0, ev.mmval.shape[1]), np.float64))

    kernel.run = run
    carried_kernel.feed = lambda state, *args: state


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(conn: Any, fn: Any, args: tuple[Any, ...]) -> None:
    with open("/proc/self/statm") as f:
        base = int(f.read().split()[1]) * resource.getpagesize() / 2**20
    out = fn(*args)
    conn.send((out, _rss_mb() - base))


def forked(fn: Any, *args: Any) -> tuple[Any, float]:
    """fn(*args) in a forked process: its result and the peak memory (MB) it added."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args))
    proc.start()
    out = parent.recv()
    proc.join()
    return out


def batch(text: str, events: list[dict[str, Any]]) -> tuple[float, list[tuple[Any, ...]]]:
    start = time.perf_counter()
    rows = greta_stream.evaluate(text, events, engine="columnar")
    return len(events) / (time.perf_counter() - start), _key(rows)


def _key(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-window", default="10000,100000", help="events per window (comma list)")
    ap.add_argument("--batch-s", default="1,10", help="event-time seconds per micro-batch (comma list)")
    ap.add_argument("--windows", type=float, default=2.0, help="stream length in windows")
    ap.add_argument("--engines", default="columnar,incremental",
                    help="columnar (each closing window computed from the kept events), incremental (each event "
                         "propagated once, trees carried over micro-batches) and/or general (slow past 10k/window)")
    ap.add_argument("--within", type=float, default=600.0, help="window length in seconds (Q1: 600)")
    ap.add_argument("--slide", type=float, default=10.0, help="slide in seconds (Q1: 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--floor", action="store_true",
                    help="also run each engine with no-op kernels: the per-micro-batch cost around them")
    args = ap.parse_args(argv)
    text = query(args.within, args.slide)
    greta_stream.evaluate(text, generators.stock(2000, seed=1), engine="columnar")  # load the kernels
    print(f"{'engine':11} {'ev/window':>9} {'batch s':>7} {'events':>8} {'stream ev/s':>11} {'add ms':>7} "
          f"{'advance ms':>10} {'state KB':>8} {'trees MB':>8} {'peak MB':>7} {'batch ev/s':>10} {'batch MB':>8} "
          f"{'rows equal':>10}" + (f" {'floor ev/s':>10}" if args.floor else ""))
    for per in [int(x) for x in args.per_window.split(",")]:
        rate = rate_for(per, args.within)
        events = generators.stock(int(rate * args.within * args.windows), seed=args.seed, rate=rate)
        (batch_ev_s, batch_rows), batch_mb = forked(batch, text, events)
        for engine in args.engines.split(","):
            for batch_s in [float(x) for x in args.batch_s.split(",")]:
                r, peak = forked(run, engine, text, events, batch_s)
                floor = f" {forked(run, engine, text, events, batch_s, True)[0]['ev_s']:>10,.0f}" if args.floor else ""
                print(f"{engine:11} {per:>9,} {batch_s:>7g} {len(events):>8,} {r['ev_s']:>11,.0f} "
                      f"{r['add_ms']:>7.1f} {r['advance_ms']:>10.1f} {r['state'] / 1024:>8,.0f} "
                      f"{r['held'] / 2**20:>8.1f} {peak:>7.0f} {batch_ev_s:>10,.0f} {batch_mb:>8.0f} "
                      f"{str(r['rows'] == batch_rows):>10}{floor}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
