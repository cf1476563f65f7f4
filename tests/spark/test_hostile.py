"""Poison and far-future events through a Spark stream (the code of
`greta-stream run`): each is a dead letter with its reason, none moves the
watermark, and the rows equal `evaluate` over the valid events."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.spark.pipeline import run
from greta_stream.testing.hostile import POISON_LINES

pytestmark = pytest.mark.spark

Q = ("RETURN company, COUNT(*), SUM(S.price) PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price "
     "GROUP-BY company WITHIN 20 s SLIDE 10 s")


def stock(t: float, company: int, price: float) -> dict:
    return {"type": "Stock", "time": t, "company": company, "price": price}


POISON = [  # JSON lines: every time here is out of range or not a number
    '{"type": "Stock", "time": 1%s, "company": 1, "price": 5}' % ("0" * 400),
    '{"type": "Stock", "time": -1%s, "company": 1, "price": 5}' % ("0" * 400),
    '{"type": "Stock", "time": 1e18, "company": 1, "price": 5}',
    '{"type": "Stock", "time": 1e400, "company": 1, "price": 5}',
    '{"type": "Stock", "time": NaN, "company": 1, "price": 5}',
    '{"type": "Stock", "time": -Infinity, "company": 1, "price": 5}',
    '{"type": "Stock", "time": "nan", "company": 1, "price": 5}',
    '{"type": "Stock", "time": 1125899906842624, "company": 1, "price": 5}',  # 2**50
]
FUTURE = ['{"type": "Stock", "time": 1000000000000, "company": 1, "price": 5}']  # year 33658: beyond max_future_s


def test_poison_and_future_events_are_dead_letters_and_move_nothing(spark, tmp_path: Path) -> None:  # noqa: ANN001
    valid = [stock(t / 2, t % 3, (t * 7) % 11) for t in range(400)]
    files = [valid[:100], valid[100:200], valid[200:300], valid[300:]]
    extra = [[], POISON[:4] + FUTURE, POISON[4:], ['{"type": "Flush", "time": 100000}']]
    (tmp_path / "in").mkdir()
    base = time.time() - 60
    for i, (chunk, bad) in enumerate(zip(files, extra)):
        path = tmp_path / "in" / f"e{i}.jsonl"
        path.write_text("\n".join([json.dumps(e) for e in chunk] + bad) + "\n")
        os.utime(path, (base + i, base + i))
    cfg = PipelineConfig(
        source=SourceConfig(format="jsonl", path=str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name="q", text=Q, sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out"))],
                             dead_letter=SinkConfig(format="jsonl", path=str(tmp_path / "dead")))],
        checkpoint=str(tmp_path / "chk"), lateness_s=5, once=True, shards=2)
    counts = run(cfg, spark=spark, echo=lambda s: None)["q"]
    got = sorted(json.dumps(r, sort_keys=True) for r in read_jsonl_dir(tmp_path / "out"))
    want = sorted(json.dumps(json.loads(json.dumps(r)), sort_keys=True) for r in evaluate(Q, valid))
    assert got == want and want
    dead = list(read_jsonl_dir(tmp_path / "dead"))
    assert Counter(d["reason"] for d in dead) == {"bad_time": len(POISON), "future": 1}
    assert counts["dead_letters"] == len(POISON) + 1


def write_files(folder: Path, chunks: list[list[bytes]]) -> None:
    """One file per micro-batch (max_files_per_trigger 1), in increasing modification times."""
    folder.mkdir()
    base = time.time() - 60
    for i, lines in enumerate(chunks):
        path = folder / f"e{i}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        os.utime(path, (base + i, base + i))


def one_query(tmp_path: Path, watermark_s: float = 5) -> PipelineConfig:
    return PipelineConfig(
        source=SourceConfig(format="jsonl", path=str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name="q", text=Q, sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out"))],
                             dead_letter=SinkConfig(format="jsonl", path=str(tmp_path / "dead")))],
        checkpoint=str(tmp_path / "chk"), lateness_s=watermark_s, once=True, shards=2)


def test_poison_lines_are_dead_letters_and_the_stream_goes_on(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """A line nested 2,000 deep, one that is not UTF-8, and objects giving their time or
    group twice: each a `malformed` dead letter; the rows are `evaluate`'s."""
    valid = [stock(t / 2, t % 3, (t * 7) % 11) for t in range(300)]
    enc = [json.dumps(e).encode() for e in valid]
    lines = [line for line, _ in POISON_LINES]
    write_files(tmp_path / "in", [enc[:100], enc[100:200] + lines, enc[200:] + [b'{"type": "Flush", "time": 100000}']])
    counts = run(one_query(tmp_path), spark=spark, echo=lambda s: None)["q"]
    got = sorted(json.dumps(r, sort_keys=True) for r in read_jsonl_dir(tmp_path / "out"))
    want = sorted(json.dumps(json.loads(json.dumps(r)), sort_keys=True) for r in evaluate(Q, valid))
    assert got == want and want
    dead = list(read_jsonl_dir(tmp_path / "dead"))
    assert Counter(d["reason"] for d in dead) == {"malformed": len(lines)} == {"malformed": counts["dead_letters"]}
    assert sorted(d["detail"] for d in dead) == sorted(detail for _, detail in POISON_LINES)
    assert counts["dead"].summary().startswith(f"{len(lines)} dead letters: {len(lines)} malformed (")


