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


def test_cluster_run_equals_batch(tmp_path: Path) -> None:
    events = make_events(seed=5)
    write_batches(tmp_path / "in", events, n_files=3, seed=1,
                  extra_last=[json.dumps({"type": "Flush", "time": 100_000}), "{not json"])
    query = tmp_path / "negation.greta"
    query.write_text(QUERIES["negation"])
    cli = [sys.executable, "-m", "greta_stream", "run", "--query", str(query), "--input", str(tmp_path / "in"),
           "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), "--lateness", "60",
           "--once", "--shards", "4"]
    with StandaloneCluster(workers=2) as cluster:
        proc = subprocess.run([*cli, "--master", cluster.url], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "batch" in proc.stderr  # progress lines
    got = list(read_jsonl_dir(tmp_path / "out"))
    assert got and normalized(got) == normalized(evaluate(QUERIES["negation"], events))
    assert [d["reason"] for d in read_jsonl_dir(tmp_path / "out" / "dead_letters")] == ["malformed"]


def test_kill_mid_batch_and_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """kill -9 of the driver (and its JVM) in the middle of the stream, then restart from the checkpoint."""
    import os
    import signal
    import time

    events = make_events(seed=6)
    write_batches(tmp_path / "in", events, n_files=6, seed=2, extra_last=[json.dumps({"type": "Flush", "time": 100_000})])
    query = tmp_path / "q.greta"
    query.write_text(QUERIES["stock"])
    cli = [sys.executable, "-m", "greta_stream", "run", "--query", str(query), "--input", str(tmp_path / "in"),
           "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"), "--lateness", "60",
           "--shards", "2", "--max-files-per-trigger", "1", "--master", "local[2]"]
    proc = subprocess.Popen(cli, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(list((tmp_path / "out").glob("part-*.jsonl"))) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, "the job ended before it was killed"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the JVM it started
        proc.wait()
    first = list(read_jsonl_dir(tmp_path / "out"))
    assert first, "nothing was written before the kill"
    done = subprocess.run([*cli, "--once"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = list(read_jsonl_dir(tmp_path / "out"))
    assert len(got) > len(first)
    assert sorted(map(repr, normalized(got))) == sorted(map(repr, normalized(evaluate(QUERIES["stock"], events))))
    assert len(got) == len({repr(r) for r in normalized(got)})  # nothing twice
