"""The stateful operator's own cost: ``applyInPandasWithState`` vs ``transformWithStateInPandas``.

Answers: how much of a micro-batch does Spark's Python stateful API take
before any engine work, would Spark 4's ``transformWithStateInPandas`` (a
``StatefulProcessor`` over the RocksDB state store) take less, and does
writing state as a small per-batch delta instead of one rewritten blob per
key pay? Same input and shard layout as ``bench_spark.py`` (imported from
it: its ``WORKLOADS``, ``write_input``, ``run_stream``, ``summarize`` and
``operator_floor``; the session of ``greta_stream.spark.session``): a
seeded stream of JSON lines, one file of ``--rows`` events per micro-batch,
keyed by greta's shard key (``keyed_by_shard``: ``default_shards()`` keys,
watermark as greta's), on ``local[2]``, written to the ``noop`` sink.

Variants (``--variants``), every one do-nothing apart from its state:

- ``apply-floor``: ``bench_spark.operator_floor`` (as ``bench_spark --floor``):
  reads its rows, keeps a 1 KB state, one output row per key;
- ``apply-floor-arrow100k``: the same with
  ``spark.sql.execution.arrow.maxRecordsPerBatch`` 100,000 (default 10,000);
- ``tws-floor``: a ``StatefulProcessor`` whose ``handleInputRows`` reads its
  rows and yields one tiny row per key, no state;
- ``apply-state``: as ``apply-floor`` but rewrites a ``--state-kb`` blob per
  key every batch (greta's shape: one zlib'd snapshot per shard);
- ``tws-delta``: ``ListState.appendValue`` of ``--state-kb / --delta-ratio``
  bytes per key per batch (only the batch's delta is written);
- ``tws-state``: ``ValueState.update`` of a ``--state-kb`` blob per key every
  batch (the API change without the delta).

Blobs are random bytes (greta's are zlib'd: neither compresses further).
``tws-*`` run with the RocksDB state store provider (required); the others
with Spark's default (HDFS-backed) one. ``transformWithStateInPandas``
needs protobuf (pyspark's generated ``StateMessage_pb2``), which greta's
``spark`` extra installs: without it the ``tws-*`` rows say so.

Timing as in ``bench_spark.py``: each variant first runs once on a small
warm-up input (not reported), then ``--repeat`` rounds run every variant in
turn (rotating order); the table shows the median round. ``s/batch`` is the
median trigger time of the batches after the first (which pays for planning
and Python worker start, shown apart as ``first s``); ``rows/s`` is events
over those batches' summed trigger time. From the ``stateOperators`` of
the last batch with input: state rows, ``memoryUsedBytes``, ``commitTimeMs``; and
the growth of the query's checkpoint ``state/`` folder per batch (what the
state store wrote, compressed, snapshots included). ``--details`` also
prints every state operator metric Spark reports (``customMetrics``).

    .venv/bin/python benchmarks/bench_operator_api.py                     # q3, 100k rows x 3 batches
    .venv/bin/python benchmarks/bench_operator_api.py --repeat 1 --details --budget-s 900
    .venv/bin/python benchmarks/bench_operator_api.py --rows 2000 --batches 2 --variants apply-floor,tws-floor
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_spark import WORKLOADS, generators, operator_floor, run_stream, summarize, write_input  # noqa: E402

ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
VARIANTS = ("apply-floor", "apply-floor-arrow100k", "tws-floor", "apply-state", "tws-delta", "tws-state")


def tws_missing() -> str | None:
    """Why ``transformWithStateInPandas`` cannot run here, or None."""
    if importlib.util.find_spec("google") is None or importlib.util.find_spec("google.protobuf") is None:
        return "needs protobuf"
    from pyspark.sql import GroupedData

    if not hasattr(GroupedData, "transformWithStateInPandas"):
        return "pyspark has no transformWithStateInPandas"
    return None


def apply_state(keyed: Any, blob_bytes: int) -> Any:
    """``applyInPandasWithState`` that reads its rows and rewrites a ``blob_bytes`` state per key."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    from greta_stream.spark.operator import OUTPUT_SCHEMA, SHARD_COLUMN, STATE_SCHEMA

    def rewrite(key: Any, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        rows = sum(len(pdf) for pdf in pdfs)
        state.update((4, os.urandom(blob_bytes)))
        state.setTimeoutTimestamp(max(state.getCurrentWatermarkMs(), 1) + 10**12)
        yield pd.DataFrame({"query": ["query"], "kind": ["row"], "window_start": [0.0], "window_end": [0.0],
                            "grp": [str(rows)], "payload": [""], "reason": [None]})

    return keyed.groupBy(SHARD_COLUMN).applyInPandasWithState(
        rewrite, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout)


def transform_with_state(keyed: Any, state: str, blob_bytes: int) -> Any:
    """``transformWithStateInPandas`` keyed by shard: ``state`` is "none"
    (reads its rows, one tiny row per key), "delta" (``ListState.appendValue``
    of ``blob_bytes``) or "value" (``ValueState.update`` of ``blob_bytes``)."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    from greta_stream.spark.operator import SHARD_COLUMN

    blob_schema = StructType([StructField("blob", BinaryType())])
    out_schema = StructType([StructField("shard", LongType()), StructField("rows", LongType())])

    class Processor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            if state == "delta":
                self.deltas = handle.getListState("deltas", blob_schema)
            elif state == "value":
                self.blob = handle.getValueState("blob", blob_schema)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            n = sum(len(pdf) for pdf in rows)
            if state == "delta":
                self.deltas.appendValue((os.urandom(blob_bytes),))
            elif state == "value":
                self.blob.update((os.urandom(blob_bytes),))
            yield pd.DataFrame({"shard": [int(key[0])], "rows": [n]})

        def close(self) -> None:
            pass

    return keyed.groupBy(SHARD_COLUMN).transformWithStateInPandas(
        statefulProcessor=Processor(), outputStructType=out_schema, outputMode="Append", timeMode="None")


def builders(text: str, args: argparse.Namespace) -> dict[str, tuple[dict[str, str], Callable[[Any], Any]]]:
    """Each variant: the session settings it runs with, and its streaming DataFrame built from a source."""
    from greta_stream.runtime import RunSpec
    from greta_stream.spark.operator import default_shards, keyed_by_shard

    state_bytes = int(args.state_kb * 1024)
    delta_bytes = max(1, int(state_bytes / args.delta_ratio))

    def keyed(src: Any) -> Any:
        return keyed_by_shard(src, RunSpec.create(text, lateness_s=args.lateness), shards=default_shards())[0]

    default, big = {ARROW_BATCH: "10000", PROVIDER: HDFS}, {ARROW_BATCH: "100000", PROVIDER: HDFS}
    rocks = {ARROW_BATCH: "10000", PROVIDER: ROCKSDB}
    return {
        "apply-floor": (default, lambda src: operator_floor(src, text, args.lateness, "applyInPandasWithState")),
        "apply-floor-arrow100k": (big, lambda src: operator_floor(src, text, args.lateness, "applyInPandasWithState")),
        "tws-floor": (rocks, lambda src: transform_with_state(keyed(src), "none", 0)),
        "apply-state": (default, lambda src: apply_state(keyed(src), state_bytes)),
        "tws-delta": (rocks, lambda src: transform_with_state(keyed(src), "delta", delta_bytes)),
        "tws-state": (rocks, lambda src: transform_with_state(keyed(src), "value", state_bytes)),
    }


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_variant(spark: Any, conf: dict[str, str], build: Callable[[Any], Any], src: Any, name: str,
                checkpoints: Path) -> dict[str, Any]:
    """One streaming run with `conf` set (a stream clones the session's settings when it starts)."""
    for key, value in {**conf, "spark.sql.streaming.checkpointLocation": str(checkpoints)}.items():
        spark.conf.set(key, value)
    t0 = time.monotonic()
    progress = run_stream(build(src), name)
    got = summarize(progress)
    got["wall_s"] = time.monotonic() - t0
    data = [p for p in progress if p.get("numInputRows", 0) > 0] or progress or [{}]
    ops = data[-1].get("stateOperators") or [{}]  # the last batch with input: what it wrote
    got["state_op"] = ops[0]
    got["state_ops"] = len(ops)
    got["checkpoint_state_bytes"] = folder_bytes(checkpoints / name / "state")
    return got


def fmt_row(variant: str, r: dict[str, Any] | None, note: str = "") -> str:
    if r is None:
        return f"{variant:22} {note}"
    op = r["state_op"]
    per_batch = r["checkpoint_state_bytes"] / max(1, r["batches"])
    return (f"{variant:22} {(r['batch_ms_median'] or 0) / 1000:>8.2f} {r['events_per_s'] or 0:>9,.0f} "
            f"{(r['first_batch_ms'] or 0) / 1000:>8.2f} {op.get('numRowsTotal', 0):>6} "
            f"{op.get('memoryUsedBytes', 0):>12,} {op.get('commitTimeMs', 0):>7,} {per_batch:>14,.0f}")


HEADER = (f"{'variant':22} {'s/batch':>8} {'rows/s':>9} {'first s':>8} {'state':>6} "
          f"{'memoryUsedB':>12} {'commitMs':>7} {'ckpt B/batch':>14}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--query", default="q3", choices=sorted(WORKLOADS))
    ap.add_argument("--rows", type=int, default=100_000, help="events per micro-batch")
    ap.add_argument("--batches", type=int, default=3, help="micro-batches per run")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every variant; medians are shown")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of {', '.join(VARIANTS)}")
    ap.add_argument("--state-kb", type=float, default=400.0, help="state blob per key of the *-state variants")
    ap.add_argument("--delta-ratio", type=float, default=60.0, help="tws-delta appends state-kb / this per batch")
    ap.add_argument("--warm-rows", type=int, default=5_000, help="events of the warm-up run (2 batches); 0: none")
    ap.add_argument("--lateness", type=float, default=5.0, help="allowed lateness in seconds")
    ap.add_argument("--budget-s", type=float, default=1800.0,
                    help="no new run starts after this many seconds; the rest show 'skipped'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--details", action="store_true", help="also print every state operator metric Spark reports")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants: {', '.join(sorted(unknown))}")

    from greta_stream.spark.session import get_session

    start = time.monotonic()
    config, gen, params, _keys = WORKLOADS[args.query]
    text = (ROOT / "configs" / config).read_text()
    events = getattr(generators, gen)(args.rows * args.batches, seed=args.seed, **params)
    why_not = tws_missing()
    spark = get_session("local[2]", app_name="greta-bench-operator-api")
    print(f"# {args.query}, {args.rows:,} rows/batch x {args.batches}, repeat {args.repeat}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, pyspark {spark.version}", flush=True)
    table = builders(text, args)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    notes: dict[str, str] = {}
    if why_not:
        notes.update({v: f"unavailable: {why_not}" for v in variants if v.startswith("tws")})
    live = [v for v in variants if v not in notes]
    tmp = Path(tempfile.mkdtemp(prefix="greta-bench-api-"))
    try:
        write_input(tmp / "in", events, args.rows)
        if args.warm_rows:
            write_input(tmp / "warm", events[:args.warm_rows], max(1, args.warm_rows // 2))

        def source(folder: str) -> Any:
            return spark.readStream.option("maxFilesPerTrigger", 1).format("text").load(str(tmp / folder))

        def attempt(v: str, folder: str, name: str) -> dict[str, Any] | None:
            if time.monotonic() - start > args.budget_s:
                notes.setdefault(v, "skipped: budget")
                return None
            conf, build = table[v]
            try:
                return run_variant(spark, conf, build, source(folder), name, tmp / "ckpt")
            except Exception as e:  # noqa: BLE001 - a variant that fails is reported, the others run
                notes[v] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
                return None

        if args.warm_rows:  # warm-up: not reported
            for v in list(live):
                attempt(v, "warm", f"warm_{v.replace('-', '_')}")
        live = [v for v in live if v not in notes]
        for r in range(args.repeat):
            for v in live[r % max(1, len(live)):] + live[: r % max(1, len(live))]:
                if v in notes:
                    continue
                got = attempt(v, "in", f"{v.replace('-', '_')}_{r}")
                if got is not None:
                    runs[v].append(got)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        spark.stop()

    medians = {v: sorted(rs, key=lambda x: x["events_per_s"] or 0)[len(rs) // 2] for v, rs in runs.items() if rs}
    print(HEADER)
    for v in variants:
        print(fmt_row(v, medians.get(v), notes.get(v, "no run")), flush=True)
    if args.details:
        for v, got in medians.items():
            op = got["state_op"]
            metrics = {k: val for k, val in op.items() if k != "customMetrics"}
            print(f"\n{v}: {json.dumps(metrics)}\n  customMetrics: {json.dumps(op.get('customMetrics', {}))}")
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{time.monotonic() - start:,.0f} s in all", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "cpus": os.cpu_count(), "runs": runs,
                                               "notes": notes}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
