"""Distributed CET extraction: one big check-kiting window, in the operator vs as a Spark job.

The workload of `bench_cet.py --scale` (`cet_scale.py`): `RETURN TRENDS
PATTERN Check C+ WHERE C.src = NEXT(C).dest WITHIN 2 days`, one check per
second between 200 accounts, every size one window, complete trends.

For each size and cap:

- **operator**: what a shard does without `distribute_over`: a fresh
  process builds the graph and extracts the window (`TrendExtractor`), with
  its seconds and peak RSS;
- **defer**: what a shard does with `distribute_over = 0`: the same graph,
  the counts, the pieces and the deferred window (pickled), no enumeration;
- **job**: what the batch writer does with it: `cet_distributed.expand_outputs`
  over the standalone cluster (2 workers of 1 core, started here unless
  `--master` is given), `--tasks` ranges of pieces, on warm Python workers
  (a warm-up job imports greta-stream in them first); then a probe job with
  the same ranges reports each task's peak RSS (the worker's high-water
  mark, reset at the task's start through /proc/self/clear_refs).

The job's rows must equal the operator's records (`MISMATCH` otherwise).

Usage::

    .venv/bin/python benchmarks/bench_cet_spark.py [--sizes 10000,30000] [--caps 1000,100000]
        [--tasks 4] [--master spark://...] [--budget-s 300]

Numbers, not tests. On 2 cores the job is not faster than the operator:
what it buys is that no single Python worker holds a window's trends, and
that the per-task memory is one window's graph plus its range's rows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import peak_rss_bytes  # noqa: E402
from cet_scale import events, query  # noqa: E402

Out = namedtuple("Out", ["query", "kind", "window_start", "window_end", "grp", "payload", "reason"])


def one(n: int, cap: int | None, defer: bool, out: str) -> dict[str, Any]:
    """Child side: the shard's work for one window, with or without deferral."""
    from greta_stream.cet import CetConfig, TrendExtractor
    from greta_stream.cet.distributed import DEFERRED, to_text
    from greta_stream.connectors.jsonl import dumps_payload

    evs = events("kiting", n)
    t0 = time.perf_counter()
    ex = TrendExtractor(query("kiting", n), config=CetConfig(max_trends=cap, distribute_over=0 if defer else None))
    ex.add_many(evs)
    rows = ex.finish()
    seconds = time.perf_counter() - t0
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps({"deferred": to_text(r[DEFERRED])} if DEFERRED in r else {"row": dumps_payload(r)}))
            f.write("\n")
    total = rows[0][DEFERRED].total if rows and DEFERRED in rows[0] else (rows[0]["total"] if rows else 0)
    return {"seconds": seconds, "rows": len(rows), "total": total, "rss": peak_rss_bytes()}


def child(n: int, cap: int | None, defer: bool, out: str, budget_s: float) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--one", json.dumps([n, cap, defer, out])]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _probe(shared: Any, items: Any) -> Any:
    """A task of the probe job: extract its range, report its rows and its worker's peak RSS."""
    from greta_stream.cet.distributed import extract, from_text

    for a, b, share in items:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the high-water mark (VmHWM) to the current RSS
        recs = extract(from_text(shared.value), a, b, share)
        yield len(recs), _vm_hwm()


def _vm_hwm() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _warm(x: int) -> int:
    import greta_stream.cet.distributed  # noqa: F401

    return x


def job(spark: Any, path: str, tasks: int) -> dict[str, Any]:
    """Driver side: the deferred window's rows through `expand_outputs`; then the probe job."""
    from functools import partial

    from greta_stream.cet.distributed import from_text, split
    from greta_stream.spark.cet_distributed import expand_outputs

    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    texts = [x["deferred"] for x in lines if "deferred" in x]
    outs = [Out("q", "deferred", 0.0, 172800.0, "[]", t, None) for t in texts]
    t0 = time.perf_counter()
    rows = expand_outputs(spark, outs, tasks)
    seconds = time.perf_counter() - t0
    sc = spark.sparkContext
    d = from_text(texts[0])
    ranges = split(d.counts, d.take, tasks)
    shared = sc.broadcast(texts[0])
    probe = sc.parallelize(ranges, len(ranges)).mapPartitions(partial(_probe, shared)).collect()
    shared.unpersist()
    return {"seconds": seconds, "rows": [r.payload for r in rows], "tasks": len(ranges),
            "task_rss": max(rss for _, rss in probe), "deferred_mb": sum(map(len, texts)) / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,30000")
    ap.add_argument("--caps", default="1000,100000")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--master", default=None)
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
        return
    from greta_stream.spark.session import get_session
    from greta_stream.testing.cluster import StandaloneCluster

    cluster = None if args.master else StandaloneCluster(workers=2).start()
    master = args.master or cluster.url  # type: ignore[union-attr]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_session(master, app_name="bench-cet-spark", shuffle_partitions=2)
    # executors and Python workers up, greta-stream imported in them, before any timing
    spark.sparkContext.parallelize(range(8), 8).map(_warm).collect()
    mb = 1 << 20
    try:
        print(f"master {master}, {args.tasks} ranges per window; kiting, complete trends, one window")
        print(f"{'events':>7} {'cap':>8} {'total':>10} {'rows':>7} | {'operator s':>10} {'RSS MB':>7} | "
              f"{'defer s':>7} {'RSS MB':>7} {'window MB':>9} | {'tasks':>5} {'job s':>6} {'task RSS MB':>11} | check")
        with tempfile.TemporaryDirectory() as tmp:
            for n in map(int, args.sizes.split(",")):
                for cap in [None if c in ("none", "") else int(c) for c in args.caps.split(",")]:
                    plain, deferred = f"{tmp}/plain-{n}-{cap}", f"{tmp}/defer-{n}-{cap}"
                    a = child(n, cap, False, plain, args.budget_s)
                    b = child(n, cap, True, deferred, args.budget_s)
                    if a is None or b is None:
                        print(f"{n:>7} {cap!s:>8} over the budget of {args.budget_s:.0f} s")
                        continue
                    j = job(spark, deferred, args.tasks)
                    want = [json.loads(x)["row"] for x in Path(plain).read_text().splitlines()]
                    check = "ok" if j["rows"] == want else "MISMATCH"
                    print(f"{n:>7} {cap!s:>8} {'1e' + str(len(str(a['total'])) - 1):>10} {len(want):>7} | {a['seconds']:>10.2f} "
                          f"{a['rss'] / mb:>7.0f} | {b['seconds']:>7.2f} {b['rss'] / mb:>7.0f} "
                          f"{j['deferred_mb']:>9.2f} | {j['tasks']:>5} {j['seconds']:>6.2f} "
                          f"{j['task_rss'] / mb:>11.0f} | {check}",
                          flush=True)
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
