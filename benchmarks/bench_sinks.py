"""Write cost per micro-batch of the Delta sink against the Parquet sink (and JSON lines as a reference).

The same seeded stock stream (``generators.stock``) is written as
``--files`` JSON-lines files (distinct modification times, in event order)
and read with ``max_files_per_trigger=1``, so every micro-batch holds one
file. The real pipeline (``greta_stream.spark.pipeline.run``, ``once``, on
``local[2]``, one Spark session for every run) runs Q1 of
``configs/q1_stock.greta`` grouped by ``company, sector`` (``--group-by``)
over it, once per sink format (``--formats``), each run with a fresh
checkpoint and output folder. With 10-minute windows sliding every 10 s,
each batch closes many windows and writes one row per (window, group):
hundreds to thousands of rows per batch.

In this process only, ``JsonlSink.write``, ``ParquetSink.write`` and
``DeltaSink.write`` are wrapped to time each call (``time.perf_counter``)
and count the rows it was handed. That is the sink's whole cost for a batch:
for Delta, building the typed DataFrame from the rows, the Spark write job
and the commit to ``_delta_log``; for Parquet, parsing the payloads, a
pandas frame and ``to_parquet``; for JSON lines, one fsynced file. Calls
with no rows (which write nothing) are left out.

Columns, per format:

- ``batches``: write calls that carried rows; ``rows/batch``: their mean rows;
- ``first ms``: the first such call (Delta's loads its classes and creates the table);
- ``median ms``, ``mean ms``, ``max ms``: over the other calls (the steady cost);
- ``us/row``: their summed seconds over their summed rows;
- ``write s``: every call's seconds, first included; ``run s``: the whole run
  (planning, every micro-batch, the sinks); ``write %``: the share of the run
  spent in the sink;
- ``disk KB``, ``files``: bytes and files under the output folder when the
  run ends (Delta: its data files, ``_delta_log`` and Hadoop's ``.crc`` files).

Spark needs ~10 s to start and the pipeline's first run plans the stream and
starts the Python workers: a short warm-up run on a few files of the same
input, with a JSON-lines sink (not reported), goes first (``--no-warmup``
skips it). The sinks themselves are not warmed up, so ``first ms`` is each
sink's cold first write. The formats run one after the other in the order
given; every run writes the same rows (the script warns when they differ).
``--conf KEY=VALUE`` sets a Spark setting of the session, e.g.
``spark.databricks.delta.snapshotPartitions=2`` (Delta rebuilds the table's
snapshot in that many tasks, default 50, at every commit).

    .venv/bin/python benchmarks/bench_sinks.py                        # defaults (~4-5 min)
    .venv/bin/python benchmarks/bench_sinks.py --events 4000 --files 4 --no-warmup   # quick check
    .venv/bin/python benchmarks/bench_sinks.py --formats delta,parquet --json out/sinks.json
    .venv/bin/python benchmarks/bench_sinks.py --formats delta --conf spark.databricks.delta.snapshotPartitions=2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import generators  # noqa: E402

FORMATS = ("jsonl", "parquet", "delta")
QUERY = """RETURN {group}, COUNT(*), AVG(S.price)
PATTERN Stock S+
WHERE [company, sector] AND S.price > NEXT(S).price
GROUP-BY {group}
WITHIN {within} SLIDE {slide}
"""


class WriteLog:
    """Each wrapped sink call: (format, batch id, rows, seconds)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, float]] = []

    def install(self) -> None:
        """Wrap the sinks' `write` methods (in this process only)."""
        from greta_stream.connectors.sinks import JsonlSink, ParquetSink
        from greta_stream.spark.delta import DeltaSink

        for fmt, cls in (("jsonl", JsonlSink), ("parquet", ParquetSink)):
            original = cls.write

            def timed_file(sink: Any, batch_id: int, payloads: list[str], _f: Any = original,
                           _fmt: str = fmt) -> None:
                t = time.perf_counter()
                try:
                    _f(sink, batch_id, payloads)
                finally:
                    self.calls.append((_fmt, batch_id, len(payloads), time.perf_counter() - t))

            cls.write = timed_file  # type: ignore[method-assign]
        delta_write = DeltaSink.write

        def timed_delta(sink: Any, spark: Any, batch_id: int, outputs: list[Any]) -> None:
            t = time.perf_counter()
            try:
                delta_write(sink, spark, batch_id, outputs)
            finally:
                self.calls.append(("delta", batch_id, len(outputs), time.perf_counter() - t))

        DeltaSink.write = timed_delta  # type: ignore[method-assign]


