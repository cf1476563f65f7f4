"""CET benchmark: trends/s extracted by greta-stream vs a naive depth-first enumeration.

Two queries of the CET paper's kind, each over `all` and `complete` trends,
tumbling and sliding windows:

- **kiting**: check-kiting chains, `PATTERN Check C+ WHERE C.dest =
  NEXT(C).src` (CET paper section 1), over random checks between a few banks;
- **downtrend**: stock down-trends, `PATTERN Stock S+ WHERE [company] AND
  S.price > NEXT(S).price GROUP-BY company` (Q1), over the seeded stock
  stream of `generators.py`.

*ours* is `TrendExtractor` end to end (validation, CET graph, graphlet cache,
stitching, records). *naive* is the textbook depth-first enumeration that
builds no graph: per window (no sharing between sliding windows) and per
company, it walks the window's events in time order, checks the edge
predicate on every step, and for `complete` trends keeps a trend only if no
event can be put before it, after it, or (via a detour, searched depth-first)
between two of its events. Both must report the same trends per window
(a fingerprint is compared; `MISMATCH` sets the exit status to 1).

Usage::

    .venv/bin/python benchmarks/bench_cet.py [--events 400] [--seed 0] [--budget-s 60]
    .venv/bin/python benchmarks/bench_cet.py --scale [--sizes 10000,50000] [--caps 1000,1000000]
        [--graphs indexed,edges] [--workloads kiting,rising] [--threads 1,2] [--budget-s 60]

`--scale` measures one big window per run (`cet_scale.py`): graph
construction alone, then complete and all trends under each cap, in a fresh
process each, with the peak RSS.

Prints one line per (query, trends, window): trends, seconds and trends/s of
both, and the speedup. Numbers, not tests.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cet_scale  # noqa: E402
import generators  # noqa: E402

from greta_stream import compile_query  # noqa: E402
from greta_stream.cet import CetConfig, TrendExtractor  # noqa: E402

Edge = Callable[[dict[str, Any], dict[str, Any]], bool]


class Budget(Exception):
    """The naive run took longer than its budget."""


# ---------------------------------------------------------------- workloads


def kiting_events(n: int, seed: int, banks: int = 20) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        src = rnd.randrange(banks)
        dest = (src + rnd.randrange(1, banks)) % banks
        out.append({"type": "Check", "time": i, "id": i, "src": src, "dest": dest, "company": 0})
    return out


def stock_events(n: int, seed: int) -> list[dict[str, Any]]:
    return generators.stock(n, seed=seed, companies=4, sectors=2, rate=1.0)


WORKLOADS: dict[str, tuple[str, Callable[[int, int], list[dict[str, Any]]], Edge]] = {
    "kiting": ("RETURN TRENDS PATTERN Check C+ WHERE C.dest = NEXT(C).src {window}",
               kiting_events, lambda x, y: x["dest"] == y["src"]),
    "downtrend": ("RETURN TRENDS PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price "
                  "GROUP-BY company {window}", stock_events, lambda x, y: x["price"] > y["price"]),
}


# ---------------------------------------------------------------- naive DFS


def naive(events: list[dict[str, Any]], edge: Edge, within: float, slide: float, complete: bool,
          deadline: float) -> Iterator[tuple[float, Any, tuple[Any, ...]]]:
    """(window start, company, event ids) of every trend, window by window."""
    by_company: dict[Any, list[dict[str, Any]]] = {}
    for e in sorted(events, key=lambda e: e["time"]):
        by_company.setdefault(e["company"], []).append(e)
    last = max(e["time"] for e in events)
    first = min(e["time"] for e in events)
    k = int((first - within) // slide) + 1
    while k * slide <= last:
        lo, hi = k * slide, k * slide + within
        for company in sorted(by_company):
            evs = [e for e in by_company[company] if lo <= e["time"] < hi]
            for ids in _window_trends(evs, edge, complete, deadline):
                yield lo, company, ids
        k += 1


def _window_trends(evs: list[dict[str, Any]], edge: Edge, complete: bool, deadline: float) -> Iterator[tuple]:
    n = len(evs)

    def ok(i: int, j: int) -> bool:
        return evs[i]["time"] < evs[j]["time"] and edge(evs[i], evs[j])

    def detour(i: int, j: int) -> bool:  # a path i -> ... -> j through at least one event
        stack, seen = [u for u in range(i + 1, j) if ok(i, u)], set()
        while stack:
            u = stack.pop()
            if u in seen:
                continue
            seen.add(u)
            if ok(u, j):
                return True
            stack.extend(w for w in range(u + 1, j) if ok(u, w))
        return False

    for s in range(n):
        if complete and any(ok(u, s) for u in range(s)):
            continue
        if complete and not any(ok(s, w) for w in range(s + 1, n)):
            yield (evs[s]["id"],)
            continue
        path = [s]
        stack = [iter(range(s + 1, n))]
        while stack:
            if time.monotonic() > deadline:
                raise Budget
            j = next(stack[-1], None)
            if j is None:
                stack.pop()
                path.pop()
                continue
            x = path[-1]
            if not ok(x, j) or (complete and detour(x, j)):
                continue
            path.append(j)
            stack.append(iter(range(j + 1, n)))
            if not complete or not any(ok(j, w) for w in range(j + 1, n)):
                yield tuple(evs[i]["id"] for i in path)
    # `all`: every longer path is emitted when it is extended (above), single events here
    if not complete:
        yield from ((e["id"],) for e in evs)


# ---------------------------------------------------------------- measuring


def fingerprint(items: Iterator[tuple[Any, ...]]) -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    for digest in sorted(hashlib.sha256(repr(x).encode()).digest() for x in items):
        h.update(digest)
        n += 1
    return n, h.hexdigest()[:12]


def run_ours(text: str, events: list[dict[str, Any]], trends: str) -> tuple[float, list[tuple]]:
    cq = compile_query(text)  # parsing is not timed (nor is anything else query-only)
    t0 = time.perf_counter()
    ex = TrendExtractor(cq, config=CetConfig(trends=trends))
    ex.add_many(events)
    records = ex.finish()
    elapsed = time.perf_counter() - t0
    return elapsed, [(r["window_start"], r.get("company", 0), tuple(r["trend"])) for r in records]


def run_naive(events: list[dict[str, Any]], edge: Edge, within: float, slide: float, trends: str,
              budget_s: float) -> tuple[float | None, list[tuple]]:
    t0 = time.perf_counter()
    try:
        out = list(naive(events, edge, within, slide, trends == "complete", time.monotonic() + budget_s))
    except Budget:
        return None, []
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-s", type=float, default=60.0, help="seconds the naive run may take")
    ap.add_argument("--scale", action="store_true", help="one big window per run (cet_scale.py)")
    ap.add_argument("--sizes", default="10000,20000,50000,100000,500000", help="--scale: events per window")
    ap.add_argument("--caps", default="1000,1000000", help="--scale: max_trends values")
    ap.add_argument("--graphs", default="indexed,edges", help="--scale: indexed and/or edges")
    ap.add_argument("--workloads", default="kiting,rising", help="--scale: kiting and/or rising")
    ap.add_argument("--threads", default="1,2", help="--scale: CetConfig.threads of complete trends")
    args = ap.parse_args(argv)
    if args.scale:
        print(f"# bench_cet --scale: {platform.python_implementation()} {platform.python_version()}, "
              f"command: {' '.join(sys.argv)}")
        cet_scale.run([int(x) for x in args.sizes.split(",")], [int(x) for x in args.caps.split(",")],
                      args.graphs.split(","), args.workloads.split(","), args.budget_s, args.seed,
                      [int(x) for x in args.threads.split(",")])
        return 0
    print(f"# bench_cet: {platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
          f"command: {' '.join(sys.argv)}")
    windows = {"kiting": [(100, 100), (100, 20)], "downtrend": [(60, 60), (60, 10)]}
    print(f"{'query':10} {'trends':9} {'window':16} {'trends':>9} {'ours s':>8} {'ours tr/s':>11} "
          f"{'naive s':>8} {'naive tr/s':>11} {'speedup':>8}  check")
    status = 0
    for name, (template, make, edge) in WORKLOADS.items():
        events = make(args.events, args.seed)
        for within, slide in windows[name]:
            window = f"WITHIN {within} s SLIDE {slide} s"
            text = template.format(window=window)
            for trends in ("all", "complete"):
                ours_s, ours = run_ours(text, events, trends)
                naive_s, base = run_naive(events, edge, within, slide, trends, args.budget_s)
                n, fp = fingerprint(iter(ours))
                if naive_s is None:
                    check, naive_cols = "naive > budget", f"{'>' + str(int(args.budget_s)):>8} {'-':>11} {'-':>8}"
                else:
                    same = fingerprint(iter(base)) == (n, fp)
                    check = "ok" if same else "MISMATCH"
                    status |= not same
                    naive_cols = f"{naive_s:8.2f} {len(base) / naive_s:11,.0f} {naive_s / ours_s:7.1f}x"
                print(f"{name:10} {trends:9} {f'{within}s/{slide}s':16} {n:9,} {ours_s:8.2f} {n / ours_s:11,.0f} "
                      f"{naive_cols}  {check}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
