"""`trend_aggregates` on a static DataFrame (every window, as `evaluate`), its
typed columns (`decimal(38,0)` counts, or exact text), and `end_of_input`
closing a bounded stream's last windows."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from greta_stream import evaluate

pytestmark = pytest.mark.spark

QUERY = ("RETURN g, COUNT(*), SUM(A.n), SUM(A.v), MIN(A.v), MAX(A.n), AVG(A.v) PATTERN A+ "
         "WHERE [p] AND A.v < NEXT(A).v GROUP-BY g WITHIN 20 seconds SLIDE 10 seconds")


def _events(n: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    times = sorted(rnd.sample(range(n * 3), n))
    return [{"type": rnd.choice("AAAB"), "time": t / 2, "id": i, "g": rnd.randrange(3), "p": rnd.randrange(2),
             "n": rnd.randrange(-5, 9), "v": float(rnd.randrange(10))} for i, t in enumerate(times)]


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (float(row["window_start"]), str(row["g"]))


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    by_key = {_key(r): r for r in want}
    assert len(got) == len(want) and {_key(r) for r in got} == set(by_key)
    for row in got:
        expected = by_key[_key(row)]
        assert int(row["count"]) == expected["count"] and int(row["sum_A_n"]) == expected["sum_A_n"]
        assert row["sum_A_v"] == pytest.approx(expected["sum_A_v"])
        assert (row["min_A_v"], int(row["max_A_n"])) == (expected["min_A_v"], expected["max_A_n"])
        assert row["avg_A_v"] == pytest.approx(expected["avg_A_v"])


@pytest.mark.parametrize("shards", [1, 5])
def test_a_static_dataframe_gives_every_window_as_evaluate(spark, tmp_path: Path, shards: int) -> None:  # noqa: ANN001
    from greta_stream.spark import trend_aggregates

    events = _events(3000, seed=shards)
    random.Random(7).shuffle(events)  # any order: a batch has none
    src = tmp_path / "typed"
    src.mkdir()
    pd.DataFrame(events).to_parquet(src / "events.parquet")
    out = trend_aggregates(spark.read.parquet(str(src)), QUERY, shards=shards)
    assert out.rows.schema.simpleString() == (
        "struct<window_start:double,window_end:double,g:bigint,count:decimal(38,0),sum_A_n:decimal(38,0),"
        "sum_A_v:double,min_A_v:double,max_A_n:bigint,avg_A_v:double>")
    _same([r.asDict() for r in out.rows.collect()], list(evaluate(QUERY, events)))
    assert out.dead_letters.count() == 0


def test_json_text_input_in_batch_keeps_its_dead_letters(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from greta_stream.spark import trend_aggregates

    events = _events(800, seed=3)
    lines = [json.dumps(e) for e in events] + ['{"type": "A", "time": 5, "g": 1, "p": 0, "n": 1}',  # no v
                                               '{"type": "A", "time": ', "[1, 2]"]
    src = tmp_path / "text"
    src.mkdir()
    (src / "events.jsonl").write_text("\n".join(lines) + "\n")
    out = trend_aggregates(spark.read.text(str(src)), QUERY, shards=3)
    got = [r.asDict() for r in out.rows.collect()]
    result = evaluate(QUERY, [json.loads(x) for x in lines[:-2]])
    _same(got, list(result))
    reasons = sorted(r.reason for r in out.dead_letters.collect())
    assert reasons == sorted([d.reason for d in result.dead_letters] + ["malformed", "malformed"])


def test_counts_past_38_digits_are_null_as_decimals_and_exact_as_text(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from greta_stream.spark import trend_aggregates

    query = "RETURN COUNT(*), SUM(A.n) PATTERN A+ WITHIN 1000 seconds"
    small = [{"type": "A", "time": i, "n": 1} for i in range(1, 11)]  # window 0: 2^10 - 1 trends
    big = [{"type": "A", "time": 1000 + i, "n": 1} for i in range(140)]  # window 1000: 2^140 - 1
    df = spark.createDataFrame(pd.DataFrame(small + big))
    want = {r["window_start"]: r for r in evaluate(query, small + big)}
    decimals = {r.window_start: r for r in trend_aggregates(df, query, shards=2).rows.collect()}
    assert decimals[0]["count"] == Decimal(2**10 - 1) == Decimal(want[0]["count"])
    assert decimals[1000]["count"] is None and decimals[1000]["sum_A_n"] is None  # past decimal(38,0)
    text = trend_aggregates(df, query, shards=2, counts="text")
    assert text.rows.schema["count"].dataType.simpleString() == "string"
    exact = {r.window_start: r for r in text.rows.collect()}
    assert int(exact[1000]["count"]) == want[1000]["count"] == 2**140 - 1
    assert int(exact[1000]["sum_A_n"]) == want[1000]["sum_A_n"]
    with pytest.raises(ValueError, match="counts must be one of"):
        trend_aggregates(df, query, counts="float")


def test_end_of_input_closes_a_bounded_streams_last_windows(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from greta_stream.spark import end_of_input, trend_aggregates

    events = _events(600, seed=11)
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (src / "b.jsonl").write_text(json.dumps(end_of_input()) + "\n")
    out = trend_aggregates(spark.readStream.text(str(src)), QUERY, shards=2)
    q = out.rows.writeStream.format("memory").queryName("closed_rows").option(
        "checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start()
    q.awaitTermination(300)
    got = [r.asDict() for r in spark.sql("SELECT * FROM closed_rows").collect()]
    _same(got, list(evaluate(QUERY, events)))


def test_end_of_input_speaks_the_streams_field_names_and_time_kind() -> None:
    from greta_stream.engine import FieldNames
    from greta_stream.spark import end_of_input

    event = end_of_input(FieldNames(type="kind", time="ts"), timestamps=True)
    assert set(event) == {"kind", "ts"} and event["ts"].startswith("2153-") and event["ts"].endswith("Z")
