"""Cold start: the first micro-batch of `make run`'s job next to Spark's own first batch.

Each measurement runs in a fresh Python process (a cold JVM, fresh Python
workers), over the bundled sample (`samples/stock`, 2,000 events, one file)
on `local[2]` with the session settings of `greta_stream.spark.get_session`:

- **spark-native**: read the same JSON lines, parse them with `from_json`,
  `withWatermark` and `groupBy(window(10 minutes, 10 seconds), sector).count()`
  in append mode to the `noop` sink: the cheapest stateful windowed
  aggregation Spark offers on this input and these windows;
- **greta**: Q1 (`configs/q1_stock.greta`) through `trend_aggregates` to the
  `noop` sink: the operator `make run` runs, without its file sinks.

Printed per run: the session start, the first batch's trigger time (Spark's
`durationMs.triggerExecution`: planning, Python worker start, the batch) and
the whole process's wall time; then the medians and greta's first batch less
Spark's.

    .venv/bin/python benchmarks/bench_coldstart.py            # 3 runs each
    .venv/bin/python benchmarks/bench_coldstart.py --runs 5
    .venv/bin/python benchmarks/bench_coldstart.py --evaluate # also a fresh process's first `evaluate` of Q1
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from greta_stream.spark import get_session, trend_aggregates
from pyspark.sql import functions as F
spark = get_session("local[2]", app_name="greta-coldstart")
t1 = time.perf_counter()
kind, src, chk, query = sys.argv[1:5]
lines = spark.readStream.text(src)
if kind == "native":
    schema = "type string, time double, company long, sector long, price double"
    ev = lines.select(F.from_json("value", schema).alias("e")).select("e.*")
    ev = ev.withColumn("ts", F.timestamp_seconds("time")).withWatermark("ts", "10 seconds")
    out = ev.groupBy(F.window("ts", "10 minutes", "10 seconds"), "sector").count()
else:
    out = trend_aggregates(lines, open(query).read(), lateness_s=10).rows
q = out.writeStream.format("noop").option("checkpointLocation", chk).trigger(availableNow=True).start()
q.awaitTermination()
first = q.recentProgress[0]["durationMs"]["triggerExecution"]
print(json.dumps({"session_s": t1 - t0, "first_batch_ms": first, "batches": len(q.recentProgress)}))
spark.stop()
"""

EVALUATE = r"""
import json, time
t0 = time.perf_counter()
import greta_stream
events = [json.loads(line) for line in open("samples/stock/events.jsonl")]
rows = greta_stream.evaluate(open("configs/q1_stock.greta").read(), events)
print(json.dumps({"evaluate_s": time.perf_counter() - t0, "rows": len(rows), "engine": rows.engine}))
"""


def child(code: str, *args: str) -> dict[str, float]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--evaluate", action="store_true", help="also time a fresh process's first evaluate of Q1")
    args = ap.parse_args(argv)
    src, query = str(ROOT / "samples" / "stock"), str(ROOT / "configs" / "q1_stock.greta")
    firsts: dict[str, list[float]] = {"native": [], "greta": []}
    print(f"{'run':>3} {'engine':8} {'session s':>9} {'first batch ms':>14} {'process s':>9}")
    for run in range(args.runs):
        for kind in ("native", "greta") if run % 2 == 0 else ("greta", "native"):
            with tempfile.TemporaryDirectory(prefix="greta-coldstart-") as tmp:
                r = child(CHILD, kind, src, str(Path(tmp) / "chk"), query)
            firsts[kind].append(r["first_batch_ms"])
            print(f"{run:>3} {kind:8} {r['session_s']:>9.2f} {r['first_batch_ms']:>14,.0f} {r['process_s']:>9.2f}")
    native, greta = statistics.median(firsts["native"]), statistics.median(firsts["greta"])
    print(f"median first batch: spark-native {native:,.0f} ms, greta {greta:,.0f} ms, "
          f"greta - native {greta - native:,.0f} ms")
    if args.evaluate:
        for _ in range(args.runs):
            r = child(EVALUATE)
            print(f"first evaluate of Q1 in a fresh process: {r['evaluate_s']:.2f} s "
                  f"(imports included; {r['rows']} rows, {r['engine']} engine)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