def write_input(folder: Path, events: list[dict[str, Any]], files: int) -> None:
    """`events` (in time order) as `files` JSON-lines files, modification times in file order."""
    folder.mkdir(parents=True)
    size = -(-len(events) // files)
    base = time.time() - 86_400
    for i in range(files):
        path = folder / f"part-{i:05d}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events[i * size:(i + 1) * size]))
        os.utime(path, (base + i, base + i))


def folder_size(folder: Path) -> tuple[int, int]:
    """Bytes and number of the files under `folder`."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def run_format(spark: Any, fmt: str, text: str, source: Path, work: Path, watermark_s: float,
               log: WriteLog) -> dict[str, Any]:
    """One pipeline run writing to a `fmt` sink; its timed write calls and the output's size."""
    from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
    from greta_stream.spark.pipeline import run

    out = work / "out"
    cfg = PipelineConfig(
        source=SourceConfig(format="jsonl", path=str(source), max_files_per_trigger=1),
        queries=[QueryConfig(name="q1", text=text, sinks=[SinkConfig(format=fmt, path=str(out))])],
        checkpoint=str(work / "chk"), lateness_s=watermark_s, once=True)
    start = len(log.calls)
    t = time.perf_counter()
    got = run(cfg, spark=spark, echo=lambda line: None)
    wall = time.perf_counter() - t
    if got["q1"].get("failed"):
        raise RuntimeError(f"{fmt} run failed: {got['q1']['failed']}")
    calls = [c for c in log.calls[start:] if c[0] == fmt]
    size, files = folder_size(out) if out.exists() else (0, 0)
    return {"format": fmt, "run_s": wall, "rows": got["q1"]["rows"], "dead_letters": got["q1"]["dead_letters"],
            "calls": [{"batch": b, "rows": n, "s": s} for _, b, n, s in calls], "bytes": size, "files": files}


def summarize(r: dict[str, Any]) -> dict[str, Any]:
    """The table's figures of one run (`run_format`)."""
    calls = [c for c in r["calls"] if c["rows"] > 0]
    first, rest = (calls[0], calls[1:]) if calls else (None, [])
    ms = [c["s"] * 1000 for c in rest]
    rest_rows = sum(c["rows"] for c in rest)
    write_s = sum(c["s"] for c in calls)
    return {
        "batches": len(calls),
        "rows_per_batch": statistics.fmean(c["rows"] for c in calls) if calls else 0.0,
        "first_ms": first["s"] * 1000 if first else None,
        "median_ms": statistics.median(ms) if ms else None,
        "mean_ms": statistics.fmean(ms) if ms else None,
        "max_ms": max(ms) if ms else None,
        "us_per_row": sum(c["s"] for c in rest) * 1e6 / rest_rows if rest_rows else None,
        "write_s": write_s,
        "write_share": write_s / r["run_s"] if r["run_s"] else None,
    }


def cell(value: float | None, width: int, spec: str = ",.1f") -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--formats", default=",".join(FORMATS), help="sink formats, run in this order (comma list)")
    ap.add_argument("--events", type=int, default=30_000, help="stock events in all")
    ap.add_argument("--files", type=int, default=10, help="input files, one micro-batch each")
    ap.add_argument("--companies", type=int, default=50)
    ap.add_argument("--sectors", type=int, default=10)
    ap.add_argument("--rate", type=float, default=10.0, help="events per second of event time")
    ap.add_argument("--group-by", default="company, sector", help="the query's GROUP-BY (and RETURN) attributes")
    ap.add_argument("--within", default="10 minutes")
    ap.add_argument("--slide", default="10 seconds")
    ap.add_argument("--lateness", type=float, default=10.0, help="allowed lateness in seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-warmup", action="store_true", help="skip the warm-up run")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the session (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (its path is printed)")
    ap.add_argument("--json", help="also write the results (every write call) to this file")
    args = ap.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        ap.error(f"--formats: use some of {', '.join(FORMATS)}")
    if args.files < 2:
        ap.error("--files: at least 2 (micro-batches)")
    if any("=" not in c for c in args.conf):
        ap.error("--conf: KEY=VALUE")
    conf = dict(c.split("=", 1) for c in args.conf)

    from greta_stream.choices import packages_of
    from greta_stream.spark.session import get_session

    text = QUERY.format(group=args.group_by, within=args.within, slide=args.slide)
    events = generators.stock(args.events, seed=args.seed, companies=args.companies, sectors=args.sectors,
                              rate=args.rate)
    work = Path(tempfile.mkdtemp(prefix="greta-bench-sinks-"))
    log = WriteLog()
    log.install()
    results: list[dict[str, Any]] = []
    try:
        write_input(work / "in", events, args.files)
        spark = get_session("local[2]", app_name="greta-bench-sinks", packages=packages_of(formats), conf=conf)
        if not args.no_warmup:  # Spark, the operator and the Python workers; not the sinks
            warm_files = 2
            write_input(work / "warm-in", events[: warm_files * -(-len(events) // args.files)], warm_files)
            run_format(spark, "jsonl", text, work / "warm-in", work / "warm", args.lateness, log)
            log.calls.clear()
        span = events[-1]["time"] - events[0]["time"] if events else 0.0
        print(f"# bench_sinks: {' '.join(sys.argv[1:]) or '(defaults)'}")
        print(f"# {len(events):,} stock events ({args.companies} companies, {args.sectors} sectors, "
              f"{span:,.0f} s of event time) in {args.files} files, one micro-batch each; local[2]; "
              f"GROUP-BY {args.group_by}; WITHIN {args.within} SLIDE {args.slide}; watermark {args.lateness:g} s")
        if conf:
            print(f"# Spark settings: {', '.join(f'{k}={v}' for k, v in conf.items())}")
        print(f"{'format':8} {'batches':>7} {'rows/batch':>10} {'first ms':>9} {'median ms':>9} {'mean ms':>8} "
              f"{'max ms':>8} {'us/row':>7} {'write s':>8} {'run s':>6} {'write %':>7} {'disk KB':>9} {'files':>6}",
              flush=True)
        for fmt in formats:
            r = run_format(spark, fmt, text, work / "in", work / fmt, args.lateness, log)
            s = summarize(r)
            results.append({**r, "summary": s})
            print(f"{fmt:8} {s['batches']:>7} {s['rows_per_batch']:>10,.0f} {cell(s['first_ms'], 9)} "
                  f"{cell(s['median_ms'], 9)} {cell(s['mean_ms'], 8)} {cell(s['max_ms'], 8)} "
                  f"{cell(s['us_per_row'], 7)} {s['write_s']:>8.2f} {r['run_s']:>6.1f} "
                  f"{cell(100 * s['write_share'] if s['write_share'] is not None else None, 7)} "
                  f"{r['bytes'] / 1024:>9,.0f} {r['files']:>6}", flush=True)
        rows = {r["format"]: r["rows"] for r in results}
        if len(set(rows.values())) > 1:
            print(f"# warning: the runs wrote different numbers of rows: {rows}")
        dead = {r["format"]: r["dead_letters"] for r in results if r["dead_letters"]}
        if dead:
            print(f"# warning: dead letters: {dead}")
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps({"argv": sys.argv, "cpus": os.cpu_count(), "query": text, "conf": conf,
                                                   "results": results}, indent=1))
        spark.stop()
    finally:
        if args.keep:
            print(f"# work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
