"""Kafka in, Kafka out, on a real KRaft broker and local Spark: results equal `evaluate`.

Generated Stock events go as JSON to a topic (two partitions, keyed by company);
the pipeline reads them through Spark's Kafka source in several micro-batches
and writes rows and dead letters through Spark's Kafka writer. A consumer
reads the result topic back: the payloads equal `evaluate` over the same
events, and each key (query, group, window) is there exactly once, also when
the query is replayed after a crash, when the sink crashed mid-batch, and
when the broker restarts under a running query.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.demo.broker import KafkaBroker, consume_all, end_offsets, produce
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.spark.kafka import KafkaSink, Message, SinkLog, row_key
from greta_stream.spark.pipeline import start

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

QUERIES = {
    "down": "RETURN sector, COUNT(*), AVG(S.price), MAX(S.price) PATTERN Stock S+ "
            "WHERE [company, sector] AND S.price > NEXT(S).price GROUP-BY sector WITHIN 60 s SLIDE 20 s",
    "up": "RETURN company, COUNT(*), SUM(S.volume), MIN(S.price) PATTERN Stock S+ "
          "WHERE [company] AND S.price < NEXT(S).price GROUP-BY company WITHIN 30 s SLIDE 10 s",
}
FLUSH = {"type": "Flush", "time": 100_000}  # moves the watermark past every window
BAD = ["{not json", json.dumps({"type": "Stock", "company": 1, "sector": 1, "price": 1.0})]


def company(e: Any) -> Any:
    """Partition key: one company's events stay in order (bad records have none)."""
    return e.get("company") if isinstance(e, dict) else None


def normalized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((loads(dumps(r)) for r in rows), key=repr)


def pipeline(tmp: Path, bootstrap: str, source: str, results: str, dead: str, names: list[str],
             once: bool = True, lateness_s: float = 20) -> PipelineConfig:
    return PipelineConfig(
        source=SourceConfig(format="kafka", bootstrap_servers=bootstrap, topic=source,
                            options={"maxOffsetsPerTrigger": "500"}),
        queries=[QueryConfig(name=n, text=QUERIES[n], sinks=[SinkConfig(format="kafka", bootstrap_servers=bootstrap, topic=results)],
                             dead_letter=SinkConfig(format="kafka", bootstrap_servers=bootstrap, topic=dead)) for n in names],
        # events come in time order per partition; 20 s covers the skew between the two partitions
        checkpoint=str(tmp / "chk"), lateness_s=lateness_s, once=once, shards=2,
        trigger_interval_s=None if once else 1.0,
    )


def run_once(spark: Any, cfg: PipelineConfig) -> list[Any]:
    started = start(spark, cfg)
    for q, _ in started:
        q.awaitTermination()
    return [w for _, w in started]


