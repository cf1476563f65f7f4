"""Deferred CET windows on Spark: extracted by a distributed job in the batch writer.

Bank 0 has windows of about 30 checks, bank 1 of a few: with
`distribute_over = 12` only bank 0's windows leave the operator as deferred
windows, and the batch writer extracts them as Spark jobs. The sinks must
hold exactly the records of batch CET evaluation and of the same query run
without distribution: per (window, group) the same trends in the same
order, with the same totals and `truncated`; and a replayed batch (its
commit removed from the checkpoint) writes its rows once.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.spark.cet_distributed import JOB_GROUP
from greta_stream.spark.pipeline import run
from greta_stream.testing.cluster import StandaloneCluster
from greta_stream.testing.files import write_batches

pytestmark = pytest.mark.spark

Q = "RETURN TRENDS PATTERN Check C+ WHERE [bank] AND C.src = NEXT(C).dest GROUP-BY bank WITHIN 20 s SLIDE 10 s"
FLUSH = {"type": "Flush", "time": 100_000}
OVER = 12


def checks(seed: int = 7) -> list[dict]:
    rnd = random.Random(seed)
    events = []
    for bank, n, accounts in ((0, 90, 6), (1, 10, 4)):
        for _ in range(n):
            src, dest = rnd.sample(range(accounts), 2)
            events.append({"type": "Check", "time": rnd.randrange(60), "bank": bank, "src": src, "dest": dest})
    for i, e in enumerate(events):
        e["id"] = i
    return events


def by_window(records: list[dict]) -> dict[tuple, list[tuple]]:
    """(window, group) -> its records in order: (trend, total, truncated)."""
    out: dict[tuple, list[tuple]] = {}
    for r in records:
        out.setdefault((r["window_start"], r["window_end"], r["bank"]), []).append(
            (tuple(r["trend"]), r["total"], r["truncated"]))
    return out


def batch(trends: str, cap: int | None) -> dict[tuple, list[tuple]]:
    return by_window(list(evaluate(Q, checks(), mode="cet", trends=trends, max_trends=cap)))


def distributed_jobs(spark) -> int:  # noqa: ANN001
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(JOB_GROUP))


def test_pipeline_extracts_deferred_windows_like_batch_and_replays_once(spark, tmp_path: Path) -> None:  # noqa: ANN001
    events = checks()
    write_batches(tmp_path / "in", events, n_files=3, extra_last=[json.dumps(FLUSH)])
    runs = {"dist": ("complete", None, OVER), "dist_cap": ("all", 40, OVER), "plain_cap": ("all", 40, None),
            "dist_cap1": ("complete", 1, 0)}
    cfg = PipelineConfig(
        source=SourceConfig(format="jsonl", path=str(tmp_path / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name=n, text=Q, sinks=[SinkConfig(format="jsonl", path=str(tmp_path / "out" / n))], trends=t, max_trends=cap,
                             distribute_over=over) for n, (t, cap, over) in runs.items()],
        checkpoint=str(tmp_path / "chk"), lateness_s=30, once=True, shards=3,
    )
    jobs = distributed_jobs(spark)
    run(cfg, spark=spark, echo=lambda s: None)
    assert distributed_jobs(spark) > jobs  # bank 0's windows went through the distributed job
    got = {n: by_window(list(read_jsonl_dir(tmp_path / "out" / n))) for n in runs}
    assert got["dist"] == batch("complete", None)
    assert got["dist_cap"] == batch("all", 40) == got["plain_cap"]
    assert any(recs[0][2] for recs in got["dist_cap"].values())  # the cap cut some windows
    assert got["dist_cap1"] == batch("complete", 1)

    # Replay the last batch (where the flush closed the windows): its commit is gone, its offsets stay.
    commits = sorted((tmp_path / "chk" / "source" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of it
    jobs = distributed_jobs(spark)
    run(cfg, spark=spark, echo=lambda s: None)
    assert distributed_jobs(spark) > jobs  # the replay extracted its deferred windows again
    again = {n: by_window(list(read_jsonl_dir(tmp_path / "out" / n))) for n in runs}
    assert again == got  # the replayed batch's files were overwritten: nothing twice


@pytest.mark.nightly  # the CLI on a cluster is tests/spark/test_cluster.py's; deferred extraction is the test above's
def test_cluster_run_extracts_deferred_windows_like_batch(tmp_path: Path, standalone_cluster: StandaloneCluster) -> None:
    events = checks(seed=8)
    write_batches(tmp_path / "in", events, n_files=2, seed=1, extra_last=[json.dumps(FLUSH)])
    config = {
        "source": {"format": "jsonl", "path": str(tmp_path / "in")},
        "checkpoint": str(tmp_path / "chk"), "lateness_s": 30, "once": True, "shards": 2,
        "queries": [
            {"name": "dist", "text": Q, "distribute_over": OVER, "sinks": [{"format": "jsonl", "path": "out/dist"}]},
            {"name": "dist_cap", "text": Q, "trends": "all", "max_trends": 40, "distribute_over": OVER,
             "sinks": [{"format": "jsonl", "path": "out/dist_cap"}]},
        ],
    }
    (tmp_path / "pipeline.yaml").write_text(json.dumps(config))  # JSON is YAML
    proc = subprocess.run([sys.executable, "-m", "greta_stream", "run", "--config", str(tmp_path / "pipeline.yaml"),
                           "--master", standalone_cluster.url], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "deferred CET window(s)" in proc.stderr  # the workers ran the operator that defers them
    got = {n: by_window(list(read_jsonl_dir(tmp_path / "out" / n))) for n in ("dist", "dist_cap")}
    want = {"dist": by_window(list(evaluate(Q, events, mode="cet"))),
            "dist_cap": by_window(list(evaluate(Q, events, mode="cet", trends="all", max_trends=40)))}
    assert got == want
