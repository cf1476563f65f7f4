"""How the engine scales with events per window, scan vs index.

Tables (each cell the median of ``--repeat`` runs, every run a fresh child
process so its peak RSS is its own; event generation is never timed):

1. **Events per window.** ``RETURN COUNT(*), AVG(S.price) PATTERN Stock S+
   WHERE S.price > NEXT(S).price WITHIN 1 day`` on one company (one
   partition, one window holding every event), for each size: the general
   engine with the index and with the scan, and the columnar engine; then
   the log-log slope of time vs events per window (least squares) of each.
   Counts are exact big integers.
2. **Selectivity.** The paper's variation ``S.price * X < NEXT(S).price``,
   X in 1, 1.05, 1.1, 1.15, 1.2, index vs scan at one size (general engine).
3. **Groups.** Q1 of ``configs/`` (10-minute windows sliding every 10 s,
   GROUP-BY sector) with 1, 10 and 100 companies at one total size (general
   engine, index vs scan).

Usage::

    python benchmarks/bench_scaling.py [--sizes 2000,4000,8000,16000] [--repeat 3]
        [--scan-max 8000] [--budget-s 300] [--seed 0]

``--scan-max`` caps the sizes the (quadratic) scan is run at.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

SLOPE_QUERY = "RETURN COUNT(*), AVG(S.price) PATTERN Stock S+ WHERE S.price > NEXT(S).price WITHIN 1 day"
SELECT_QUERY = "RETURN COUNT(*) PATTERN Stock S+ WHERE S.price * {x} < NEXT(S).price WITHIN 1 day"


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Generate, then time one `evaluate` call; report seconds, peak RSS, rows."""
    sys.path.insert(0, str(HERE))
    import generators

    import greta_stream
    from greta_stream.engine.plan import GraphPlan

    GraphPlan.indexing = spec["index"]
    GraphPlan.index_min_vertices = 48
    events = generators.stock(
        spec["n"], seed=spec["seed"], companies=spec["companies"], sectors=min(10, spec["companies"])
    )
    text = spec["query"]
    engine = spec.get("engine", "general")
    greta_stream.compile_query(text)
    if engine == "columnar":  # load the compiled kernels before the clock starts
        greta_stream.evaluate(text, events[:100], engine=engine)
    start = time.perf_counter()
    rows = greta_stream.evaluate(text, events, engine=engine)
    wall = time.perf_counter() - start
    counts = [r["count"] for r in rows]
    return {
        "wall_s": wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rows": len(rows),
        "max_count_digits": len(str(max(counts))) if counts else 0,
    }


def measure(spec: dict[str, Any], repeat: int, budget_s: float) -> dict[str, Any] | None:
    runs = []
    for _ in range(repeat):
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--one", json.dumps(spec)],
                capture_output=True, text=True, timeout=budget_s, check=True,
            )
        except subprocess.TimeoutExpired:
            return None
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "peak_rss_mb")}
    return {**runs[0], **best}


def slope(points: list[tuple[int, float]]) -> float:
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def cell(r: dict[str, Any] | None, n: int, missing: str = "> budget", width: int = 12) -> str:
    if r is None:
        return f"{missing:>{width}} {'':>8} {'':>8}"
    return f"{n / r['wall_s']:>{width},.0f} {r['wall_s']:>8.3f} {r['peak_rss_mb']:>8.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one")
    ap.add_argument("--sizes", default="2000,4000,8000,16000,32000,64000")
    ap.add_argument("--scan-max", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--select-size", type=int, default=4000)
    ap.add_argument("--groups-size", type=int, default=10000)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(child(json.loads(args.one))))
        return
    print(f"# bench_scaling: {' '.join(sys.argv)}  (python {sys.version.split()[0]}, median of {args.repeat})")
    sizes = [int(s) for s in args.sizes.split(",")]
    base = {"seed": args.seed, "companies": 1}

    print(f"\n## 1. events per window, one partition: {SLOPE_QUERY}\n")
    variants = {"index": {"index": True}, "scan": {"index": False}, "columnar": {"index": True, "engine": "columnar"}}
    head = " | ".join(f"{name + ' ev/s':>14} {'s':>8} {'RSS MB':>8}" for name in variants)
    print(f"{'events':>8} | {head} | count digits")
    pts: dict[str, list[tuple[int, float]]] = {name: [] for name in variants}
    for n in sizes:
        res: dict[str, dict[str, Any] | None] = {}
        for name, opts in variants.items():
            if name == "scan" and n > args.scan_max:
                res[name] = None
                continue
            res[name] = measure({**base, "n": n, "query": SLOPE_QUERY, **opts}, args.repeat, args.budget_s)
            if res[name]:
                pts[name].append((n, res[name]["wall_s"]))
        digits = next((r["max_count_digits"] for r in res.values() if r), "-")
        cells = [cell(res[name], n, "not run" if name == "scan" and n > args.scan_max else "> budget", 14)
                 for name in variants]
        print(f"{n:>8} | {' | '.join(cells)} | {digits}", flush=True)
    for name in variants:
        if len(pts[name]) >= 2:
            print(f"log-log slope of time vs events per window ({name}): {slope(pts[name]):.2f}")

    n = args.select_size
    print(f"\n## 2. selectivity: {SELECT_QUERY.format(x='X')}, {n} events\n")
    print(f"{'X':>5} | {'index ev/s':>12} {'s':>8} {'RSS MB':>8} | {'scan ev/s':>12} {'s':>8} {'RSS MB':>8}")
    for x in ("1", "1.05", "1.1", "1.15", "1.2"):
        q = SELECT_QUERY.format(x=x)
        r = {i: measure({**base, "n": n, "index": i, "query": q}, args.repeat, args.budget_s) for i in (True, False)}
        print(f"{x:>5} | {cell(r[True], n)} | {cell(r[False], n)}", flush=True)

    n = args.groups_size
    q1 = (ROOT / "configs" / "q1_stock.greta").read_text()
    print(f"\n## 3. groups: configs/q1_stock.greta (10 min windows, slide 10 s), {n} events\n")
    print(f"{'companies':>9} | {'index ev/s':>12} {'s':>8} {'RSS MB':>8} | {'scan ev/s':>12} {'s':>8} {'RSS MB':>8}")
    for companies in (1, 10, 100):
        spec = {**base, "companies": companies, "n": n, "query": q1}
        r = {i: measure({**spec, "index": i}, args.repeat, args.budget_s) for i in (True, False)}
        print(f"{companies:>9} | {cell(r[True], n)} | {cell(r[False], n)}", flush=True)


if __name__ == "__main__":
    main()
