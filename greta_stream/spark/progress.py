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


class _Reports:
    """The py4j side of a listener (Spark's `PythonStreamingQueryListener`): each report to the
    callback as the dict of Spark's own JSON, one call into the JVM per report. pyspark's own side
    (`JStreamingQueryListener`) first rebuilds the report field by field, and py4j reads every Java
    map and array of it until Java's iterator throws: five exceptions per report, each of which
    pyspark tests against a dozen Java classes, each test a class lookup that searches every jar on
    Spark's class path. That took more of the driver JVM's CPU than the micro-batches themselves."""

    def __init__(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self.callback = callback

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - Spark's names
        pass

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        try:
            self.callback(json.loads(jevent.progress().json()))
        except Exception as exc:  # noqa: BLE001 - a listener must never fail Spark's listener bus
            log.warning("progress callback: %s", exc)

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class _Listener(StreamingQueryListener):
    """A listener whose JVM side calls `_Reports`, not pyspark's converting wrapper (`_jlistener`,
    what `StreamingQueryManager.addListener` and `removeListener` hand the JVM)."""

    def __init__(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self.callback = callback
        self._java: Any = None

    @property
    def _jlistener(self) -> Any:
        if self._java is None:
            from pyspark import SparkContext

            self._java = SparkContext._jvm.PythonStreamingQueryListenerWrapper(  # type: ignore[union-attr]
                _Reports(self.callback))
        return self._java

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        pass


def new_reports(query: Any, after: int) -> list[dict[str, Any]]:
    """`query`'s progress reports with a batch id above `after`, oldest first, as the dicts of Spark's
    own JSON. Read from the newest back, one report at a time: pyspark's `recentProgress` renders and
    converts every report the query keeps (100 by default) at each call, about 3 ms each."""
    kept = query._jsq.recentProgress()
    out = []
    for i in range(len(kept) - 1, -1, -1):
        report = kept[i]
        if report.batchId() <= after:
            break
        out.append(json.loads(report.json()))
    return out[::-1]


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
