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
from greta_stream.spark.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig, run

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
        source=SourceConfig("jsonl", str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig("q", Q, [SinkConfig("jsonl", str(tmp_path / "out"))],
                             SinkConfig("jsonl", str(tmp_path / "dead")))],
        checkpoint=str(tmp_path / "chk"), watermark_delay_s=5, once=True, shards=2)
    counts = run(cfg, spark=spark, echo=lambda s: None)["q"]
    got = sorted(json.dumps(r, sort_keys=True) for r in read_jsonl_dir(tmp_path / "out"))
    want = sorted(json.dumps(json.loads(json.dumps(r)), sort_keys=True) for r in evaluate(Q, valid))
    assert got == want and want
    dead = list(read_jsonl_dir(tmp_path / "dead"))
    assert Counter(d["reason"] for d in dead) == {"bad_time": len(POISON), "future": 1}
    assert counts["dead_letters"] == len(POISON) + 1
