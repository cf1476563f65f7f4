"""Delta Lake through the pipeline: the sink's idempotent append, a Delta
table of events as a source picking up new commits, Spark's own Delta sink,
catalog tables, dead-letter tables, and the sink's options. (Exactly once
across a `kill -9` of `greta-stream run` with a Delta sink: tests/spark/test_chaos.py.)"""

from __future__ import annotations

import json
import os
import random
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.errors import ConfigError
from greta_stream.pipeline import PipelineConfig

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

Q = ("RETURN company, COUNT(*), SUM(S.volume), MAX(S.price) PATTERN Stock S+ WHERE [company] AND "
     "S.price > NEXT(S).price GROUP-BY company WITHIN 20 s SLIDE 10 s")
FILES, SPAN_S = 5, 50
BAD = ['{"type": "Stock", "company": 1, "price": 3}', "{not json"]


def events(seed: int = 7) -> list[list[dict[str, Any]]]:
    rnd = random.Random(seed)
    return [[{"type": "Stock", "time": round(i * SPAN_S + rnd.uniform(0, SPAN_S), 3), "company": rnd.randrange(3),
              "price": rnd.randrange(20), "volume": rnd.randrange(1, 50)} for _ in range(60)] for i in range(FILES)]


def write_files(folder: Path, chunks: list[list[dict[str, Any]]]) -> None:
    """One file per micro-batch, in increasing modification times; bad lines in the second; a Flush event last."""
    folder.mkdir()
    stamp = time.time() - 3600
    for i, chunk in enumerate(chunks):
        lines = [json.dumps(e) for e in chunk] + (BAD if i == 1 else [])
        if i == len(chunks) - 1:
            lines.append(json.dumps({"type": "Flush", "time": 100_000}))  # closes every window
        path = folder / f"events-{i}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (stamp + i, stamp + i))


