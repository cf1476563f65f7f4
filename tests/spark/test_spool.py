"""A query whose sinks fail: its output waits in a spool, up to `max_spool_mb`,
then the stream stops with a message saying what to do; nothing is lost."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.errors import SpoolFull
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.spark.pipeline import run

pytestmark = pytest.mark.spark

Q = ("RETURN company, COUNT(*) PATTERN Stock S+ WHERE [company] AND S.price > NEXT(S).price "
     "GROUP-BY company WITHIN 4 s SLIDE 2 s")


def test_a_full_spool_stops_the_stream_and_a_rerun_delivers_everything(spark, tmp_path: Path) -> None:  # noqa: ANN001
    events = [{"type": "Stock", "time": t / 4, "company": t % 5, "price": float((t * 7) % 13)} for t in range(800)]
    (tmp_path / "in").mkdir()
    base = time.time() - 60
    for i in range(8):  # one file per micro-batch
        path = tmp_path / "in" / f"e{i}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events[i * 100:(i + 1) * 100]))
        os.utime(path, (base + i, base + i))
    out = tmp_path / "out"
    blocks = [out / f".part-{i:010d}.jsonl.tmp" for i in range(20)]
    for block in blocks:  # a folder where each batch's temporary file goes: every write fails
        block.mkdir(parents=True)

    def config(max_spool_mb: float) -> PipelineConfig:
        return PipelineConfig(
            source=SourceConfig(format="jsonl", path=str(tmp_path / "in"), max_files_per_trigger=1),
            queries=[QueryConfig(name="q", text=Q, sinks=[SinkConfig(format="jsonl", path=str(out))],
                                 max_spool_mb=max_spool_mb)],
            checkpoint=str(tmp_path / "chk"), once=True, shards=2)

    with pytest.raises(SpoolFull, match=r"query q: its sinks failed .* max_spool_mb = 0.02 .* Nothing is lost"):
        run(config(0.02), spark=spark, echo=lambda s: None)  # 20 KB: a few batches
    spool = list((tmp_path / "chk" / "source" / "queries" / "q" / "spool").glob("batch-*.jsonl"))
    assert spool and sum(p.stat().st_size for p in spool) <= 20_000

    for block in blocks:  # the sink works again
        block.rmdir()
    counts = run(config(256), spark=spark, echo=lambda s: None)["q"]
    assert not counts.get("failed")
    got = sorted(json.dumps(r, sort_keys=True) for r in read_jsonl_dir(out))
    want = sorted(json.dumps(json.loads(json.dumps(r)), sort_keys=True) for r in evaluate(Q, events)
                  if r["window_end"] <= events[-1]["time"])
    assert got == want and want
    assert not list((tmp_path / "chk" / "source" / "queries" / "q" / "spool").glob("batch-*.jsonl"))
