"""A `run` pipeline restarted from its checkpoint with a lowered lateness closes, in that restart, the
windows its new watermark passed in every shard, also in one that no event of the restart reaches:
each start wakes every shard of every slot once (a control row, `spark.control`). That row leaves the
events' typed columns as they are."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import dumps, loads
from greta_stream.connectors.sinks import read_jsonl_dir
from greta_stream.pipeline import PipelineConfig, QueryConfig, SinkConfig, SourceConfig
from greta_stream.pipeline.model import streams
from greta_stream.runtime import RunSpec
from greta_stream.runtime.queryset import QuerySet
from greta_stream.spark.keying import SHARD_COLUMN, keyed_by_shard
from greta_stream.spark.layout import StreamLayout, open_layout
from greta_stream.spark.pipeline import run

pytestmark = pytest.mark.spark

TEXT = "RETURN company, COUNT(*) PATTERN Stock S+ WHERE [company] GROUP-BY company WITHIN 10 s SLIDE 10 s"
SHARDS = 2


def pipeline(tmp: Path, lateness_s: float, operator: str, text: str = TEXT, source: str = "jsonl") -> PipelineConfig:
    return PipelineConfig(
        source=SourceConfig(format=source, path=str(tmp / "in"), max_files_per_trigger=1),
        queries=[QueryConfig(name="q", text=text, lateness_s=lateness_s,
                             sinks=[SinkConfig(format="jsonl", path=str(tmp / "out"))],
                             dead_letter=SinkConfig(format="jsonl", path=str(tmp / "dead")))],
        checkpoint=str(tmp / "chk"), once=True, shards=SHARDS, operator=operator,
    )


def write(folder: Path, name: str, events: list[dict], mtime: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    os.utime(path, (mtime, mtime))  # the source reads files in modification order


def shard_of(spark, company: str) -> int:  # noqa: ANN001
    """The shard key the stream sends `company`'s events to (as `keying` keys them)."""
    queries = QuerySet.of({"q": RunSpec.create(TEXT)})
    layout = open_layout(None, queries, SHARDS, SHARDS)
    event = json.dumps({"type": "Stock", "time": 1, "company": company})
    keyed, _ = keyed_by_shard(spark.createDataFrame([(event,)], "value string"), queries, layout)
    return int(keyed.select(SHARD_COLUMN).first()[0])


def key(row: dict) -> str:
    return repr(sorted(loads(dumps(row)).items()))


def restart(spark, tmp: Path, operator: str) -> tuple[list[dict], list[dict]]:  # noqa: ANN001
    """Run with lateness 30 s over events of companies "a" and "b", then again from the checkpoint with
    5 s over one event of "a": the rows written, and the rows whose windows the restart's watermark passed."""
    first = [{"type": "Stock", "time": t, "company": c} for t in (11, 12, 13) for c in ("a", "b")]
    first.append({"type": "Stock", "time": 45, "company": "a"})
    write(tmp / "in", "0.jsonl", first, 1_700_000_000)
    run(pipeline(tmp, 30, operator), spark=spark, echo=lambda s: None)
    assert list(read_jsonl_dir(tmp / "out")) == []  # 45 s less 30: no window closed
    second = [{"type": "Stock", "time": 46, "company": "a"}]
    write(tmp / "in", "1.jsonl", second, 1_700_000_001)
    run(pipeline(tmp, 5, operator), spark=spark, echo=lambda s: None)
    want = [r for r in evaluate(TEXT, first + second) if r["window_end"] <= 45 - 5]
    assert {(r["company"], r["window_end"]) for r in want} == {("a", 20), ("b", 20)}
    return list(read_jsonl_dir(tmp / "out")), want


@pytest.mark.parametrize("operator", ["transformWithStateInPandas", "applyInPandasWithState"])
def test_a_restart_with_a_lowered_lateness_closes_windows_in_shards_it_sends_no_event(
        spark, tmp_path: Path, operator: str) -> None:  # noqa: ANN001
    """Lateness 30 s: after events up to 45 s the window 10-20 s of both companies waits (its shards'
    timers are set for 50 s). The restart lowers the lateness to 5 s and reads one event of company
    "a" at 46 s: the watermark (45 s, less 5) has passed 20 s, and the window of company "b", whose
    shard that event does not reach, comes out in this run as "a"'s does."""
    assert shard_of(spark, "a") != shard_of(spark, "b")
    got, want = restart(spark, tmp_path, operator)
    assert sorted(map(key, got)) == sorted(map(key, want))


def test_a_checkpoint_without_control_rows_says_its_restart_wakes_no_shard(
        spark, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    """A checkpoint whose stream reads no control rows (its layout says so, as one an older
    greta-stream began does) cannot wake a shard at start: the restart logs a warning naming the
    query, and the window of company "b" waits for an event or its old timer, as the warning says."""
    (stream,) = streams(pipeline(tmp_path, 30, "transformWithStateInPandas"))
    StreamLayout(SHARDS).save(tmp_path / "chk" / stream.name)  # control=False
    with caplog.at_level(logging.WARNING, logger="greta_stream.pipeline"):
        got, want = restart(spark, tmp_path, "transformWithStateInPandas")
    warned = [r.getMessage() for r in caplog.records if "reads no control rows" in r.getMessage()]
    assert len(warned) == 1 and "(q)" in warned[0]  # the restart's, not the first run's
    assert sorted(map(key, got)) == sorted(map(key, [r for r in want if r["company"] == "a"]))


def test_the_start_s_control_row_leaves_typed_integers_integers(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Typed input (Parquet) of integer columns, read in the batch that holds the start's control row:
    groups are "0" and "1", not "0.0", and a volume past 2**53 keeps its last digit."""
    import pandas as pd

    text = "RETURN company, COUNT(*), MAX(S.volume) PATTERN Stock S+ WHERE [company] GROUP-BY company WITHIN 10 s"
    events = [{"type": "Stock", "time": t, "company": t % 2, "volume": 2 ** 60 + t} for t in range(1, 25)]
    (tmp_path / "in").mkdir()
    pd.DataFrame(events).to_parquet(tmp_path / "in" / "0.parquet", index=False)
    run(pipeline(tmp_path, 0, "transformWithStateInPandas", text, "parquet"), spark=spark, echo=lambda s: None)
    got = list(read_jsonl_dir(tmp_path / "out"))
    want = [r for r in evaluate(text, events) if r["window_end"] <= 24]
    assert {r["company"] for r in got} == {0, 1} and max(r["max_S_volume"] for r in got) == 2 ** 60 + 19
    assert sorted(map(key, got)) == sorted(map(key, want))
