"""The sink family: every sink format of `choices.FORMATS` has a writer class
(`spark.formats.IMPLEMENTATIONS`) that `make_sink` builds, and each takes a
micro-batch through the one method `write(spark, SinkBatch)`. The file and console sinks write here for real; the
Kafka sink's keys are checked without a broker (its delivery is tested against
a real one in tests/kafka), the Delta sink's commits in tests/delta."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pandas as pd
import pytest

from greta_stream.choices import FORMATS, SINK_FORMATS, SOURCE_FORMATS, SinkFormat, SourceFormat
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.pipeline import QueryConfig, SinkConfig
from greta_stream.spark.formats import IMPLEMENTATIONS, make_sink
from greta_stream.spark.pipeline import Output
from greta_stream.spark.sinks import SinkBatch, SinkPlace

Q = "RETURN company, COUNT(*) PATTERN Stock S+ WHERE [company] GROUP-BY company WITHIN 10 s SLIDE 5 s"


def query(sink: SinkConfig, text: str = Q) -> QueryConfig:
    return QueryConfig(name="q", text=text, sinks=[sink]).compiled()


def row(start: float, grp: str, payload: dict) -> Output:
    return Output("q", "row", start, start + 10, grp, json.dumps(payload), None)


def test_every_format_is_declared_once_and_agrees_with_the_choices() -> None:
    assert set(SOURCE_FORMATS) == set(get_args(SourceFormat)) == {n for n, f in FORMATS.items() if f.is_source}
    assert set(SINK_FORMATS) == set(get_args(SinkFormat)) == {n for n, f in FORMATS.items() if f.is_sink}
    for name in SINK_FORMATS:
        writer = IMPLEMENTATIONS[name].writer
        assert writer is not None and callable(writer.create) and callable(writer.write), name


@pytest.mark.spark
def test_spark_reads_dead_letters_in_their_one_schema(spark: Any) -> None:  # noqa: ANN401
    """The dead-letter outputs a shard writes (`shard.dead_output`), read by Spark in the schema every
    dead-letter sink and `trend_aggregates` read them with: each letter's fields come back, the record as
    its JSON text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from greta_stream.engine import DeadLetter
    from greta_stream.spark.shard import dead_output
    from greta_stream.spark.typed import DEAD_LETTER_SCHEMA

    letters = [DeadLetter("missing_attribute", {"type": "Stock", "time": 1, "price": [1.5, None]},
                          "Stock events need attribute 'prize'", "Stock", "prize"),
               DeadLetter("malformed", "not json {", "not JSON: Expecting value"),
               DeadLetter("late", {"type": "Stock", "time": 2 ** 70}, "")]
    payloads = spark.createDataFrame([(dead_output("q", d)["payload"],) for d in letters], "payload string")
    read = payloads.select(F.from_json("payload", DEAD_LETTER_SCHEMA).alias("d")).select("d.*")
    assert [(f.name, f.dataType) for f in read.schema.fields] == [
        ("reason", StringType()), ("detail", StringType()), ("event", StringType()), ("event_type", StringType()),
        ("attribute", StringType())]
    rows = [row.asDict() for row in read.collect()]
    assert [DeadLetter.from_dict(r) for r in rows] == [
        DeadLetter(d.reason, d.record if isinstance(d.record, str) else json.dumps(d.record, separators=(",", ":")),
                   d.detail, d.event_type, d.attribute) for d in letters]
    assert [json.loads(r["event"]) for r in rows if r["reason"] != "malformed"] == [letters[0].record, letters[2].record]


def test_file_and_console_sinks_write_a_batch_through_the_one_method(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rows = [row(0, '["a"]', {"company": "a", "count": 3}), row(5, '["b"]', {"company": "b", "count": 2 ** 70})]
    jsonl = make_sink(SinkPlace(query(SinkConfig(format="jsonl", path=str(tmp_path / "j"))), "row",
                                SinkConfig(format="jsonl", path=str(tmp_path / "j")), None))
    jsonl.write(None, SinkBatch(7, rows))  # type: ignore[arg-type]  # the file sinks need no Spark
    jsonl.write(None, SinkBatch(7, rows))  # type: ignore[arg-type]  # a replay overwrites its own file
    assert list(read_jsonl_dir(tmp_path / "j")) == [{"company": "a", "count": 3}, {"company": "b", "count": 2 ** 70}]
    parquet_cfg = SinkConfig(format="parquet", path=str(tmp_path / "p"))
    make_sink(SinkPlace(query(parquet_cfg), "row", parquet_cfg, None)).write(None, SinkBatch(7, rows))  # type: ignore[arg-type]
    got = pd.read_parquet(tmp_path / "p" / "part-0000000007.parquet")
    assert got.to_dict("records") == [{"company": "a", "count": "3"}, {"company": "b", "count": str(2 ** 70)}]
    console = SinkConfig(format="console")
    make_sink(SinkPlace(query(console), "dead", console, None)).write(None, SinkBatch(7, rows[:1]))  # type: ignore[arg-type]
    assert capsys.readouterr().out == rows[0].payload + "\n"


def test_kafka_keys_say_query_group_window_and_the_nth_trend_or_dead_letter() -> None:
    cfg = SinkConfig(format="kafka", topic="t", bootstrap_servers="127.0.0.1:9092")
    rows = [row(5, '["b"]', {"n": 1}), row(0, '["a"]', {"n": 2})]
    sink = make_sink(SinkPlace(query(cfg), "row", cfg, None))
    assert [m.key for m in sink.messages(SinkBatch(3, rows))] == ['["q",["b"],5,15]', '["q",["a"],0,10]']  # type: ignore[attr-defined]
    dead = make_sink(SinkPlace(query(cfg), "dead", cfg, None))
    assert [m.key for m in dead.messages(SinkBatch(3, rows))] == ['["q","dead",3,0]', '["q","dead",3,1]']  # type: ignore[attr-defined]
    trends = make_sink(SinkPlace(query(cfg, "RETURN TRENDS PATTERN Stock S+ WITHIN 10 s"), "row", cfg, None))
    same = [row(0, "[]", {"t": 2}), row(0, "[]", {"t": 1})]
    assert [(m.key, m.value) for m in trends.messages(SinkBatch(3, same))] == [  # type: ignore[attr-defined]
        ('["q",[],0,10,0]', '{"t": 1}'), ('["q",[],0,10,1]', '{"t": 2}')]
