"""CET mode on local Spark: streaming trends equal `evaluate(mode="cet")`.

Events arrive shuffled over several micro-batches (one file each); a final
event of an unused type moves the watermark past every window. One output
row per trend lands in the query's sink.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.spark.pipeline import run
from greta_stream.testing.files import write_batches

pytestmark = pytest.mark.spark

QUERIES = {  # every query costs its own micro-batches
    "negation": "RETURN TRENDS PATTERN SEQ(NOT E, A+, NOT SEQ(C, D), B) WHERE [g] AND A.v <= NEXT(A).v "
                "GROUP-BY g WITHIN 8 s SLIDE 4 s",
    # equality edges: range-edge graphs (cet/ranges.py) in the shards' pickled state
    "equality": "RETURN TRENDS PATTERN SEQ(A+, B) WHERE [g] AND A.v = NEXT(A).v GROUP-BY g WITHIN 8 s SLIDE 4 s",
}
WITH_EVENTS = {"equality"}  # each trend's aliases and events in its row, as `evaluate(with_events=True)`


def make_events(seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    events: list[dict] = []
    for t in range(0, 60):
        events.append({"type": rnd.choice("AABCDE"), "time": t, "v": rnd.randrange(5), "g": rnd.randrange(2)})
    for i, e in enumerate(events):
        e["id"] = i
    return events


def normalized(rows: list[dict]) -> list[str]:
    return sorted(dumps(loads(dumps(r))) for r in rows)


def test_streaming_cet_equals_batch(spark, tmp_path: Path) -> None:  # noqa: ANN001
    events = make_events()
    write_batches(tmp_path / "in", events, n_files=3, extra_last=[json.dumps({"type": "Flush", "time": 100_000})])
    cfg = PipelineConfig(
        source=SourceConfig(format="jsonl", path=str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name=n, text=q, sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out" / n))],
                             with_events=n in WITH_EVENTS)  # RETURN TRENDS: cet
                 for n, q in QUERIES.items()],
        checkpoint=str(tmp_path / "chk"), lateness_s=30, once=True, shards=3,
    )
    run(cfg, spark=spark, echo=lambda s: None)
    for name, text in QUERIES.items():
        got = list(read_jsonl_dir(tmp_path / "out" / name))
        want = evaluate(text, events, mode="cet", with_events=name in WITH_EVENTS)
        assert want and normalized(got) == normalized(want), name
        assert all("trend" in r and r["total"] >= 1 for r in got)
        assert all(("events" in r) == (name in WITH_EVENTS) for r in got), name
