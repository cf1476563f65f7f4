"""Many queries over one stream: shared evaluation against one stream (and one run) per query.

Workloads of 1, 10, 50 and 100 queries are drawn (seeded) from templates of
the paper's three queries, as the multi-query papers' experiments vary
them: window length and slide, edge predicate direction, a local predicate
constant, GROUP-BY and the aggregates. On the same events:

**Engine (no Spark)**, events/s over the whole workload:

- *separate*: `evaluate` of each query on its own (one preparation and one
  kernel run each: today's cost of N registered queries);
- *unshared*: one `MultiRunner` without sharing (events handed over once,
  every query on its own runner);
- *shared*: one `MultiRunner` with the planner (families of queries share one
  preparation and one kernel pass per window spec).

**Spark** (`--spark`, local[2], JSON-lines files, `once`), seconds end to end
for the workload (session up and warmed; planning, every micro-batch,
writing every query's rows):

- *stream per query*: each query its own Spark stream (`shared_streams: false`);
- *one stream*: one stream, every query on its own runner (`sharing: false`);
- *one stream, shared*: one stream with the planner.

Every query's rows are compared across the engine modes (a mismatch exits 1).
Numbers, not tests.

    .venv/bin/python benchmarks/bench_multiquery.py                        # engine only
    .venv/bin/python benchmarks/bench_multiquery.py --spark --sizes 1,10   # with Spark
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generators  # noqa: E402

from greta_stream import MultiRunner, QuerySet, RunSpec, evaluate  # noqa: E402
from greta_stream.runtime.plan import plan_units  # noqa: E402

WINDOWS = [("5 minutes", "10 seconds"), ("10 minutes", "10 seconds"), ("10 minutes", "1 minute"),
           ("20 minutes", "1 minute")]
GROUPS = ["sector", "company", "company, sector"]


def stock_query(rnd: random.Random) -> str:
    within, slide = rnd.choice(WINDOWS)
    op = rnd.choice([">", ">", "<"])
    local = rnd.choice(["", "", " AND S.price > 20"])
    group = rnd.choice(GROUPS)
    aggs = rnd.choice(["COUNT(*)", "COUNT(*), AVG(S.price)", "COUNT(*), MAX(S.price), AVG(S.price)",
                       "COUNT(*), SUM(S.volume)"])
    return (f"RETURN {group}, {aggs} PATTERN Stock S+ WHERE [company, sector] AND S.price {op} NEXT(S).price{local} "
            f"GROUP-BY {group} WITHIN {within} SLIDE {slide}")


def cluster_query(rnd: random.Random) -> str:
    within, slide = rnd.choice([("1 minute", "30 seconds"), ("2 minutes", "30 seconds"), ("2 minutes", "1 minute")])
    op = rnd.choice(["<", "<", ">"])
    local = rnd.choice(["", "", " AND M.load > 2"])
    group = rnd.choice(["mapper", "job", "mapper, job"])
    aggs = rnd.choice(["COUNT(*), SUM(M.cpu), AVG(M.load)", "COUNT(*), AVG(M.load)", "COUNT(*), MAX(M.load), SUM(M.cpu)",
                       "COUNT(*)"])
    return (f"RETURN {group}, {aggs} PATTERN SEQ(Start S, Measurement M+, End E) WHERE [mapper, job] AND "
            f"M.load {op} NEXT(M).load{local} GROUP-BY {group} WITHIN {within} SLIDE {slide}")


def traffic_query(rnd: random.Random) -> str:
    within, slide = rnd.choice([("5 minutes", "1 minute"), ("10 minutes", "1 minute"), ("10 minutes", "2 minutes"),
                                ("20 minutes", "2 minutes")])
    op = rnd.choice([">", ">", "<"])
    local = rnd.choice(["", "", " AND P.speed > 30"])
    aggs = rnd.choice(["COUNT(*), AVG(P.speed)", "COUNT(*)", "COUNT(*), MIN(P.speed), AVG(P.speed)",
                       "COUNT(*), MAX(P.speed)"])
    by, ret = rnd.choice([(" GROUP-BY segment", "segment, "), ("", "")])
    return (f"RETURN {ret}{aggs} PATTERN SEQ(NOT Accident A, Position P+) WHERE [P.vehicle, segment] AND "
            f"P.speed {op} NEXT(P).speed{local}{by} WITHIN {within} SLIDE {slide}")


STREAMS = {
    "stock": (stock_query, lambda n, seed: generators.stock(n, seed=seed, rate=16.7)),
    "cluster": (cluster_query, lambda n, seed: generators.cluster(n, seed=seed, rate=50.0)),
    "traffic": (traffic_query, lambda n, seed: generators.traffic(n, seed=seed)),
}


def workload(stream: str, n: int, seed: int) -> list[tuple[str, str]]:
    """n distinct queries of `stream`'s templates (the first one is the paper's query)."""
    rnd = random.Random(seed)
    make = STREAMS[stream][0]
    texts: list[str] = []
    for _ in range(100 * n):
        t = make(rnd)
        if t not in texts:
            texts.append(t)
        if len(texts) == n:
            break
    else:
        raise ValueError(f"the {stream} templates make fewer than {n} distinct queries")
    return [(f"q{i:03d}", t) for i, t in enumerate(texts)]


def _canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def engine_modes(queries: list[tuple[str, str]], events: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds of the three engine modes and whether every query's rows agree."""
    specs = [(name, RunSpec.create(text)) for name, text in queries]
    out: dict[str, Any] = {}
    t = time.perf_counter()
    separate = {name: _canon(evaluate(spec, events)) for name, spec in specs}
    out["separate"] = time.perf_counter() - t
    rows: dict[str, dict[str, list[str]]] = {}
    for mode, sharing in (("unshared", False), ("shared", True)):
        qs = QuerySet.of(specs, sharing=sharing)
        t = time.perf_counter()
        multi = MultiRunner(qs)
        multi.add_many(events)
        got = multi.finish()
        out[mode] = time.perf_counter() - t
        by: dict[str, list[dict[str, Any]]] = {n: [] for n, _ in specs}
        for name, row in got:
            by[name].append(row)
        rows[mode] = {n: _canon(r) for n, r in by.items()}
        if mode == "shared":
            plan = plan_units(qs)
            out["units"] = len(plan.units)
            out["families"] = sum(1 for u in plan.units if hasattr(u, "passes"))
            out["passes"] = sum(len(u.passes) if hasattr(u, "passes") else 1 for u in plan.units)
    out["same"] = all(rows[m][n] == separate[n] for m in rows for n, _ in specs)
    return out


