"""Event time of a shard: the end of a bounded input (`end_of_input`), Spark's watermark read
(`spark_seconds`), each query's own watermark in its runner's time unit (`query_watermark`), the
timer that wakes a shard for its next window (`timeout_ms`), and the shard's own clock, which keeps
an event far ahead of the stream from moving its watermark (`trusted_watermark_s`, `next_clock_s`).

Times and lateness are seconds; Spark's milliseconds are met here only: read (`spark_seconds`),
written (`timeout_ms`), and the resolution a query's watermark is taken at (`query_watermark`).
Plain functions (no JVM needed), used by `shard.step` and `shard.step_incremental`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np

from greta_stream.engine import FieldNames
from greta_stream.engine.ingest import reach
from greta_stream.engine.timebase import TIMESTAMP, US_PER_S, TimeError, parse_time
from greta_stream.runtime import RunSpec
from greta_stream.runtime.multi import MultiRunner

# `greta-stream run --flush-at-end` (flush.py) ends a bounded input with one event of
# this type at this time (in 2153, inside the range of the operator's watermark
# column, up to 2156): the operator hands it to every shard, which then closes every
# window. A watermark past it is the end of input.
FLUSH_TYPE = "__greta_flush__"
FLUSH_TIME_S = 5_800_000_000


def end_of_input(fields: FieldNames = FieldNames(), timestamps: bool = False) -> dict[str, Any]:
    """The event that ends a bounded input: written to a stream's source (a file
    in its folder, a message on its topic) after the last event, it makes every
    shard emit every window it still holds. `timestamps`: the stream's times are
    ISO-8601 timestamps (a validator would dead-letter a number there). Input
    after it is late."""
    at: Any = FLUSH_TIME_S
    if timestamps:
        at = datetime.fromtimestamp(FLUSH_TIME_S, UTC).isoformat().replace("+00:00", "Z")
    return {fields.type: FLUSH_TYPE, fields.time: at}


def engine_watermark(kind: str | None, watermark_ms: float) -> Any:
    """A watermark in ms since the epoch (Spark's unit) in engine time units.

    Spark reports 0 before the first watermark exists; that means "none".
    """
    if watermark_ms <= 0:
        return -math.inf
    if kind == TIMESTAMP:
        return int(watermark_ms) * 1000
    return watermark_ms // 1000 if watermark_ms % 1000 == 0 else watermark_ms / 1000


def spark_seconds(watermark_ms: float) -> float:
    """Spark's watermark (ms since the epoch, 0 before there is one; the operator keeps it at the
    stream's latest event time) as the shard's stream time: seconds, -inf for none."""
    return watermark_ms / 1000 if watermark_ms > 0 else -math.inf


def query_watermark(spec: RunSpec, kind: str | None, stream_s: float) -> Any:
    """A query's watermark in its runner's time unit (`kind`): the stream time less the query's own
    lateness, both seconds; -inf for none. It never depends on the stream's other queries. Taken at
    the resolution of Spark's watermark, whole ms (the stream time cut to it, the lateness rounded
    to it), whether the stream time is Spark's or the shard's clock: the rows do not depend on which."""
    if not stream_s > -math.inf:
        return -math.inf
    return engine_watermark(kind, max(math.floor(stream_s * 1000) - _lateness_ms(spec), 0))


def _lateness_ms(spec: RunSpec) -> int:
    """A query's lateness at the resolution of Spark's watermark and timers (whole ms)."""
    return round(spec.lateness_s * 1000)


def timeout_ms(multi: MultiRunner, watermark_ms: int) -> int | None:
    """When Spark should call this shard again without data (None: never):
    when the stream's watermark lets some query's next window close."""
    kinds = multi.time_kinds()
    wake = None
    for name, end in multi.next_window_ends().items():
        ms = end // 1000 if kinds[name] == TIMESTAMP else math.ceil(end * 1000)
        ms = int(ms) + _lateness_ms(multi.queries[name])
        wake = ms if wake is None else min(wake, ms)
    return None if wake is None else max(wake, watermark_ms, 1)


# ------------------------------------------------------------------ event time
# Spark's watermark is the latest event time of the stream (the operator's watermark
# column has no delay of its own; each query subtracts its own lateness). Events
# further ahead than `max_future_s` are kept out of that column where Spark can tell
# (below, `max_future_s` is the step of `QuerySet.future_step_s`: a query's lateness when longer)
# (ahead of the wall clock), but an event ahead of the stream's time yet not of the
# wall clock (a replay of old input) still moves it. So each shard keeps its own
# clock: the latest time of the plausible events it has seen (those that steps of at
# most `max_future_s` through its batches' times reach from what it trusted then:
# a batch of history spanning a year is plausible, a jump of years is not). A Spark
# watermark more than `max_future_s` ahead of what the shard's clock reaches through
# the batch is not trusted: the shard goes by its clock until its events catch up.
# No event's time moves a query's watermark past `max_future_s` ahead of the events
# before it.

def trusted_watermark_s(spark_s: float, clock_s: float, times_s: Any, max_future_s: float | None) -> float:
    """The stream time a shard goes by (seconds): Spark's watermark, unless it is
    more than `max_future_s` ahead of what the shard's clock (or, in a shard with
    no clock yet, the median time of its batch) reaches through the batch's
    times (`reach`): then the clock."""
    if max_future_s is None or spark_s == -math.inf:
        return spark_s
    ref = clock_s if clock_s > -math.inf else _median(times_s)
    if ref == -math.inf or spark_s <= reach(ref, _finite(times_s), max_future_s) + max_future_s:
        return spark_s
    return clock_s


def next_clock_s(clock_s: float, times_s: Any, trusted_s: float, max_future_s: float | None) -> float:
    """The shard's clock after a batch with event times `times_s` (NaN: no time)."""
    if times_s is None or len(times_s) == 0:
        return clock_s
    finite = _finite(times_s)
    if max_future_s is not None and finite.size:
        base = trusted_s if trusted_s > -math.inf else clock_s if clock_s > -math.inf else _median(finite)
        finite = finite[finite <= reach(base, finite, max_future_s)]
    return max(clock_s, float(finite.max())) if finite.size else clock_s


def _finite(times_s: Any) -> np.ndarray:
    return np.zeros(0) if times_s is None else times_s[np.isfinite(times_s)]


def _median(times_s: Any) -> float:
    if times_s is None:
        return -math.inf
    finite = times_s[np.isfinite(times_s)]
    return float(np.median(finite)) if finite.size else -math.inf


def record_seconds(records: Any, time_field: str) -> np.ndarray:
    """Each record's event time in seconds since the epoch (NaN where it has none), as the
    operator's watermark column reads it (for callers that have no such column)."""
    if hasattr(records, "columns"):
        if time_field not in records.columns:
            return np.full(len(records), np.nan)
        values = records[time_field].tolist()
    else:
        values = [r.get(time_field) if isinstance(r, dict) else None for r in records]
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if v is None:
            continue
        try:
            kind, t = parse_time(v)
        except TimeError:
            continue
        out[i] = t / US_PER_S if kind == TIMESTAMP else t
    return out