def test_a_far_future_event_moves_no_watermark(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """An event in 2096 (beyond the wall clock: kept out of Spark's watermark) and one ten
    days from now (three years ahead of this stream of 2023: it moves Spark's watermark,
    which the shards then do not trust): each dead-lettered as `future`; the events after
    them are rows, none is late or lost."""
    start = 1_700_000_000
    valid = [stock(start + t / 2, t % 3, (t * 7) % 11) for t in range(300)]
    enc = [json.dumps(e).encode() for e in valid]
    far = json.dumps(stock(4_000_000_000, 1, 5)).encode()
    soon = json.dumps(stock(time.time() + 10 * 86_400, 2, 5)).encode()
    write_files(tmp_path / "in", [enc[:100], enc[100:150] + [far], enc[150:200] + [soon], enc[200:250], enc[250:]])
    run(one_query(tmp_path), spark=spark, echo=lambda s: None)
    dead = list(read_jsonl_dir(tmp_path / "dead"))
    assert Counter(d["reason"] for d in dead) == {"future": 2}
    got = [json.dumps(r, sort_keys=True) for r in read_jsonl_dir(tmp_path / "out")]
    closed = start + 124.5 - 5  # the last batch's watermark: the latest valid time before it, less lateness
    rows = {json.dumps(json.loads(json.dumps(r)), sort_keys=True): r for r in evaluate(Q, valid)}
    # every window closed by then; shards going by their own clock (Spark's watermark was moved by the
    # event ten days ahead) close theirs with the last batch's events too
    assert {k for k, r in rows.items() if r["window_end"] <= closed} <= set(got) <= set(rows)
    assert len(got) == len(set(got)) > 20


def test_a_type_no_event_has_is_said_at_the_end_of_a_run(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """`stock` for `Stock` through a Spark stream: no row, no dead letter, and the run's
    counts say why (the CLI prints it as an error and exits 1)."""
    write_files(tmp_path / "in", [[json.dumps(stock(t, t % 3, t % 7)).encode() for t in range(50)]])
    cfg = PipelineConfig(
        source=SourceConfig(format="jsonl", path=str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name="q", text=Q.replace("PATTERN Stock S+", "PATTERN stock S+"),
                             sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out"))])],
        checkpoint=str(tmp_path / "chk"), once=True, shards=2)
    got = run(cfg, spark=spark, echo=lambda s: None)["q"]
    assert got["rows"] == got["dead_letters"] == 0
    assert got["problem"] == ("no event is of a type of the query (stock); the events' types are Stock (50); "
                              "did you mean 'Stock' for 'stock'?")


def test_a_link_out_of_the_source_folder_is_not_read(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """A symbolic link in the source folder to a file elsewhere (the service's registry, say):
    none of its lines is an event or shows in a dead letter; each is an `outside_source` dead
    letter naming the link, and the folder's own files are read as ever."""
    valid = [stock(t / 2, t % 3, (t * 7) % 11) for t in range(200)]
    write_files(tmp_path / "in", [[json.dumps(e).encode() for e in valid]])
    secret = tmp_path / "elsewhere" / "registry.jsonl"
    secret.parent.mkdir()
    secret.write_text('{"type": "Stock", "time": 3, "company": 1, "price": 99, "token": "s3cr3t"}\nnot json s3cr3t\n')
    os.utime(secret, (time.time() - 30, time.time() - 30))
    (tmp_path / "in" / "leak.jsonl").symlink_to(secret)
    counts = run(one_query(tmp_path), spark=spark, echo=lambda s: None)["q"]
    got = sorted(json.dumps(r, sort_keys=True) for r in read_jsonl_dir(tmp_path / "out"))
    want = sorted(json.dumps(json.loads(json.dumps(r)), sort_keys=True) for r in evaluate(Q, valid)
                  if r["window_end"] <= valid[-1]["time"] - 5)
    assert got == want and want
    dead = list(read_jsonl_dir(tmp_path / "dead"))
    assert [d["reason"] for d in dead] == ["outside_source", "outside_source"] and counts["dead_letters"] == 2
    assert all("s3cr3t" not in json.dumps(d) and "leak.jsonl is a link" in d["detail"] for d in dead)


def test_links_to_folders_inside_the_source_are_read_once(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """With recursiveFileLookup, a link that loops back to the source folder and a second way into one
    of its folders make Spark list each file many times (a loop: once per level, to the system's
    limit); each event counts once, where its file really is, and no duplicate is a dead letter."""
    valid = [stock(t / 2, t % 3, (t * 7) % 11) for t in range(200)]
    enc = [json.dumps(e).encode() for e in valid]
    write_files(tmp_path / "in", [enc[:100]])
    write_files(tmp_path / "in" / "sub", [enc[100:]])
    (tmp_path / "in" / "loop").symlink_to(tmp_path / "in")
    (tmp_path / "in" / "sub-again").symlink_to(tmp_path / "in" / "sub")
    cfg = one_query(tmp_path).model_copy(update={"source": SourceConfig(
        format="jsonl", path=str(tmp_path / "in"), options={"recursiveFileLookup": "true"})})
    counts = run(cfg, spark=spark, echo=lambda s: None)["q"]
    got = sorted(json.dumps(r, sort_keys=True) for r in read_jsonl_dir(tmp_path / "out"))
    want = sorted(json.dumps(json.loads(json.dumps(r)), sort_keys=True) for r in evaluate(Q, valid)
                  if r["window_end"] <= valid[-1]["time"] - 5)
    assert got == want and want
    assert counts["dead_letters"] == 0 and not list(read_jsonl_dir(tmp_path / "dead"))


def test_the_bound_on_times_ahead_of_the_wall_clock_is_read_per_batch_in_code_compiled_once(
        spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Spark's watermark column leaves out an event more than max_future_s (30 days) ahead of the
    batch's wall clock and keeps one 10 days ahead, in two micro-batches a second apart; and the
    code Spark generates for the stage is the same in both (the batch's timestamp is not written
    into it: a new text would be compiled again at every batch)."""
    from greta_stream.runtime import RunSpec
    from greta_stream.runtime.queryset import QuerySet
    from greta_stream.spark.keying import SECONDS_COLUMN, keyed_by_shard

    queries = QuerySet.of({"q": RunSpec.create(Q)})
    debug = spark._jvm.org.apache.spark.sql.execution.debug.package
    codes, seen = [], {}
    for n in range(2):
        now = time.time()
        times = {"now": now, "ten days": now + 10 * 86_400, "forty days": now + 40 * 86_400}
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"{n}.jsonl").write_text("".join(json.dumps(stock(t, 1, 5)) + "\n" for t in times.values()))
        keyed, _ = keyed_by_shard(spark.readStream.text(str(tmp_path / "in")), queries)
        query = (keyed.select("value", SECONDS_COLUMN).writeStream.format("json").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
        query.awaitTermination()
        plan = query._jsq.streamingQuery().lastExecution().executedPlan()
        codes.append([line for line in debug.codegenString(plan).splitlines() if line.startswith("/* ")])
        written = [json.loads(line) for f in sorted((tmp_path / "out").glob("part-*")) for line in f.read_text().splitlines()]
        by_time = {json.loads(r["value"])["time"]: r.get(SECONDS_COLUMN) for r in written}
        seen[n] = {name: by_time[t] is not None for name, t in times.items()}
        time.sleep(1)
    assert seen[0] == seen[1] == {"now": True, "ten days": True, "forty days": False}
    assert codes[0] and codes[0] == codes[1]