def by_query(messages: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        out.setdefault(m["headers"]["greta.query"], []).append(m)
    return out


def assert_exactly_once(messages: list[dict[str, Any]], events: list[dict[str, Any]], names: list[str]) -> None:
    """Every query's rows equal `evaluate`, and no key comes twice."""
    got = by_query(messages)
    for name in names:
        mine = got.get(name, [])
        dup = [k for k, n in Counter(m["key"] for m in mine).items() if n > 1]
        assert dup == [], f"{name}: duplicated keys {dup[:3]}"
        assert normalized([json.loads(m["value"]) for m in mine]) == normalized(evaluate(QUERIES[name], events)), name


def test_kafka_source_and_sink_equal_evaluate_across_a_replayed_batch(
        spark, kafka_broker: KafkaBroker, topics, generators, tmp_path: Path) -> None:  # noqa: ANN001
    """Two queries share the topics; the first run is cut after its last batch's Kafka write.

    The crash is made exact by removing the last entry of the checkpoint's
    commit log of the stream both queries share (what a kill between the
    write and Spark's commit leaves): the second run replays that batch and
    query "down"'s rows sink skips it. Its dead-letter sink is set back to "started", as if it had crashed
    in the middle of its write: it reads the batch back and sends what is
    missing (nothing). The second run also brings the rest of the stream.
    """
    # one source partition: batch 0 is exactly the first 500 events, batch 1 the bad records and 250
    # events more (25 s of event time: windows of both queries close in it, and a window's row leaves in
    # the batch whose events close it), and batch 1 is the last of the first run
    (source,) = topics("events")
    results, dead = topics("results", "dead", partitions=2)
    events = generators.stock(1000, seed=3, companies=8, sectors=3, rate=10)
    half = len(events) // 2
    first_run = half + 250
    produce(kafka_broker.bootstrap, source, [*events[:half], *BAD, *events[half:first_run]], key=company)
    cfg = pipeline(tmp_path, kafka_broker.bootstrap, source, results, dead, list(QUERIES))
    # no batch without data after batch 1 (Spark runs one when the watermark moved; its rows, if any,
    # would make it the last): batch 1 is the one the crash cuts
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        run_once(spark, cfg)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")

    commits = tmp_path / "chk" / "source" / "commits"  # one stream (one checkpoint) for the queries of the topic
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    first = by_query(consume_all(kafka_broker.bootstrap, results))["down"]
    written = [m for m in first if m["headers"]["greta.batch"] == str(last)]
    assert written, (last, Counter(m["headers"]["greta.batch"] for m in first))  # windows closed by batch 1
    dead_log = SinkLog(tmp_path / "chk" / "source" / "queries" / "down" / "greta-sinks" / "dead-letter")
    entry = dead_log.get(last)
    assert entry is not None and entry["done"]
    dead_log.put(last, {**entry, "done": False})

    produce(kafka_broker.bootstrap, source, events[first_run:], key=company)
    produce(kafka_broker.bootstrap, source, [FLUSH])  # after the rest: nothing is late
    writers = {name: w for stream in run_once(spark, cfg) for name, w in stream.writers.items()}  # resumes
    assert writers["down"].sinks[0].skipped == len(written)  # batch `last` again: all its rows were there

    messages = consume_all(kafka_broker.bootstrap, results)
    assert_exactly_once(messages, events, list(QUERIES))
    m = messages[0]
    query, group, w_start, w_end = json.loads(m["key"])
    row = json.loads(m["value"])
    assert (row["window_start"], row["window_end"]) == (w_start, w_end)
    assert [row["sector" if query == "down" else "company"]] == group
    assert int(m["headers"]["greta.batch"]) >= 0 and m["headers"]["greta.kind"] == "row"

    dead_letters = by_query(consume_all(kafka_broker.bootstrap, dead))
    for name in QUERIES:
        reasons = sorted(json.loads(d["value"])["reason"] for d in dead_letters[name])
        assert reasons == ["malformed", "missing_time"], name
        assert all(d["headers"]["greta.kind"] == "dead" for d in dead_letters[name])


def test_sink_completes_a_partial_batch(spark, kafka_broker: KafkaBroker, topics, tmp_path: Path) -> None:  # noqa: ANN001
    """A batch that crashed after 8 of 20 messages: its replay sends the other 12, a second replay none.

    Without a sink log the same replay is at-least-once: every message comes
    again, byte for byte with the same key and batch id (consumers dedupe by key).
    """
    (topic, plain) = topics("results", "plain")
    msgs = [Message(row_key("q", "[1]", w, w + 10), json.dumps({"window_start": w, "n": w})) for w in range(20)]
    sink = KafkaSink("q", "row", topic, kafka_broker.bootstrap, log_dir=tmp_path / "log")
    assert sink.send(spark, 7, msgs[:8]) == 8
    entry = sink.log.get(7)  # type: ignore[union-attr]
    sink.log.put(7, {**entry, "done": False})  # type: ignore[union-attr]  # as if the process died mid-write
    assert sink.send(spark, 7, msgs) == 12
    assert sink.send(spark, 7, msgs) == 0  # replayed once more, after it completed
    got = consume_all(kafka_broker.bootstrap, topic)
    assert sorted(m["key"] for m in got) == sorted(m.key for m in msgs)
    assert {m["headers"]["greta.batch"] for m in got} == {"7"}

    at_least_once = KafkaSink("q", "row", plain, kafka_broker.bootstrap)
    at_least_once.send(spark, 7, msgs)
    at_least_once.send(spark, 7, msgs)
    again = consume_all(kafka_broker.bootstrap, plain)
    assert Counter((m["key"], m["value"], m["headers"]["greta.batch"]) for m in again) == Counter(
        {(m.key, m.value, "7"): 2 for m in msgs})


def test_broker_restart_under_a_running_query(spark, kafka_broker: KafkaBroker, topics, generators,  # noqa: ANN001
                                              tmp_path: Path) -> None:
    """Controlled broker restart while the query runs: no result lost, none twice.

    If the query fails while the broker is away (the source gives up fetching
    offsets), it is started again from its checkpoint, as a supervisor (the
    service, or `greta-stream run` under systemd) would do.
    """
    source, results, dead = topics("events", "results", "dead", partitions=2)
    events = generators.stock(1000, seed=5, companies=6, sectors=3, rate=10)
    half = len(events) // 2
    expected = len(evaluate(QUERIES["down"], events))
    produce(kafka_broker.bootstrap, source, events[:half], key=company)
    # events produced while the query reads them: a micro-batch may take one partition's later events before
    # the other's earlier ones are written (on a busy machine), so the lateness covers the whole stream (100 s):
    # what this test checks is the broker's restart, and no event is to be late
    cfg = pipeline(tmp_path, kafka_broker.bootstrap, source, results, dead, ["down"], once=False, lateness_s=120)
    running = start(spark, cfg)
    restarts = 0

    def restarted_if_failed() -> None:
        nonlocal running, restarts
        if any(q.exception() is not None for q, _ in running):
            _stop(running)
            running, restarts = start(spark, cfg), restarts + 1

    try:
        wait_for(lambda: _batches_done(running) >= 1, "a first micro-batch")
        kafka_broker.restart()
        produce(kafka_broker.bootstrap, source, events[half:], key=company)
        ends = end_offsets(kafka_broker.bootstrap, source)

        def read_through() -> bool:  # every event read before the flush moves the watermark past them all:
            restarted_if_failed()  # a partition read later than the flush's would see its events late
            return any(_read_up_to(q.lastProgress, source) == ends for q, _ in running)

        wait_for(read_through, "every event read", timeout_s=180, every_s=1)
        produce(kafka_broker.bootstrap, source, [FLUSH])

        def all_there() -> bool:
            restarted_if_failed()
            keys = {m["key"] for m in consume_all(kafka_broker.bootstrap, results)}
            return len(keys) >= expected

        wait_for(all_there, f"{expected} result rows", timeout_s=180, every_s=2)
    finally:
        _stop(running)
    print(f"query restarts while the broker restarted: {restarts}")
    assert restarts <= 3
    assert_exactly_once(consume_all(kafka_broker.bootstrap, results), events, ["down"])


def _read_up_to(progress: dict[str, Any] | None, topic: str) -> dict[int, int] | None:
    """The offsets of `topic` a stream's last micro-batch read up to, per partition (None: none yet)."""
    for src in (progress or {}).get("sources", []):
        offsets = src.get("endOffset")
        offsets = json.loads(offsets) if isinstance(offsets, str) else offsets
        if isinstance(offsets, dict) and topic in offsets:
            return {int(p): int(o) for p, o in offsets[topic].items()}
    return None


def _batches_done(running: list[Any]) -> int:
    return sum(len(q.recentProgress) for q, _ in running)


def _stop(running: list[Any]) -> None:
    for q, _ in running:
        q.stop()


def wait_for(cond: Any, what: str, timeout_s: float = 120, every_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout_s:.0f} s")
        time.sleep(every_s)


def test_a_sink_whose_broker_is_down_says_so(spark, kafka_broker: KafkaBroker, tmp_path: Path) -> None:  # noqa: ANN001
    """Not Py4J's "An error occurred while calling o123.save": the sink, its broker and Kafka's reason."""
    from greta_stream.errors import SinkError

    sink = KafkaSink("q", "row", "results", "127.0.0.1:1", {"kafka.max.block.ms": 3000,
                                                              "kafka.request.timeout.ms": 3000,
                                                              "kafka.delivery.timeout.ms": 3000})
    with pytest.raises(SinkError) as caught:
        sink.send(spark, 0, [Message("k", "{}")])
    text = str(caught.value)
    assert text.startswith("kafka sink of query q: cannot write to topic results at 127.0.0.1:1: "), text
    assert "Exception: " in text and "\n" not in text, text
    assert "Py4J" not in text and "An error occurred while calling" not in text, text
