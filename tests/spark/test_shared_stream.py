"""A pipeline's queries over one source run as one Spark stream; its query set may change between runs.

Restarted from its checkpoint with a query added and one removed, the
stream's other queries go on from their state (nothing lost, nothing twice)
and the added query starts where the stream was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_streaming import QUERIES, make_events, normalized, pipeline

from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.pipeline import QueryConfig, SinkConfig, streams
from greta_stream.spark.pipeline import run
from greta_stream.testing.files import write_batches

pytestmark = pytest.mark.spark


def test_one_stream_per_source_and_a_changed_query_set(spark, tmp_path: Path) -> None:  # noqa: ANN001
    events = make_events(seed=4)
    staging = tmp_path / "staging"
    write_batches(staging, events, n_files=4, seed=5, extra_last=[json.dumps({"type": "Flush", "time": 100_000})])
    files = sorted(staging.iterdir(), key=lambda f: f.stat().st_mtime)
    (tmp_path / "in").mkdir()
    for f in files[:2]:
        shutil.copy2(f, tmp_path / "in" / f.name)  # keeps the mtime: Spark reads files in mtime order
    cfg = pipeline(tmp_path, ["stock", "runs", "negation"], shards=2)
    assert [s.name for s in streams(cfg)] == ["source"]  # every query reads the pipeline's source: one stream
    run(cfg, spark=spark, echo=lambda s: None)
    seen = [e for f in files[:2] for e in map(json.loads, f.read_text().splitlines()) if isinstance(e, dict)]

    for f in files[2:]:
        shutil.copy2(f, tmp_path / "in" / f.name)
    later = pipeline(tmp_path, ["stock", "runs"], shards=2)  # "negation" removed, a new query added
    later.queries.append(QueryConfig(name="negation-2", text=QUERIES["negation"], sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out2"))]))
    later = later.compile()  # the new query compiled, the others kept
    run(later, spark=spark, echo=lambda s: None)
    for name in ("stock", "runs"):
        got = list(read_jsonl_dir(tmp_path / "out" / name))
        assert normalized(got) == normalized(evaluate(QUERIES[name], events)), name
        assert len(got) == len(normalized(got))  # nothing twice
    rest = [e for e in events if e not in seen]  # the added query saw the files read after it joined
    assert normalized(list(read_jsonl_dir(tmp_path / "out2"))) == normalized(evaluate(QUERIES["negation"], rest))


def test_a_query_joining_and_leaving_never_changes_another_querys_rows(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """The stock query groups by sector; a query without GROUP-BY joins the stream for
    one run and leaves again; a third query with less lateness comes and goes too.
    The stock query's rows are those it gives alone, nothing twice."""
    events = make_events(seed=8)
    staging = tmp_path / "staging"
    write_batches(staging, events, n_files=4, seed=9, extra_last=[json.dumps({"type": "Flush", "time": 100_000})])
    files = sorted(staging.iterdir(), key=lambda f: f.stat().st_mtime)
    (tmp_path / "in").mkdir()
    total = QUERIES["stock"].replace("sector, COUNT(*)", "COUNT(*)").replace(" GROUP-BY sector", "")
    for i, f in enumerate(files):
        shutil.copy2(f, tmp_path / "in" / f.name)
        cfg = pipeline(tmp_path, ["stock"], shards=2)
        if i in (1, 2):
            cfg.queries.append(QueryConfig(name="total", text=total, sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out-total"))]))
            cfg = cfg.compile()
        run(cfg, spark=spark, echo=lambda s: None)
    got = list(read_jsonl_dir(tmp_path / "out" / "stock"))
    assert normalized(got) == normalized(evaluate(QUERIES["stock"], events))
    assert len(got) == len(normalized(got))
