"""The transformWithStateInPandas processor without a JVM: pyspark's own `TwsTester` plays Spark's
part (a key's input rows, then the watermark moving and the event-time timers it passes firing), as
`operator.stream_outputs` has Spark call it."""

from __future__ import annotations

import io
import json
import pickle
import sys
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.sql.streaming.tws_tester import TwsTester

from greta_stream import evaluate
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.control import streaming_slots
from greta_stream.spark.keying import BAD_UTF8_COLUMN, FLUSH_COLUMN, SECONDS_COLUMN, SHARD_COLUMN, SINGLE, TS_COLUMN
from greta_stream.spark.layout import INCREMENTAL, open_layout
from greta_stream.spark.operator import incremental_processor
from greta_stream.spark.processor import STATEFUL_WORKER

QUERY = "RETURN COUNT(*) PATTERN A X+ WITHIN 10 seconds"
EVENTS = [{"type": "A", "time": t, "id": i} for i, t in enumerate([1, 2, 4, 7, 12])]


def processor() -> tuple[Any, int, list[str]]:
    """The processor of a stream of QUERY over JSON text (`value`), its one shard's key and its input's columns."""
    queries = QuerySet.of({SINGLE: RunSpec.create(QUERY)})
    layout = open_layout(None, queries, 1, 1, INCREMENTAL)
    columns = ["value", BAD_UTF8_COLUMN, FLUSH_COLUMN, SECONDS_COLUMN, TS_COLUMN, SHARD_COLUMN]
    (slot,) = layout.members(queries)
    return incremental_processor(layout, streaming_slots(layout, queries), True, columns), layout.keys(slot)[0], columns


def test_a_fired_timer_is_left_for_pyspark_to_delete() -> None:
    """pyspark deletes the timer that fired once handleExpiredTimer returns; a processor that deletes it
    too made Spark warn `TimerStateImpl: Failed to delete timer ... since it does not exist` in every
    stream whose timers fire."""
    proc, key, columns = processor()
    tester = TwsTester(proc, timeMode="EventTime", eventTimeExtractor=lambda row: sys.maxsize)
    timers = tester.handle._timers
    missing: list[int] = []  # deletes of a timer that was not there, as Spark's TimerStateImpl sees them
    delete = timers.deleteTimer

    def checked_delete(grouping_key: Any, expiry_ms: int) -> None:
        if expiry_ms not in set(timers.listTimers(grouping_key)):
            missing.append(expiry_ms)
        delete(grouping_key, expiry_ms)

    timers.deleteTimer = checked_delete
    frame = pd.DataFrame({"value": [json.dumps(e) for e in EVENTS], BAD_UTF8_COLUMN: False, FLUSH_COLUMN: False,
                          SECONDS_COLUMN: [float(e["time"]) for e in EVENTS], TS_COLUMN: pd.Timestamp(0), SHARD_COLUMN: key},
                         columns=columns)
    out = tester.testInPandas(key, frame)
    first = [json.loads(p) for p in out[out["kind"] == "row"]["payload"]]
    # the watermark is 0, but the batch's own events (up to 12 s) closed the window [0, 10]: its row leaves now
    assert [(r["window_start"], r["window_end"]) for r in first] == [(0, 10)]
    assert list(timers.listTimers(key))  # a timer for the next window's end

    out = tester.setWatermark(100_000)  # 100 s: every window closed, each timer on the way fires
    rows = [json.loads(p) for p in out[out["kind"] == "row"]["payload"]]
    assert first + rows == list(evaluate(QUERY, EVENTS))
    assert missing == []
    assert list(timers.listTimers(key)) == []


def test_the_processor_quiets_pysparks_driver_worker_as_it_is_unpickled(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyspark's driver-side worker prints its debugging lines on stdout at each stream start, and Spark
    copies them to the JVM's stderr: on a SparkSession of the user's own (the PySpark API) nobody drops
    them. The processor, unpickled there, sends that process's stdout to /dev/null; elsewhere (an
    executor's worker, this test) stdout stays as it is."""
    blob = cloudpickle.dumps(processor()[0])
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    pickle.loads(blob)
    assert sys.stdout is stdout
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__spec__=SimpleNamespace(name=STATEFUL_WORKER)))
    proc = pickle.loads(blob)
    assert sys.stdout is not stdout and sys.stdout.name == "/dev/null"
    assert type(proc).__name__ == "ShardProcessor"
    sys.stdout.close()
