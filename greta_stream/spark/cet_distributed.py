"""Deferred CET windows extracted by a distributed Spark job, in the batch writer.

A Spark task cannot start jobs, so the stateful operator only defers a
large window (`CetConfig.distribute_over`, greta_stream/cet/distributed.py):
it emits one output of kind "deferred" carrying the window's graph, its
trends cut into pieces with exact counts, its share of the cap and the exact
total. The batch writer (foreachBatch, on the driver) calls `expand_outputs`:

1. every deferred window of the micro-batch is split into ranges of pieces
   (`distributed.split`: each range gets exactly its share of the cap);
2. one Spark job runs a task per range; the windows travel once per
   executor as a broadcast, each task rebuilds its window's view and
   enumerates its pieces' trends, and returns their rows as JSON text;
3. the driver puts each window's rows, in range order, where its deferred
   output stood: the rows are those the operator would have emitted, in the
   same order, whatever the number of tasks.

The rows then go to the sinks like any other row of the batch: files named
by batch id are overwritten by a replay, so output stays exactly once.
"""

from __future__ import annotations

import logging
from collections import namedtuple
from collections.abc import Iterator
from functools import partial
from typing import Any

from pyspark import Broadcast
from pyspark.sql import SparkSession

from greta_stream.cet.distributed import extract, from_text, plan_of, split
from greta_stream.connectors.jsonl import dumps_payload

log = logging.getLogger("greta_stream.cet_distributed")
JOB_GROUP = "greta-stream-cet-distributed"  # the Spark job group of the extraction jobs
Extracted = namedtuple("Extracted", ["query", "kind", "window_start", "window_end", "grp", "payload", "reason"])
Item = tuple[int, int, int, int]  # (deferred window, first piece, end piece, share of the cap)


def expand_outputs(spark: SparkSession, outputs: list[Any], tasks: int | None = None) -> list[Any]:
    """`outputs` (a query's rows and deferred windows, in order) with each
    deferred window replaced by its rows (see the module docstring). `tasks`:
    ranges per window (default: Spark's default parallelism)."""
    at = [i for i, o in enumerate(outputs) if o.kind == "deferred"]
    if not at:
        return outputs
    sc = spark.sparkContext
    texts = [outputs[i].payload for i in at]
    windows = [from_text(t) for t in texts]
    n = tasks or sc.defaultParallelism
    items: list[Item] = [(w, a, b, share) for w, d in enumerate(windows) for a, b, share in split(d.counts, d.take, n)]
    payloads: list[list[str]] = [[] for _ in windows]
    if items:
        shared = sc.broadcast(texts)
        sc.setLocalProperty("spark.jobGroup.id", JOB_GROUP)
        sc.setJobDescription(f"greta-stream: extract {len(windows)} deferred CET window(s) in {len(items)} tasks")
        try:
            results = sc.parallelize(items, len(items)).mapPartitions(partial(_extract_task, shared)).collect()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            sc.setJobDescription(None)  # type: ignore[arg-type]
            shared.unpersist()
        for w, rows in results:  # collect keeps the order of the items
            payloads[w] += rows
        log.info("extracted %d deferred CET window(s) in %d Spark tasks: %d rows", len(windows), len(items),
                 sum(map(len, payloads)))
    out: list[Any] = []
    index = dict(zip(at, range(len(at)), strict=True))
    for i, o in enumerate(outputs):
        w = index.get(i, -1)
        if w < 0:
            out.append(o)
            continue
        query = getattr(o, "query", None)
        out += [Extracted(query, "row", o.window_start, o.window_end, o.grp, p, None) for p in payloads[w]]
    return out


def _extract_task(shared: Broadcast[list[str]], items: Iterator[Item]) -> Iterator[tuple[int, list[str]]]:
    """One task: the rows of its ranges of pieces, as JSON text."""
    plans: dict[int, Any] = {}
    for w, a, b, share in items:
        d = from_text(shared.value[w])
        plan = plans.get(w) or plans.setdefault(w, plan_of(d))
        yield w, [dumps_payload(rec) for rec in extract(d, a, b, share, plan)]
