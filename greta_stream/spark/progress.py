"""Spark's progress reports as plain dicts, pushed to a callback after every micro-batch.

A `StreamingQueryListener` on the session: each stream's report (its name,
batch id, input rows, durations, event-time watermark, state operators) as
the dict of Spark's own JSON, whatever the stream. Monitoring (the service's
metrics) observes every batch this way, not the last few reports a query
keeps in `recentProgress`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

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
