"""Spark's progress reports as plain dicts, pushed to a callback after every micro-batch.

A `StreamingQueryListener` on the session: each stream's report (its name,
batch id, input rows, durations, event-time watermark, state operators) as
the dict of Spark's own JSON, whatever the stream. Monitoring (the service's
metrics) observes every batch this way, not the last few reports a query
keeps in `recentProgress`. `progress_line` words a report for the command
line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from greta_stream.engine.timebase import NUMERIC
from greta_stream.spark.control import CONTROL_FOLDER
from greta_stream.spark.shard import FLUSH_TIME_S, engine_watermark

log = logging.getLogger(__name__)


class _Listener(StreamingQueryListener):
    def __init__(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self.callback = callback

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        try:
            self.callback(json.loads(event.progress.json))
        except Exception as exc:  # noqa: BLE001 - a listener must never fail Spark's listener bus
            log.warning("progress callback: %s", exc)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        pass


def on_progress(spark: Any, callback: Callable[[dict[str, Any]], None]) -> Any:
    """Call `callback(report)` after every micro-batch of every stream of
    `spark`; returns the listener (`spark.streams.removeListener(it)` ends it)."""
    listener = _Listener(callback)
    spark.streams.addListener(listener)
    return listener


def progress_line(name: str, p: dict[str, Any], time_kinds: Iterable[str] = (),
                  lateness_s: Iterable[float] = (0.0,), engines: dict[str, str | None] | None = None) -> str:
    """One human line from a StreamingQueryProgress dict; the watermark in
    seconds when the stream's times are numbers (`time_kinds` of its queries).
    A query's watermark is the stream's latest event time less its lateness:
    shown when the stream's queries share one lateness, else the event time.
    `engines`: what each query ran on (`BatchWriter.engine_text`)."""
    state = p.get("stateOperators") or [{}]
    spark_wm = (p.get("eventTime") or {}).get("watermark")
    late = set(lateness_s)
    if len(late) == 1:
        clock = f"watermark {watermark_text(spark_wm, set(time_kinds), late.pop())}"
    else:
        clock = f"event time {watermark_text(spark_wm, set(time_kinds))} (each query's watermark: less its lateness)"
    events = event_rows(p)
    return (
        f"[{name}] batch {p.get('batchId')}: {events:,} event{'' if events == 1 else 's'} "
        f"({p.get('processedRowsPerSecond') or 0:,.0f}/s) in {p.get('durationMs', {}).get('triggerExecution', 0):,} ms; "
        f"{clock}; state {state[0].get('memoryUsedBytes', 0):,} bytes{engines_text(engines or {})}"
    )


def event_rows(p: dict[str, Any]) -> int:
    """The events a micro-batch read: the rows of its sources but the control rows a stream whose
    query set changes while it runs reads beside them (`control.read_rows`)."""
    sources = p.get("sources")
    if not sources:
        return int(p.get("numInputRows") or 0)
    control = f"/{CONTROL_FOLDER}/rows"
    return sum(int(s.get("numInputRows") or 0) for s in sources if control not in str(s.get("description", "")))


def engines_text(engines: dict[str, str | None]) -> str:
    """"; columnar engine" when every query ran on one engine, else each query's, by engine."""
    said = {n: e for n, e in engines.items() if e}
    if not said:
        return ""
    if len(set(said.values())) == 1:
        return f"; {next(iter(said.values()))} engine"
    by: dict[str, list[str]] = {}
    for n, e in said.items():
        by.setdefault(e, []).append(n)
    return "; " + ", ".join(f"{e} engine: {', '.join(ns)}" for e, ns in by.items())


_END_MS = (FLUSH_TIME_S - 365 * 86_400) * 1000  # a year before it: no real stream is there


def watermark_text(spark_watermark: str | None, time_kinds: set[str], less_s: float = 0.0) -> str:
    """Spark's watermark (ISO-8601 text, the epoch when there is none yet; the
    operator keeps it at the latest event time) less `less_s` (a query's
    lateness), as the stream's times read: seconds for numeric times, else the
    timestamp; "-" for none, "end of input" once a flush (`--flush-at-end`)
    moved it past every event."""
    if not spark_watermark:
        return "-"
    at = datetime.fromisoformat(spark_watermark.replace("Z", "+00:00"))
    ms = round(at.timestamp() * 1000)
    if ms <= 0:
        return "-"
    if ms >= _END_MS:
        return "end of input"
    ms -= round(less_s * 1000)
    if time_kinds == {NUMERIC}:
        return str(engine_watermark(NUMERIC, ms))
    if not less_s:
        return spark_watermark
    return (datetime.fromtimestamp(0, UTC) + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")
