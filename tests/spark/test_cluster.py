"""The main job on a Spark standalone cluster (one master, two workers on 127.0.0.1).

The job runs as its own driver process through the command line, exactly as
a user would start it with `--master spark://...`; its output equals
`evaluate` over the same events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_streaming import QUERIES, make_events, normalized

from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.testing.cluster import StandaloneCluster
from greta_stream.testing.files import write_batches

pytestmark = pytest.mark.spark


def test_cluster_run_equals_batch(tmp_path: Path, standalone_cluster: StandaloneCluster) -> None:
    events = make_events(seed=5)
    write_batches(tmp_path / "in", events, n_files=3, seed=1,
                  extra_last=[json.dumps({"type": "Flush", "time": 100_000}), "{not json"])
    query = tmp_path / "negation.greta"
    query.write_text(QUERIES["negation"])
    cli = [sys.executable, "-m", "greta_stream", "run", "--query", str(query), "--input", str(tmp_path / "in"),
           "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), "--lateness", "60",
           "--once", "--shards", "4"]
    proc = subprocess.run([*cli, "--master", standalone_cluster.url], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "batch" in proc.stderr  # progress lines
    got = list(read_jsonl_dir(tmp_path / "out"))
    assert got and normalized(got) == normalized(evaluate(QUERIES["negation"], events))
    assert [d["reason"] for d in read_jsonl_dir(tmp_path / "out" / "dead_letters")] == ["malformed"]