def expected(flat: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((float(r["window_start"]), float(r["window_end"]), str(r["company"]), int(r["count"]),
                   int(r["sum_S_volume"]), float(r["max_S_price"])) for r in evaluate(Q, flat))


def as_rows(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((float(r["window_start"]), float(r["window_end"]), str(r["company"]), int(r["count"]),
                   int(r["sum_S_volume"]), float(r["max_S_price"])) for r in records)


def config(tmp: Path, **sink: Any) -> Path:
    doc = {"source": {"format": "jsonl", "path": "in", "max_files_per_trigger": 1}, "checkpoint": "chk",
           "shards": 2, "master": "local[2]",
           "queries": [{"name": "down", "text": Q, "sinks": [{"format": "delta", "path": "out", **sink}],
                        "dead_letter": {"format": "delta", "path": "dead"}}]}
    path = tmp / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_replayed_batch_adds_nothing_and_a_new_checkpoint_writes_afresh(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """The sink's idempotent write, as a replay after a crash calls it: the same batch id twice, once in the table."""
    from greta_stream.spark.delta import DeltaSink
    from greta_stream.spark.pipeline import Output

    cfg = PipelineConfig.from_dict({"source": {"path": "in"}, "checkpoint": "chk", "queries": [
        {"name": "q", "text": Q, "sinks": [{"format": "delta", "path": str(tmp_path / "t")}]}]})
    spec = cfg.queries[0].spec
    assert spec is not None
    row = Output("q", "row", 0.0, 20.0, '["1"]', json.dumps(
        {"window_start": 0, "window_end": 20, "company": 1, "count": 10**30, "sum_S_volume": 3, "max_S_price": 2.5}),
        None)
    sink = DeltaSink("q", "row", cfg.queries[0].sinks[0], spec, tmp_path / "chk" / "sink-0.delta-app-id")
    for batch_id in (0, 0, 1, 1, 0):
        sink.append(spark, batch_id, [row])
    got = DeltaTable(str(tmp_path / "t")).to_pandas()
    assert len(got) == 2 and got["count"].tolist() == [Decimal(10**30)] * 2
    again = DeltaSink("q", "row", cfg.queries[0].sinks[0], spec, tmp_path / "new-chk" / "sink-0.delta-app-id")
    again.append(spark, 0, [row])  # a new checkpoint counts batches from 0 again: a new writer, not skipped
    assert len(DeltaTable(str(tmp_path / "t")).to_pandas()) == 3
    huge = row._replace(payload=row.payload.replace(str(10**30), str(10**40)))
    with pytest.raises(ValueError, match="past decimal\\(38,0\\): set counts: text"):
        sink.append(spark, 2, [huge])


def test_a_delta_table_of_events_is_a_source_and_new_commits_are_read(spark, tmp_path: Path) -> None:  # noqa: ANN001
    import pandas as pd

    from greta_stream.spark.pipeline import run

    chunks = events(11)
    table = str(tmp_path / "events")
    frame = pd.DataFrame([e for c in chunks[:3] for e in c])
    spark.createDataFrame(frame).write.format("delta").save(table)
    cfg = {"source": {"format": "delta", "path": table}, "checkpoint": "chk", "shards": 2, "once": True,
           "queries": [{"name": "down", "text": Q, "sinks": [{"format": "jsonl", "path": "out"}],
                        "dead_letter": {"format": "jsonl", "path": "dead"}}]}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    first = run(PipelineConfig.from_file(path), spark=spark, echo=lambda _: None)
    assert first["down"]["rows"] > 0 and "failed" not in first["down"]
    seen = as_rows(list(read_jsonl_dir(tmp_path / "out")))
    assert seen and all(r[1] <= 3 * SPAN_S for r in seen)  # windows the watermark passed
    for chunk in chunks[3:]:  # later commits, then the end of the input
        spark.createDataFrame(pd.DataFrame(chunk)).write.format("delta").mode("append").save(table)
    flush = pd.DataFrame([{"type": "Flush", "time": 100_000.0}])
    spark.createDataFrame(flush).write.format("delta").mode("append").option("mergeSchema", "true").save(table)
    second = run(PipelineConfig.from_file(path), spark=spark, echo=lambda _: None)
    assert "failed" not in second["down"]
    assert as_rows(list(read_jsonl_dir(tmp_path / "out"))) == expected([e for c in chunks for e in c])
    assert list(read_jsonl_dir(tmp_path / "dead")) == []


@pytest.mark.parametrize(("sink", "message"), [
    ({"format": "delta"}, "a delta sink needs a path or a table"),
    ({"format": "delta", "path": "x", "table": "t"}, "a delta sink needs a path or a table"),
    ({"format": "jsonl", "path": "x", "partition_by": ["g"]}, "partition_by apply to delta sinks only"),
    ({"format": "delta", "path": "x", "counts": "hex"}, "counts"),
])
def test_delta_sink_settings_are_checked(sink: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PipelineConfig.from_dict({"source": {"path": "in"}, "checkpoint": "c",
                                  "queries": [{"name": "q", "text": Q, "sinks": [sink]}]})


def test_trend_aggregates_rows_go_to_delta_with_sparks_own_sink(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """What the README says to PySpark users: `rows` written by Spark's Delta sink, exactly once by its checkpoint."""
    from greta_stream.spark import end_of_input, trend_aggregates

    chunks = events(3)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps(e) + "\n" for c in chunks for e in c))
    (folder / "b.jsonl").write_text(json.dumps(end_of_input()) + "\n")
    out = trend_aggregates(spark.readStream.text(str(folder)), Q)
    for _ in range(2):  # the second run finds nothing new: the table stays as it is
        query = (out.rows.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "chk"))
                 .trigger(availableNow=True).start(str(tmp_path / "rows")))
        query.awaitTermination()
    got = as_rows(DeltaTable(str(tmp_path / "rows")).to_pandas().to_dict("records"))
    assert got == expected([e for c in chunks for e in c])


def test_a_sink_names_a_catalog_table(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """`table:` instead of `path:`: the rows in a table of Spark's catalog (here a database kept under tmp_path)."""
    from greta_stream.spark.pipeline import run

    chunks = events(5)
    write_files(tmp_path / "in", chunks)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS greta_test LOCATION '{tmp_path / 'warehouse'}'")
    cfg = PipelineConfig.from_dict({
        "source": {"format": "jsonl", "path": "in"}, "checkpoint": "chk", "shards": 2, "once": True,
        "queries": [{"name": "down", "text": Q, "sinks": [{"format": "delta", "table": "greta_test.down_rows"}]}]},
        base=tmp_path)
    try:
        counts = run(cfg, spark=spark, echo=lambda _: None)
        assert "failed" not in counts["down"]
        got = as_rows([r.asDict() for r in spark.table("greta_test.down_rows").collect()])
        assert got == expected([e for c in chunks for e in c])
    finally:
        spark.sql("DROP DATABASE IF EXISTS greta_test CASCADE")


def test_a_delta_sink_refuses_a_folder_of_other_files_and_a_table_of_other_columns(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Nothing is created around files that are not a table; a table of other columns fails in one line."""
    from greta_stream.spark.delta import DeltaSink
    from greta_stream.spark.pipeline import Output

    def sink_to(target: Path, text: str = Q) -> tuple[DeltaSink, Output]:
        cfg = PipelineConfig.from_dict({"source": {"path": "in"}, "checkpoint": "chk", "queries": [
            {"name": "q", "text": text, "sinks": [{"format": "delta", "path": str(target)}]}]})
        spec = cfg.queries[0].spec
        assert spec is not None
        row = Output("q", "row", 0.0, 20.0, '["1"]', json.dumps(
            {"window_start": 0, "window_end": 20, "company": 1, "count": 3, "sum_S_volume": 3, "max_S_price": 2.5}),
            None)
        return DeltaSink("q", "row", cfg.queries[0].sinks[0], spec, None), row

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not a table\n")
    sink, row = sink_to(other)
    with pytest.raises(ConfigError, match="holds files and is not a Delta table"):
        sink.append(spark, 0, [row])
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]

    table = tmp_path / "t"
    sink, row = sink_to(table)
    sink.append(spark, 0, [row])
    text_counts = Q.replace("SUM(S.volume)", "AVG(S.volume)")  # another column: avg_S_volume, no sum
    again, _ = sink_to(table, text_counts)
    moved = row._replace(payload=json.dumps({"window_start": 0, "window_end": 20, "company": 1, "count": 3,
                                             "avg_S_volume": 1.5, "max_S_price": 2.5}))
    with pytest.raises(ConfigError, match=r"avg_S_volume \(double\) is not in the table"):
        again.append(spark, 1, [moved])


def test_two_queries_may_not_write_one_delta_table() -> None:
    doc = {"source": {"path": "in"}, "checkpoint": "chk", "queries": [
        {"name": "a", "text": Q, "sinks": [{"format": "delta", "path": "/tmp/shared-table"}]},
        {"name": "b", "text": Q, "sinks": [{"format": "jsonl", "path": "/tmp/b"}],
         "dead_letter": {"format": "delta", "path": "/tmp/shared-table/"}}]}
    with pytest.raises(ConfigError, match="the Delta table /tmp/shared-table is the sink of 'a' and of 'b'"):
        PipelineConfig.from_dict(doc)


def test_a_clean_run_leaves_an_empty_dead_letter_table(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """No bad event: the dead-letter table is still there, empty, with its columns (a
    reader of it gets no rows, not TableNotFound)."""
    from greta_stream.spark.pipeline import run

    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events(3)[0]))
    cfg = yaml.safe_load(config(tmp_path).read_text())
    cfg["once"] = True
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(cfg))
    counts = run(PipelineConfig.from_file(tmp_path / "pipeline.yaml"), spark=spark, echo=lambda _: None)
    assert counts["down"]["dead_letters"] == 0 and "failed" not in counts["down"]
    dead = DeltaTable(str(tmp_path / "dead"))
    assert dead.to_pandas().empty
    assert {"reason", "event", "detail"} <= {f.name for f in dead.schema().fields}


def test_a_dead_letter_table_of_the_old_three_columns_takes_the_attribute_columns(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """A dead-letter table written before `event_type` and `attribute` were columns: the next letters
    add them (nullable; the old rows keep null), no schema error."""
    from greta_stream.engine import DeadLetter
    from greta_stream.spark.delta import DeltaSink
    from greta_stream.spark.pipeline import Output
    from greta_stream.spark.sinks import SinkBatch

    target = tmp_path / "dead"
    spark.createDataFrame([("malformed", "not JSON", "x")], "reason string, detail string, event string") \
        .write.format("delta").save(str(target))
    cfg = PipelineConfig.from_dict({"source": {"path": "in"}, "checkpoint": "chk", "queries": [
        {"name": "q", "text": Q, "sinks": [{"format": "jsonl", "path": str(tmp_path / "o")}],
         "dead_letter": {"format": "delta", "path": str(target)}}]})
    sink = DeltaSink("q", "dead", cfg.queries[0].dead_letter, cfg.queries[0].spec, None)
    letter = DeadLetter("missing_attribute", {"type": "Stock", "time": 1}, "Stock events need attribute 'price'",
                        "Stock", "price")
    sink.write(spark, SinkBatch(0, [Output("q", "dead", None, None, None, json.dumps(letter.to_dict()),
                                           letter.reason)]))
    got = DeltaTable(str(target)).to_pandas().sort_values("reason").astype(object)
    got = got.where(got.notna(), None)
    assert [f for f, _ in DeadLetter.FIELDS] == [f.name for f in DeltaTable(str(target)).schema().fields]
    assert got[["reason", "event_type", "attribute"]].values.tolist() == [["malformed", None, None],
                                                                       ["missing_attribute", "Stock", "price"]]
