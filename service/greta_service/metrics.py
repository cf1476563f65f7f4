"""The service's Prometheus metrics (through `prometheus_client`).

Two sources:

- every micro-batch of every stream, as Spark reports it
  (`greta_stream.spark.on_progress`): a histogram of batch durations and
  counters of input rows and batches, per stream. Rates come from these
  counters (`rate(greta_stream_input_rows_total[1m])`), so they move while
  input is read and fall to zero when it stops;
- at each scrape, the registry and the results store: queries by status and,
  per query, result rows, batches, dead letters by reason (late ones
  included), watermark, state bytes and the last batch's rates.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from greta_service.runner import STREAM_PREFIX
from greta_service.store import STATUSES
from greta_stream.spark import event_rows

BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class ServiceMetrics:
    """One registry per app: the per-batch instruments and the scrape-time collector."""

    def __init__(self, registry: Any) -> None:
        self.prometheus = CollectorRegistry()
        self.ready = Gauge("greta_ready", "1 when Spark is up and the queries are resumed", registry=self.prometheus)
        self.ready.set_function(lambda: float(registry.ready.is_set()))
        self.batch_seconds = Histogram("greta_stream_batch_duration_seconds", "micro-batch duration (trigger to commit)",
                                       ["stream"], buckets=BATCH_BUCKETS, registry=self.prometheus)
        self.input_rows = Counter("greta_stream_input_rows", "events read", ["stream"], registry=self.prometheus)
        self.batches = Counter("greta_stream_batches", "micro-batches run", ["stream"], registry=self.prometheus)
        self.prometheus.register(_QueryCollector(registry))

    def observe(self, report: dict[str, Any]) -> None:
        """One micro-batch's progress report (Spark's JSON as a dict)."""
        name = report.get("name") or ""
        if not name.startswith(STREAM_PREFIX):
            return
        stream = name[len(STREAM_PREFIX):]
        self.batches.labels(stream).inc()
        self.input_rows.labels(stream).inc(event_rows(report))
        ms = (report.get("durationMs") or {}).get("triggerExecution")
        if ms is not None:
            self.batch_seconds.labels(stream).observe(ms / 1000)


# name, help, progress field
_COUNTERS = (
    ("greta_query_result_rows", "result rows stored", "result_rows"),
    ("greta_query_batches", "micro-batches stored", "batches"),
    ("greta_query_late_events", "events dropped behind the watermark", "late"),
)
_GAUGES = (
    ("greta_query_input_rows_per_second", "input rate of the stream's last micro-batch", "input_rows_per_s"),
    ("greta_query_processed_rows_per_second", "processing rate of the stream's last micro-batch",
     "processed_rows_per_s"),
    ("greta_query_watermark_seconds", "event-time watermark", "watermark_s"),
    ("greta_query_state_rows", "state rows (shards) of the query's stream", "state_rows"),
    ("greta_query_state_bytes", "state memory of the query, bytes", "state_bytes"),
)


class _QueryCollector(Collector):
    """Per-query figures read from the registry and the results store at scrape time."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        records = self.registry.store.records()  # read only
        by_status = GaugeMetricFamily("greta_queries", "registered queries by status", labels=["status"])
        statuses = [self.registry.status(r)[0] for r in records]
        for status in STATUSES:
            by_status.add_metric([status], statuses.count(status))
        yield by_status
        persisted = self.registry.store.state_bytes()
        handles = self.registry.handles()
        progress = {r.id: self.registry.progress(r, persisted, handles) for r in records}
        labels = ["id", "query", "stream"]

        def values(r: Any) -> list[str]:
            return [r.id, r.name, progress[r.id].get("stream") or ""]

        for name, text, key in _COUNTERS:
            counter = CounterMetricFamily(name, text, labels=labels)
            for r in records:
                counter.add_metric(values(r), progress[r.id].get(key) or 0)
            yield counter
        for name, text, key in _GAUGES:
            gauge = GaugeMetricFamily(name, text, labels=labels)
            for r in records:
                if progress[r.id].get(key) is not None:
                    gauge.add_metric(values(r), progress[r.id][key])
            yield gauge
        dead = CounterMetricFamily("greta_query_dead_letters", "events skipped, by reason", labels=[*labels, "reason"])
        for r in records:
            for reason, n in sorted(progress[r.id]["dead_letters_by_reason"].items()):
                dead.add_metric([*values(r), reason], n)
        yield dead
