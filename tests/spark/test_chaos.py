"""Chaos through `greta-stream run`: valid, malformed, poison, far-future, late
and duplicate events, a `kill -9` of the job mid-stream and a restart from
its checkpoint, for three queries of one stream: one of the columnar engine,
one of the general engine (whose state is its log of events) and one whose
partitions are not its groups (no GROUP-BY, partitioned by company: another
shard slot of the stream). Each query's rows equal `evaluate` over the valid
events, none lost or repeated, and its dead letters account for every other
record."""

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

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.connectors.sinks import read_jsonl_dir

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

Q = ("RETURN company, COUNT(*), SUM(S.price), MAX(S.price) PATTERN Stock S+ WHERE [company] AND "
     "S.price > NEXT(S).price GROUP-BY company WITHIN 20 s SLIDE 10 s")
# `!=` keeps it on the general engine: its state is a log of events, replayed after the kill
Q_GENERAL = Q.replace("S.price > NEXT(S).price", "S.price != NEXT(S).price")
Q_UNGROUPED = ("RETURN COUNT(*), AVG(S.price), MIN(S.price) PATTERN Stock S+ WHERE [company] AND "
               "S.price < NEXT(S).price WITHIN 30 s SLIDE 10 s")
QUERIES = {"query1": Q, "query2": Q_GENERAL, "query3": Q_UNGROUPED}  # the names `run` gives texts by flag
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


def test_chaos_run_with_kill_and_restart(tmp_path: Path) -> None:
    valid = files_of_events(tmp_path)
    out = tmp_path / "out"
    cli = [sys.executable, "-m", "greta_stream", "run", *(x for q in QUERIES.values() for x in ("--query", q)),
           "--input", str(tmp_path / "in"), "--output", str(out), "--checkpoint", str(tmp_path / "chk"),
           "--lateness", str(LATENESS_S), "--shards", "2", "--max-files-per-trigger", "1", "--master", "local[2]"]
    proc = subprocess.Popen(cli, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(list((out / "query1").glob("part-*.jsonl"))) < 3 and time.monotonic() < deadline:
            assert proc.poll() is None, "the job ended before it was killed"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
        proc.wait()
    assert list(read_jsonl_dir(out / "query1")), "nothing was written before the kill"
    done = subprocess.run([*cli, "--once"], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]

    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "in").iterdir())
    for name, q in QUERIES.items():
        got = [dumps(r) for r in read_jsonl_dir(out / name)]
        want = [dumps(loads(dumps(r))) for r in evaluate(q, valid)]
        assert len(got) == len(set(got)), f"{name}: a row was written twice"
        assert sorted(got) == sorted(want) and want, name
        dead = list(read_jsonl_dir(out / name / "dead_letters"))
        assert Counter(d["reason"] for d in dead) == Counter(reason for _, _, reason in HOSTILE), name
        assert lines == len(valid) + len(dead) + 1  # + the Flush event, of no pattern type
