"""Chaos through `greta-stream run --config`: valid, malformed, poison,
far-future, late and duplicate events, a `kill -9` of the job mid-stream and
a restart from its checkpoint, for three queries of one stream: one of the
columnar engine (whose rows also go to a Delta table partitioned by company,
its dead letters to a Delta table), one of the general engine (whose state is
its log of events) and one whose partitions are not its groups (no GROUP-BY,
partitioned by company: another shard slot of the stream). Each query's rows
equal `evaluate` over the valid events in every sink, none lost or repeated
(the Delta table read back with Spark and with delta-rs, no JVM), and its
dead letters account for every other record."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.connectors.sinks import read_jsonl_dir

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

Q = ("RETURN company, COUNT(*), SUM(S.price), MAX(S.price) PATTERN Stock S+ WHERE [company] AND "
     "S.price > NEXT(S).price GROUP-BY company WITHIN 20 s SLIDE 10 s")
# run with `engine: general` (the columnar engine takes `!=` too): its state is a log of events, replayed
# after the kill
Q_GENERAL = Q.replace("S.price > NEXT(S).price", "S.price != NEXT(S).price")
Q_UNGROUPED = ("RETURN COUNT(*), AVG(S.price), MIN(S.price) PATTERN Stock S+ WHERE [company] AND "
               "S.price < NEXT(S).price WITHIN 30 s SLIDE 10 s")
QUERIES = {"query1": Q, "query2": Q_GENERAL, "query3": Q_UNGROUPED}
FILES, SPAN_S, LATENESS_S = 6, 50, 5

# (file, JSON line, reason): what each hostile record is and where it goes
HOSTILE = [
    (1, "{not json", "malformed"),
    (2, '{"type": "Stock", "company": 1, "price": 3}', "missing_time"),
    (2, '{"type": "Stock", "time": NaN, "company": 1, "price": 3}', "bad_time"),
    (3, '{"type": "Stock", "time": 1e18, "company": 1, "price": 3}', "bad_time"),
    (3, '{"type": "Stock", "time": 1000000000000, "company": 1, "price": 3}', "future"),
    (4, '{"type": "Stock", "time": 1.5, "company": 2, "price": 3}', "late"),
    (5, '{"type": "Stock", "time": 2.5, "company": 0, "price": 9}', "late"),
    (5, '{"type": "Stock", "time": 60, "company": "x", "price": "high"}', "wrong_type"),
]


def files_of_events(tmp: Path) -> list[dict]:
    """The input files (one per micro-batch, increasing modification times) and the valid events in them."""
    rnd = random.Random(7)
    valid: list[dict] = []
    stamp = time.time() - 3600
    (tmp / "in").mkdir()
    for i in range(FILES):
        chunk = [{"type": "Stock", "time": round(i * SPAN_S + rnd.uniform(0, SPAN_S), 3), "company": rnd.randrange(3),
                  "price": rnd.randrange(20)} for _ in range(60)]
        chunk += rnd.sample(chunk, 5)  # duplicates: the same record twice is two events
        rnd.shuffle(chunk)
        valid += chunk
        lines = [json.dumps(e) for e in chunk] + [line for f, line, _ in HOSTILE if f == i]
        if i == FILES - 1:
            lines.append(json.dumps({"type": "Flush", "time": 100_000}))  # closes every window
        path = tmp / "in" / f"events-{i}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (stamp + i, stamp + i))
    return valid


def config(tmp: Path) -> Path:
    """The three queries on one source, one file per micro-batch; query1 also to Delta (rows and dead letters)."""
    def query(name: str) -> dict:
        sinks = [{"format": "jsonl", "path": f"out/{name}"}]
        dead = {"format": "jsonl", "path": f"out/{name}/dead_letters"}
        if name == "query1":
            sinks.append({"format": "delta", "path": "delta/rows", "partition_by": ["company"]})
            dead = {"format": "delta", "path": "delta/dead"}
        return {"name": name, "text": QUERIES[name], "sinks": sinks, "dead_letter": dead,
                "engine": "general" if name == "query2" else "auto"}

    doc = {"source": {"format": "jsonl", "path": "in", "max_files_per_trigger": 1}, "checkpoint": "chk",
           "lateness_s": LATENESS_S, "shards": 2, "master": "local[2]", "queries": [query(n) for n in QUERIES]}
    path = tmp / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def as_rows(records: list[dict]) -> list[tuple]:
    """query1's rows as tuples of one type per column, whatever the sink's types (Delta: text groups, decimal counts)."""
    return sorted((float(r["window_start"]), float(r["window_end"]), str(r["company"]), int(r["count"]),
                   float(r["sum_S_price"]), float(r["max_S_price"])) for r in records)


@pytest.mark.usefixtures("subprocesses")
def test_chaos_run_with_kill_and_restart(spark, tmp_path: Path) -> None:  # noqa: ANN001
    valid = files_of_events(tmp_path)
    out, delta = tmp_path / "out", tmp_path / "delta"
    cli = [sys.executable, "-m", "greta_stream", "run", "--config", str(config(tmp_path))]
    proc = subprocess.Popen(cli, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while len(list((delta / "rows" / "_delta_log").glob("*.json"))) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, "the job ended before it was killed"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream, right after a commit of the table
        proc.wait()
    assert list(read_jsonl_dir(out / "query1")), "nothing was written before the kill"
    done = subprocess.run([*cli, "--once"], capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr[-3000:]

    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "in").iterdir())
    for name, q in QUERIES.items():
        got = [dumps(r) for r in read_jsonl_dir(out / name)]
        want = [dumps(loads(dumps(r))) for r in evaluate(q, valid)]
        assert len(got) == len(set(got)), f"{name}: a row was written twice"
        assert sorted(got) == sorted(want) and want, name
        if name == "query1":
            dead = DeltaTable(str(delta / "dead")).to_pandas().to_dict("records")
        else:
            dead = list(read_jsonl_dir(out / name / "dead_letters"))
        assert Counter(d["reason"] for d in dead) == Counter(reason for _, _, reason in HOSTILE), name
        assert lines == len(valid) + len(dead) + 1  # + the Flush event, of no pattern type

    table = DeltaTable(str(delta / "rows"))
    by_rs = as_rows(table.to_pandas().to_dict("records"))
    by_spark = as_rows([r.asDict() for r in spark.read.format("delta").load(str(delta / "rows")).collect()])
    assert len(by_rs) == len(set(by_rs)), "a row was written twice to the Delta table"
    assert by_rs == by_spark == as_rows(evaluate(Q, valid))
    assert table.metadata().partition_columns == ["company"]
    schema = {f.name: str(f.dataType) for f in spark.read.format("delta").load(str(delta / "rows")).schema}
    # JSON text input: group columns as text, SUM and MAX as doubles (typed input keeps its types)
    assert schema == {"window_start": "DoubleType()", "window_end": "DoubleType()", "company": "StringType()",
                      "count": "DecimalType(38,0)", "sum_S_price": "DoubleType()", "max_S_price": "DoubleType()"}
    dead = DeltaTable(str(delta / "dead")).to_pandas()
    assert json.loads(dead[dead.reason == "missing_time"].event.iloc[0])["company"] == 1
