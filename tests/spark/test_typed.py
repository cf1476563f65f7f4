"""`trend_aggregates` on typed input: typed rows, timestamps, exact counts as text, dead letters apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from greta_stream import evaluate

pytestmark = pytest.mark.spark

QUERY = ("RETURN g, COUNT(*), SUM(A.n), MIN(A.v), MAX(A.n), AVG(A.v) PATTERN A+ WHERE A.v < NEXT(A).v "
         "GROUP-BY g WITHIN 1 minute SLIDE 30 seconds")


def test_typed_input_gives_typed_rows_and_dead_letters_apart(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from greta_stream.spark import trend_aggregates

    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    events = [{"type": "A", "time": t0 + timedelta(seconds=i), "id": i, "g": i % 3, "n": i, "v": float(i % 7)}
              for i in range(120)]
    events.append({"type": "A", "time": t0 + timedelta(seconds=5), "id": 999, "g": 1, "n": 1, "v": None})  # bad v
    src = tmp_path / "in"
    src.mkdir()
    pd.DataFrame(events).to_parquet(src / "events.parquet")
    stream = spark.readStream.schema(spark.read.parquet(str(src)).schema).parquet(str(src))
    out = trend_aggregates(stream, QUERY, shards=2)
    assert out.rows.schema.simpleString() == (
        "struct<window_start:timestamp,window_end:timestamp,g:bigint,count:decimal(38,0),sum_A_n:decimal(38,0),"
        "min_A_v:double,max_A_n:bigint,avg_A_v:double>")
    rows_q = out.rows.writeStream.format("memory").queryName("typed_rows").option(
        "checkpointLocation", str(tmp_path / "chk-rows")).trigger(availableNow=True).start()
    dead_q = out.dead_letters.writeStream.format("memory").queryName("typed_dead").option(
        "checkpointLocation", str(tmp_path / "chk-dead")).trigger(availableNow=True).start()
    rows_q.awaitTermination(300)
    dead_q.awaitTermination(300)
    got = spark.sql("SELECT * FROM typed_rows").collect()
    dead = spark.sql("SELECT * FROM typed_dead").collect()
    assert [d.reason for d in dead] == ["missing_attribute"] and "999" in dead[0].event
    clean = [e for e in events if e["v"] is not None]
    want = {(r["window_start"].timestamp(), r["g"]): r for r in evaluate(QUERY, clean)}
    assert got
    for row in got:
        expected = want[(row.window_start.timestamp(), row.g)]  # Spark's naive local time, pandas' aware UTC
        assert int(row["count"]) == expected["count"] and int(row.sum_A_n) == expected["sum_A_n"]
        assert (row.min_A_v, row.max_A_n) == (expected["min_A_v"], expected["max_A_n"])
        assert row.avg_A_v == pytest.approx(expected["avg_A_v"])
