"""`bench_cet.py --scale`: one big window per run, the issue-17 workloads.

- **kiting**: check-kiting chains `PATTERN Check C+ WHERE C.src = NEXT(C).dest
  WITHIN 2 days` over `accounts` accounts, one check per second (equality
  edge: a check continues a chain when its payer was paid by the previous one);
- **rising**: rising prices `PATTERN Stock S+ WHERE S.price < NEXT(S).price
  WITHIN 2 days`, one quote per second (comparison edge).

Every size fits one window (2 days, or as many days as the events span). Each measurement is a fresh child process (this
script with `--one`), killed past `--budget-s`; it reports seconds, the
records, the exact total and the peak RSS. `graph` is the CET graph alone
(`TrendGraph` construction, no extraction); `indexed` the current graph
(attribute-indexed: range edges for kiting, order edges for rising) and
`edges` the event-to-event graph (`ExtractionPlan.indexing = False`). `threads` is
`CetConfig.threads`: the reduction sweeps of range edges and the walk over
anchor slices of order edges.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from typing import Any

from benchlib import peak_rss_bytes, stop

QUERIES = {
    "kiting": "RETURN TRENDS PATTERN Check C+ WHERE C.src = NEXT(C).dest WITHIN {days} days",
    "rising": "RETURN TRENDS PATTERN Stock S+ WHERE S.price < NEXT(S).price WITHIN {days} days",
}


def query(workload: str, n: int) -> str:
    """The workload's query with a window of 2 days, longer if n seconds do not fit in one."""
    return QUERIES[workload].format(days=max(2, -(-n // 86400)))


def events(workload: str, n: int, seed: int = 0, accounts: int = 200) -> list[dict[str, Any]]:
    """`n` seeded events one second apart (kiting: checks between accounts; rising: quotes)."""
    rnd = random.Random(seed)
    out = []
    if workload == "kiting":
        for i in range(n):
            src = rnd.randrange(accounts)
            dest = (src + rnd.randrange(1, accounts)) % accounts
            out.append({"type": "Check", "time": i, "id": i, "src": src, "dest": dest})
    else:
        price = 100.0
        for i in range(n):
            price = max(1.0, price + rnd.gauss(0, 1))
            out.append({"type": "Stock", "time": i, "id": i, "price": round(price, 2)})
    return out


def one(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in this process (the child side)."""
    from greta_stream.cet import CetConfig, TrendExtractor
    from greta_stream.cet.plan import ExtractionPlan

    ExtractionPlan.indexing = spec["graph"] != "edges"
    evs = events(spec["workload"], spec["n"], spec["seed"])
    text = query(spec["workload"], spec["n"])
    cap = spec["cap"]
    t0, c0 = time.perf_counter(), time.process_time()
    if spec["mode"] == "graph":
        records, total = graph_only(text, evs), 0
    else:
        ex = TrendExtractor(text, config=CetConfig(trends=spec["mode"], max_trends=cap, threads=spec["threads"]))
        ex.add_many(evs)
        rows = ex.finish()
        records, total = len(rows), (rows[0]["total"] if rows else 0)
        assert len({r["window_start"] for r in rows}) <= 1, "one window"
    return {"s": time.perf_counter() - t0, "cpu": time.process_time() - c0, "records": records, "total": total,
            "peak_mb": peak_rss_bytes() / 2**20}


def graph_only(text: str, evs: list[dict[str, Any]]) -> int:
    """Build the CET graph of all events (one run, one window); return its vertices."""
    from greta_stream.cet.extractor import TrendExtractor

    ex = TrendExtractor(text)
    ex.add_many(evs)
    ex._plan()  # noqa: SLF001 - the plan is made on the first event
    ex.advance(len(evs))  # processes every event; the window is still open
    return sum(len(g.verts) for p in ex.partitions.values() for g in p.runs.values())


def measure(spec: dict[str, Any], budget_s: float) -> dict[str, Any] | None:
    proc = subprocess.Popen([sys.executable, __file__, "--one", json.dumps(spec)], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=budget_s)
    except subprocess.TimeoutExpired:
        return None
    finally:
        stop(proc)
    return json.loads(out.strip().splitlines()[-1]) if proc.returncode == 0 else {"error": proc.returncode}


def run(sizes: list[int], caps: list[int | None], graphs: list[str], workloads: list[str], budget_s: float,
        seed: int, threads: list[int], big_cap_events: int = 50_000) -> None:
    """Print the table; caps above 1,000 run up to `big_cap_events` events only (a million
    long trends held as records take gigabytes)."""
    print(f"{'workload':8} {'graph':8} {'mode':9} {'thr':>3} {'cap':>9} {'events':>8} {'seconds':>9} {'cpu s':>7} {'records':>8} "
          f"{'total':>14} {'peak MB':>8}", flush=True)
    for workload in workloads:
        for graph in graphs:
            runs = [("graph", None, 1)] + [("complete", c, t) for c in caps for t in threads]
            for mode, cap, thr in runs + [("all", c, t) for c in caps for t in threads]:
                for n in sizes:
                    if cap is not None and cap > 1000 and n > big_cap_events:
                        continue
                    spec = {"workload": workload, "graph": graph, "mode": mode, "cap": cap, "n": n, "seed": seed,
                            "threads": thr}
                    r = measure(spec, budget_s)
                    cells = (f"> {budget_s:.0f}", "-", "-", "-", "-") if r is None else (
                        ("error", "-", "-", "-", "-") if "error" in r else
                        (f"{r['s']:.2f}", f"{r['cpu']:.2f}", str(r["records"]), _big(r["total"]), f"{r['peak_mb']:.0f}"))
                    print(f"{workload:8} {graph:8} {mode:9} {thr:>3} {cap or '-':>9} {n:>8} {cells[0]:>9} {cells[1]:>7} "
                          f"{cells[2]:>8} {cells[3]:>14} {cells[4]:>8}", flush=True)
                    if r is None:
                        break  # larger sizes would blow the budget too


def _big(x: int) -> str:
    return str(x) if x < 10**12 else f"~10^{len(str(x)) - 1}"


if __name__ == "__main__" and sys.argv[1:2] == ["--one"]:
    print(json.dumps(one(json.loads(sys.argv[2]))))