def spark_modes(queries: list[tuple[str, str]], events: list[dict[str, Any]], spark: Any, files: int,
                modes: list[str], budget_s: float) -> dict[str, float | None]:
    from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
    from greta_stream.spark.pipeline import run

    root = Path(tempfile.mkdtemp(prefix="bench-mq-"))
    try:
        src = root / "in"
        src.mkdir()
        ordered = sorted(events, key=lambda e: e["time"])
        size = -(-len(ordered) // files)
        for i in range(files):
            path = src / f"part-{i:03d}.jsonl"
            path.write_text("".join(json.dumps(e) + "\n" for e in ordered[i * size:(i + 1) * size]))
            stamp = time.time() - 3600 + i
            import os

            os.utime(path, (stamp, stamp))
        out: dict[str, float | None] = {}
        for mode in modes:
            shared_streams, sharing = {"stream per query": (False, False), "one stream": (True, False),
                                       "one stream, shared": (True, True)}[mode]
            cfg = PipelineConfig(
                source=SourceConfig(format="jsonl", path=str(src), max_files_per_trigger=1),
                queries=[QueryConfig(name=n, text=t, sinks=[SinkConfig(format="jsonl", path=str(root / mode / "out" / n))])
                         for n, t in queries],
                checkpoint=str(root / mode / "chk"), lateness_s=60, once=True, shards=4,
                shared_streams=shared_streams, sharing=sharing)
            t = time.perf_counter()
            run(cfg, spark=spark, echo=lambda line: None)
            out[mode] = time.perf_counter() - t
            if out[mode] > budget_s:
                break
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="stock,cluster,traffic")
    ap.add_argument("--sizes", default="1,10,50,100")
    ap.add_argument("--events", type=int, default=20_000, help="events per stream")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spark", action="store_true", help="also run the Spark pipeline modes (stock only)")
    ap.add_argument("--spark-events", type=int, default=40_000, help="stock events for the Spark runs")
    ap.add_argument("--spark-files", type=int, default=4)
    ap.add_argument("--budget-s", type=float, default=900.0, help="a Spark mode slower than this is not run larger")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"# bench_multiquery: {' '.join(sys.argv[1:]) or '(defaults)'}")
    ok = True
    print("\n## Engine (no Spark): events/s over the whole workload, gain over `separate`")
    print(f"{'stream':8} {'queries':>7} {'units':>5} {'families':>8} {'passes':>6} {'separate':>10} {'unshared':>10} "
          f"{'shared':>10} {'unshared x':>10} {'shared x':>8} same")
    for stream in args.streams.split(","):
        events = STREAMS[stream][1](args.events, args.seed)
        RunSpec.create(workload(stream, 1, args.seed)[0][1])
        evaluate(workload(stream, 1, args.seed)[0][1], events[:3000])  # load the kernels
        for n in sizes:
            r = engine_modes(workload(stream, n, args.seed), events)
            ok &= r["same"]
            e = len(events)
            print(f"{stream:8} {n:>7} {r['units']:>5} {r['families']:>8} {r['passes']:>6} {e / r['separate']:>10,.0f} "
                  f"{e / r['unshared']:>10,.0f} {e / r['shared']:>10,.0f} {r['separate'] / r['unshared']:>10.2f} "
                  f"{r['separate'] / r['shared']:>8.2f} {'yes' if r['same'] else 'MISMATCH'}", flush=True)
    if args.spark:
        from greta_stream.spark.session import get_session

        spark = get_session("local[2]")
        events = STREAMS["stock"][1](args.spark_events, args.seed)
        spark_modes(workload("stock", 1, args.seed), events[:2000], spark, 1, ["one stream, shared"], 1e9)  # warm-up
        modes = ["stream per query", "one stream", "one stream, shared"]
        print(f"\n## Spark (local[2], {args.spark_events:,} stock events in {args.spark_files} files): seconds, "
              "gain over one stream per query")
        print(f"{'queries':>7} " + " ".join(f"{m:>20}" for m in modes) + f" {'shared x':>9} {'1 query x':>9}")
        alone: float | None = None
        skip: set[str] = set()
        for n in sizes:
            r = spark_modes(workload("stock", n, args.seed), events, spark, args.spark_files,
                            [m for m in modes if m not in skip], args.budget_s)
            skip |= {m for m, s in r.items() if s is not None and s > args.budget_s}
            alone = alone if alone is not None else r.get("one stream, shared")
            cells = " ".join(f"{r[m]:>20.1f}" if r.get(m) is not None else f"{'> budget':>20}" for m in modes)
            gain = (r["stream per query"] / r["one stream, shared"]) if r.get("stream per query") and r.get(
                "one stream, shared") else None
            vs_one = r["one stream, shared"] / alone if alone and r.get("one stream, shared") else None
            print(f"{n:>7} {cells} {gain if gain is None else f'{gain:9.2f}'} "
                  f"{vs_one if vs_one is None else f'{vs_one:9.2f}'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
