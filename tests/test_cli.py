"""The greta-stream command, run for real as a subprocess."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import loads

if TYPE_CHECKING:
    from conftest import MainJob

ROOT = Path(__file__).parent.parent


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greta_stream", *args], capture_output=True, text=True,
                          input=stdin, cwd=ROOT, timeout=120)


@pytest.mark.usefixtures("subprocesses")
def test_evaluate_prints_rows_equal_to_the_library(tmp_path: Path) -> None:
    events = [json.loads(line) for line in (ROOT / "samples/stock/events.jsonl").read_text().splitlines()][:400]
    src = tmp_path / "events.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in events) + "{not json\n")
    dead = tmp_path / "dead.jsonl"
    res = cli("evaluate", "--query", "configs/q1_stock.greta", "--events", str(src), "--dead-letter", str(dead))
    assert res.returncode == 0, res.stderr
    rows = [loads(line) for line in res.stdout.splitlines()]
    assert rows == evaluate((ROOT / "configs/q1_stock.greta").read_text(), events)
    assert len(rows) > 10
    assert "done: 401 events" in res.stderr
    (dl,) = [json.loads(line) for line in dead.read_text().splitlines()]
    assert dl["reason"] == "malformed" and dl["event"] == "{not json"


@pytest.mark.usefixtures("subprocesses")
def test_evaluate_with_custom_field_names_and_huge_counts(tmp_path: Path) -> None:
    n = 15_000  # 2**15000 - 1 has 4,516 digits: past Python's default int-to-str limit
    src = tmp_path / "e.jsonl"
    src.write_text("".join(json.dumps({"kind": "A", "ts": i, "key": f"e{i}"}) + "\n" for i in range(n)))
    res = cli("evaluate", "-q", "RETURN COUNT(*) PATTERN A+ WITHIN 1 day", "-e", str(src),
              "--type-field", "kind", "--time-field", "ts", "--id-field", "key", "--no-progress")
    assert res.returncode == 0, res.stderr
    (row,) = [loads(line) for line in res.stdout.splitlines()]
    assert row["count"] == 2**n - 1


@pytest.mark.usefixtures("subprocesses")
def test_bad_query_exits_2_with_position() -> None:
    res = cli("explain", "--query", "RETURN COUNT(*) PATTERN (SEQ(A, NOT B))+ WITHIN 1 s")
    assert res.returncode == 2
    assert "NOT can end only the outermost SEQ of the pattern (line 1, column 33)" in res.stderr


@pytest.mark.usefixtures("subprocesses")
def test_explain_prints_templates() -> None:
    res = cli("explain", "--query", "configs/q3_traffic.greta")
    assert res.returncode == 0, res.stderr
    assert "leading NOT" in res.stdout and "partition by: segment" in res.stdout


@pytest.mark.usefixtures("subprocesses")
def test_deep_and_costly_queries_exit_2_with_position(tmp_path: Path) -> None:
    src = tmp_path / "e.jsonl"
    src.write_text('{"type": "A", "time": 1}\n')
    deep = "RETURN COUNT(*) PATTERN " + "SEQ(A, " * 500 + "B" + ")" * 500 + " WITHIN 10 s"
    res = cli("evaluate", "--query", deep, "--events", str(src))
    assert res.returncode == 2
    assert "the query nests too deeply" in res.stderr and "(line 1, column" in res.stderr
    assert "RecursionError" not in res.stderr
    res = cli("evaluate", "--query", "RETURN COUNT(*) PATTERN A+ WITHIN 1 day SLIDE 1 ms", "--events", str(src))
    assert res.returncode == 2
    assert "max_windows_per_event = 1,000 (a longer SLIDE or a shorter WITHIN fits) (line 1, column 47)" in res.stderr


@pytest.mark.usefixtures("subprocesses")
def test_version() -> None:
    import subprocess
    import sys

    from greta_stream import __version__

    out = subprocess.run([sys.executable, "-m", "greta_stream", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"greta-stream {__version__}"


def one_line_error(res: subprocess.CompletedProcess[str], text: str) -> None:
    """Exit status 2 and a single `error: ...` line on stderr that holds `text`, no traceback."""
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
    assert text in res.stderr and "Traceback" not in res.stderr


@pytest.mark.usefixtures("subprocesses")
def test_missing_files_and_folders_are_one_line_errors(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text('{"type": "A", "time": 1}\n')
    one_line_error(cli("evaluate", "-q", "configs/q1_stock.greta", "-e", str(tmp_path / "nope.jsonl")),
                   f"events file '{tmp_path / 'nope.jsonl'}': no such file")
    one_line_error(cli("evaluate", "-q", "configs/q1_stock.greta", "-e", str(tmp_path)), "is a folder, not a file")
    one_line_error(cli("explain", "-c", "configs/nope.yaml"), "config 'configs/nope.yaml': no such file")
    one_line_error(cli("run", "-c", "configs/nope.yaml", "--once"), "config 'configs/nope.yaml': no such file")
    one_line_error(cli("run", "-q", "configs/q1_stock.greta", "-i", str(tmp_path / "in"), "-o", str(tmp_path / "o"),
                       "--checkpoint", str(tmp_path / "c")), "input folder")
    one_line_error(cli("serve", "--config", "nope.toml"), "config 'nope.toml': no such file")


@pytest.mark.usefixtures("subprocesses")
def test_a_query_that_looks_like_a_path_must_exist(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text('{"type": "A", "time": 1}\n')
    for missing in ("q1.greta", "notes.txt", "queries/q1"):
        one_line_error(cli("evaluate", "-q", missing, "-e", str(events)), f"query file {missing!r}: no such file")
    one_line_error(cli("explain", "-q", "configs/q9.greta"), "no such file")
    one_line_error(cli("queries", "add", "--name", "x", "-q", "q9.greta", "--source", "jsonl:x"), "no such file")
    # text with a '/' and spaces is query text: parsed, with a division in it
    res = cli("evaluate", "-q", "RETURN COUNT(*) PATTERN A+ WHERE A.time / 2 > 0 WITHIN 10 s", "-e", str(events),
              "--no-progress")
    assert res.returncode == 0, res.stderr
    assert [loads(line)["count"] for line in res.stdout.splitlines()] == [1]


def flat(text: str) -> str:
    """Text of a boxed (rich) message on one line."""
    return " ".join("".join(" " if c in "│╭╮╰╯─" else c for c in text).split())


@pytest.mark.usefixtures("subprocesses")
def test_fixed_values_are_choices(tmp_path: Path) -> None:
    from typing import get_args

    from greta_service.schemas import QueryOptions as ServiceOptions
    from greta_stream.choices import ENGINES, MODES, STREAM_ENGINES, Engine, Mode, StreamEngine
    from greta_stream.pipeline import QueryConfig
    from greta_stream.runtime import spec

    # one declaration: the run spec, the pipeline model and the service's requests take theirs from greta_stream.choices
    assert (spec.MODES, spec.ENGINES, spec.STREAM_ENGINES) == (MODES, ENGINES, STREAM_ENGINES) == tuple(
        get_args(t) for t in (Mode, Engine, StreamEngine))
    assert QueryConfig.model_fields["engine"].annotation == ServiceOptions.model_fields["engine"].annotation == StreamEngine
    events = tmp_path / "e.jsonl"
    events.write_text('{"type": "A", "time": 1}\n')
    for option, value in (("--mode", "aggregates"), ("--trends", "maximal"), ("--engine", "fast")):
        res = cli("evaluate", "-q", "configs/q1_stock.greta", "-e", str(events), option, value)
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert f"Invalid value for '{option}'" in flat(res.stderr) and value in res.stderr
    res = cli("run", "-q", "configs/q1_stock.greta", "-i", str(tmp_path), "-o", "o", "--checkpoint", "c",
              "--engine", "columnar")
    assert res.returncode == 2 and "'auto', 'general'" in flat(res.stderr)
    res = cli("serve", "--log-level", "loud")
    assert res.returncode == 2 and "'critical', 'error', 'warning', 'info', 'debug', 'trace'" in flat(res.stderr)
    res = cli("evaluate", "--help")
    assert res.returncode == 0 and "aggregate|cet" in res.stdout and "complete|all" in res.stdout


@pytest.mark.usefixtures("subprocesses")
def test_a_missing_events_file_names_the_closest_one_in_its_folder() -> None:
    one_line_error(cli("evaluate", "-q", "configs/q1_stock.greta", "-e", "samples/stock/event.jsonl"),
                   "no such file; did you mean 'samples/stock/events.jsonl'?")
    one_line_error(cli("evaluate", "-q", "configs/q1_stock.greta", "-e", "samples/stock/zzz"), "no such file")


@pytest.mark.usefixtures("subprocesses")
def test_a_misspelled_folder_on_the_way_is_corrected_too(tmp_path: Path) -> None:
    from greta_stream import cli_args

    (tmp_path / "samples" / "stock").mkdir(parents=True)
    (tmp_path / "samples" / "stock" / "events.jsonl").write_text("")
    assert cli_args._near(tmp_path / "sampels" / "stok" / "evnts.jsonl") == \
        f"; did you mean {str(tmp_path / 'samples' / 'stock' / 'events.jsonl')!r}?"
    assert cli_args._near(tmp_path / "samples" / "stok", folder=True) == \
        f"; did you mean {str(tmp_path / 'samples' / 'stock')!r}?"
    assert cli_args._near(tmp_path / "nothing" / "here.jsonl") == ""
    one_line_error(cli("run", "-q", "configs/q1_stock.greta", "-i", "samples/stok", "-o", str(tmp_path / "o"),
                       "--checkpoint", str(tmp_path / "c"), "--once"),
                   "input folder 'samples/stok': no such folder; did you mean 'samples/stock'?")


@pytest.mark.usefixtures("subprocesses")
def test_explain_says_which_engine_runs_the_query() -> None:
    """The engine, when evaluate takes the general one for a columnar query (few events), and every kind
    of input on which the general engine takes over (`INPUT_LIMITS`, the one list of them)."""
    from greta_stream.engine.columnar.columns import INPUT_LIMITS

    said = cli("explain", "-q", "configs/q1_stock.greta").stdout
    assert "runs on: the columnar engine\n  evaluate takes the general engine below 2,000 events" in said
    assert said.rstrip().endswith("\n".join(f"  - {limit}" for limit in INPUT_LIMITS))
    res = cli("explain", "-q", "RETURN COUNT(*) PATTERN SEQ(Stock A, Stock S+) WHERE (A.price < NEXT(S).price "
                                "OR A.volume < 100) WITHIN 10 s")
    assert res.stdout.rstrip().endswith("runs on: the general engine (the columnar engine does not take an edge "
                                        "predicate that is not a comparison of X with NEXT(Y))")


@pytest.mark.usefixtures("subprocesses")
def test_explain_prints_the_query_as_written_first() -> None:
    res = cli("explain", "-q", "configs/q1_stock.greta")
    assert res.returncode == 0, res.stderr
    written = (ROOT / "configs/q1_stock.greta").read_text().strip().splitlines()
    lines = res.stdout.splitlines()
    assert lines[0] == "query:" and [line[2:] for line in lines[1:1 + len(written)]] == written
    assert written[0].startswith("-- ") and lines[1 + len(written)] == ""
    assert lines[2 + len(written)].startswith("template T0")


def test_progress_watermark_reads_as_the_stream_times() -> None:
    from greta_stream.spark.progress import progress_line, watermark_text

    assert watermark_text("1970-01-01T00:03:09.514Z", {"seconds"}) == "189.514"
    assert watermark_text("1970-01-01T00:03:10.000Z", {"seconds"}) == "190"
    assert watermark_text("2024-05-01T12:00:00.000Z", {"timestamp"}) == "2024-05-01T12:00:00.000Z"
    assert watermark_text("1970-01-01T00:03:10.000Z", set()) == "1970-01-01T00:03:10.000Z"  # kind not known yet
    assert watermark_text("1970-01-01T00:00:00.000Z", {"seconds"}) == "-"  # Spark's: none yet
    assert watermark_text(None, {"seconds"}) == "-"
    assert watermark_text("2153-10-17T15:06:30.000Z", {"seconds"}) == "end of input"  # --flush-at-end's event
    assert watermark_text("2026-11-25T08:00:00.000Z", {"timestamp"}) == "2026-11-25T08:00:00.000Z"
    line = progress_line("s", {"batchId": 3, "numInputRows": 5, "eventTime": {"watermark": "1970-01-01T00:01:40.000Z"}},
                         ["seconds"])
    assert "batch 3: 5 events" in line and "watermark 100;" in line
    late = progress_line("s", {"batchId": 3, "eventTime": {"watermark": "1970-01-01T00:01:40.000Z"}}, ["seconds"],
                         [30.0])
    assert "watermark 70;" in late  # the latest event time less the lateness, as the rows follow it
    mixed = progress_line("s", {"batchId": 3, "eventTime": {"watermark": "1970-01-01T00:01:40.000Z"}}, ["seconds"],
                          [0.0, 30.0])
    assert "event time 100 (each query's watermark: less its lateness)" in mixed
    assert watermark_text("2024-05-01T12:00:00.000Z", {"timestamp"}, 30) == "2024-05-01T11:59:30.000Z"
    one = progress_line("s", {"batchId": 4, "numInputRows": 1, "stateOperators": [{"memoryUsedBytes": 27576}]}, [])
    assert "batch 4: 1 event (" in one and one.endswith("state 27,576 bytes")


@pytest.mark.usefixtures("subprocesses")
def test_flush_needs_a_bounded_jsonl_input(tmp_path: Path) -> None:
    from greta_stream.errors import ConfigError
    from greta_stream.pipeline import PipelineConfig, SourceConfig
    from greta_stream.spark.flush import flush_glob, flushable, write_flush
    from greta_stream.spark.shard import FLUSH_TIME_S, FLUSH_TYPE

    one_line_error(cli("run", "-q", "configs/q1_stock.greta", "-i", str(tmp_path), "-o", str(tmp_path / "o"),
                       "--checkpoint", str(tmp_path / "c"), "--flush-at-end"), "--flush-at-end needs a bounded run")
    folder = tmp_path / "chk" / "flush"
    assert flush_glob(str(tmp_path / "in"), folder) == f"{tmp_path}/{{in,chk/flush}}" and folder.is_dir()
    with pytest.raises(ConfigError, match="may not hold"):
        flush_glob(str(tmp_path / "in{1,2}"), folder)
    cfg = PipelineConfig.from_dict({"source": {"format": "parquet", "path": "x"}, "checkpoint": str(tmp_path),
                                    "queries": [{"name": "q", "text": "RETURN COUNT(*) PATTERN A+ WITHIN 1 s",
                                                 "sinks": [{"format": "console"}]}],
                                    "once": True})
    with pytest.raises(ConfigError, match="jsonl folders, not a parquet source"):
        flushable(cfg)
    staged, folders = flushable(PipelineConfig(source=SourceConfig(format="jsonl", path=str(tmp_path / "in")),
                                               queries=cfg.queries, checkpoint=str(tmp_path / "chk"), once=True))
    (folder,) = folders.values()
    assert staged.source.path == f"{tmp_path}/{{in,chk/flush/{folder.name}}}"
    numeric = json.loads(write_flush(folder, "kind", "ts", {"seconds"}).read_text())
    stamp = json.loads(write_flush(folder, "type", "time", {"timestamp"}).read_text())
    assert numeric == {"kind": FLUSH_TYPE, "ts": FLUSH_TIME_S}
    assert stamp == {"type": FLUSH_TYPE, "time": "2153-10-17T15:06:40Z"}


@pytest.mark.spark
def test_run_once_flush_at_end_gives_the_rows_of_evaluate(main_job: MainJob) -> None:
    """The command of the README (`make run`): quiet Spark, numeric watermarks, every window."""
    streamed = sorted(json.dumps(loads(line), sort_keys=True) for f in sorted(main_job.output.glob("part-*.jsonl"))
                      for line in f.read_text().splitlines())
    events = [json.loads(line) for line in (ROOT / "samples/stock/events.jsonl").read_text().splitlines()]
    batch = evaluate((ROOT / "configs/q1_stock.greta").read_text(), events)
    assert len(batch) > 100
    assert streamed == sorted(json.dumps(loads(json.dumps(r, default=str)), sort_keys=True) for r in batch)
    err = main_job.stderr
    assert " WARN " not in err and "log4j" not in err and "Setting default log level" not in err
    assert "TransformWithStateInPandas" not in err and "incubator" not in err  # pyspark's, the JVM's
    assert "[stock: q1_stock] batch 0: 2,000 events" in err  # what the stream reads, and its query
    assert "\n\n" not in err, err
    watermarks = [line.split("watermark ")[1].split(";")[0] for line in err.splitlines() if "watermark " in line]
    assert watermarks[0] == "-" and watermarks[-1] == "end of input", err
    assert "input drained: flushing every open window" in err
    dead = main_job.output / "dead_letters"
    assert not list(dead.glob("*.jsonl")) or all(not f.read_text() for f in dead.glob("*.jsonl"))


def test_the_jvms_stderr_passes_all_but_pyspark_worker_chatter(capfd: pytest.CaptureFixture[str]) -> None:
    from greta_stream.spark import session

    session._filter_stderr(io.BytesIO(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"Starting Streaming TransformWithStateInPandas Python worker.\n\n"
        b"Streaming TransformWithStateInPandas Python worker finish init stage ... Received UDF from JVM: <f>\n\n"
        b"26/11/27 21:28:04 ERROR TaskSetManager: Task 0 in stage 0.0 failed 1 times; aborting job\n\n"
        b"Streaming TransformWithStateInPandas Python worker Completed execution of UDF: <f>.\n\n"
        b"Traceback (most recent call last):\n"))
    assert capfd.readouterr().err == ("26/11/27 21:28:04 ERROR TaskSetManager: Task 0 in stage 0.0 failed 1 times; "
                                      "aborting job\n\nTraceback (most recent call last):\n")


@pytest.mark.usefixtures("subprocesses")
def test_spark_and_maven_logs_are_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    from greta_stream.spark import session

    monkeypatch.delenv("GRETA_SPARK_LOG_LEVEL", raising=False)
    assert session.log_level() == "ERROR"
    options = session._log_options("ERROR").split()
    config = Path(options[0].removeprefix("-Dlog4j.configurationFile=file://"))
    assert config.is_file() and "ThresholdFilter" in config.read_text()
    assert options[1:] == ["-Dgreta.spark.log.level=ERROR", "-Dgreta.spark.root.level=WARN"]
    monkeypatch.setenv("GRETA_SPARK_LOG_LEVEL", "warn")  # what `run --spark-logs` sets
    assert session.log_level() == "WARN"
    res = cli("run", "--help")
    assert "--spark-logs" in res.stdout and "--flush-at-end" in res.stdout
    (mvn,) = [line for line in (ROOT / "scripts/setup_jvm.sh").read_text().splitlines() if "mvn -q" in line]
    assert "-q -B -Dstyle.color=never" in mvn


@pytest.mark.spark
@pytest.mark.usefixtures("subprocesses")
def test_flush_at_end_with_timestamps_and_a_config(tmp_path: Path) -> None:
    """ISO-8601 times: the flush event is a timestamp too (no `bad_time` dead letter), every window comes out;
    `--shards` beside the config file is the run's.
    A second query of the config misspells an attribute: the run names it and exits 1, and the first query's
    rows are all there, as its own."""
    from greta_stream.connectors.jsonl import dumps

    (tmp_path / "in").mkdir()
    events = [{"type": "A", "time": f"2024-05-01T12:{m:02d}:{s:02d}Z", "k": m % 2} for m in range(3) for s in (5, 35)]
    (tmp_path / "in" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    query = "RETURN k, COUNT(*) PATTERN A+ WHERE [k] GROUP-BY k WITHIN 1 minute SLIDE 30 seconds"
    typo = "RETURN k, COUNT(*), AVG(A.prize) PATTERN A+ WHERE [k] GROUP-BY k WITHIN 1 minute SLIDE 30 seconds"
    (tmp_path / "pipeline.yaml").write_text(json.dumps({
        "source": {"format": "jsonl", "path": "in"}, "checkpoint": "chk", "once": True,
        "queries": [{"name": "q", "text": query, "sinks": [{"format": "jsonl", "path": "out"}],
                     "dead_letter": {"format": "jsonl", "path": "dead"}},
                    {"name": "typo", "text": typo, "sinks": [{"format": "jsonl", "path": "out_typo"}]}]}))
    res = subprocess.run([sys.executable, "-m", "greta_stream", "run", "-c", str(tmp_path / "pipeline.yaml"),
                          "--flush-at-end", "--shards", "3"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 1, res.stderr[-3000:]
    # --shards overrides the file (it sets none): the stream's checkpoint was laid out with 3
    assert json.loads((tmp_path / "chk" / "source" / "greta-layout.json").read_text())["shards"] == 3
    assert "typo: 0 rows, 6 dead letters" in res.stderr
    assert "error: query typo: attribute 'prize' of A is on no A event (they have k, time, type); " \
           "is 'prize' misspelled in the query?" in res.stderr
    streamed = sorted(json.dumps(json.loads(line), sort_keys=True) for f in (tmp_path / "out").glob("part-*.jsonl")
                      for line in f.read_text().splitlines())
    batch = evaluate(query, events)
    assert len(batch) == 9  # k=0: windows from 11:59:30 to 12:02:30; k=1: 12:00:30 to 12:01:30
    assert streamed == sorted(json.dumps(json.loads(dumps(r)), sort_keys=True) for r in batch)
    assert "q: 9 rows, 0 dead letters" in res.stderr
    assert not [f for f in (tmp_path / "dead").glob("*.jsonl") if f.read_text()]
    assert "watermark 2024-05-01T12:02:35.000Z" in res.stderr


@pytest.mark.usefixtures("subprocesses")
def test_flags_of_places_beside_a_config_are_one_line_errors(tmp_path: Path) -> None:
    """Beside --config, a flag that says where events come from or rows go (the file says it) is refused, not
    left unread; so is a run setting the model refuses. Before Spark starts."""
    config = tmp_path / "p.yaml"
    config.write_text(f"source: {{format: jsonl, path: {ROOT / 'samples/stock'}}}\ncheckpoint: {tmp_path / 'chk'}\n"
                      f"queries:\n  - {{name: q, file: {ROOT / 'configs/q1_stock.greta'}, sinks: [{{format: console}}]}}\n")
    one_line_error(cli("run", "-c", str(config), "--input", "elsewhere", "--output-format", "parquet"),
                   "--input, --output-format: the config file holds the queries, the source, the sinks and the "
                   "checkpoint; set them there")
    one_line_error(cli("run", "-c", str(config), "-q", "configs/q1_stock.greta", "--checkpoint", "c"),
                   "--query, --checkpoint: the config file holds")
    one_line_error(cli("run", "-c", str(config), "--trigger-interval", "0"), "trigger_interval_s: Input should be "
                   "greater than 0")
    assert not (tmp_path / "chk").exists()


def test_queries_add_sends_paths_relative_to_where_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`greta-stream queries add --source jsonl:samples/stock` means ./samples/stock of the caller, sent
    absolute, links as typed (samples/ links into the package: not the package's folder)."""
    from greta_stream.client_cli import endpoint

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    assert endpoint("jsonl:link/stock") == {"format": "jsonl", "path": str(tmp_path / "link" / "stock")}
    assert endpoint('{"format": "parquet", "path": "in"}') == {"format": "parquet", "path": str(tmp_path / "in")}
    assert endpoint('{"format": "kafka", "topic": "t"}') == {"format": "kafka", "topic": "t"}


@pytest.mark.usefixtures("subprocesses")
def test_a_misspelled_attribute_is_an_error_that_names_it(tmp_path: Path) -> None:
    """Every event dead-lettered for one missing attribute: exit 1, the attribute and the ones the events have;
    dead letters are always summed up by reason."""
    q = "RETURN sector, COUNT(*), AVG(S.prize) PATTERN Stock S+ WHERE [sector] GROUP-BY sector WITHIN 1 minute"
    res = cli("evaluate", "-q", q, "-e", "samples/stock/events.jsonl", "--no-progress")
    assert res.returncode == 1 and res.stdout == ""
    assert "2,000 dead letters: 2,000 missing_attribute (attribute 'prize' is missing (the query needs it on Stock events))" in res.stderr
    assert ("error: attribute 'prize' of S is on no Stock event (they have company, id, price, sector, time, type, "
            "volume); did you mean 'price'?") in res.stderr
    src = tmp_path / "e.jsonl"
    src.write_text('{"type": "Stock", "time": 1, "sector": 1, "price": 2}\n{"type": "Stock", "time": 2}\nnope\n')
    ok = cli("evaluate", "-q", q.replace("prize", "price"), "-e", str(src), "--no-progress")
    assert ok.returncode == 0 and ok.stdout
    assert "2 dead letters: 1 malformed" in ok.stderr and "1 missing_attribute" in ok.stderr


@pytest.mark.parametrize(("aggregates", "pattern", "says"), [
    ("COUNT(*)", "SEQ(Start S, NOT end X, Measurement M+) WHERE [mapper, job]",
     "type 'end' of X (under NOT) matches no event; did you mean 'End'?"),
    ("COUNT(*)", "SEQ(Start S, NOT End X, Measurement M+) WHERE [mapper, job] AND X.memry > 0",
     "attribute 'memry' of X (under NOT) is on no End event"),
    ("COUNT(*)", "SEQ(start S, Measurement M+, END E) WHERE [mapper, job]",
     "type 'END' of E matches no event; did you mean 'End'?"),
    ("COUNT(*), MAX(S.cppu)", "SEQ(Start S, Measurement M+, End E) WHERE [mapper, job]",
     "attribute 'cppu' of S is on no Start event"),
])
@pytest.mark.usefixtures("subprocesses")
def test_a_mistake_in_one_part_of_the_query_is_an_error(aggregates: str, pattern: str, says: str) -> None:
    """A typo under a NOT, in one type of a SEQ, in a negated alias's or an aggregate's attribute changes the
    numbers without a word unless it is named: exit 1 and a did-you-mean, though rows come out."""
    q = f"RETURN mapper, {aggregates} PATTERN {pattern} GROUP-BY mapper WITHIN 1 minute"
    res = cli("evaluate", "-q", q, "-e", "samples/cluster/events.jsonl", "--no-progress")
    assert res.returncode == 1, res.stderr
    assert f"error: {says}" in res.stderr


@pytest.mark.parametrize("engine", ["auto", "general"])
@pytest.mark.usefixtures("subprocesses")
def test_a_type_no_event_has_is_an_error_with_the_types_they_have(engine: str) -> None:
    """`stock` for `Stock`: no silent zero, on the columnar and the general path."""
    res = cli("evaluate", "-q", "RETURN COUNT(*) PATTERN stock S+ WITHIN 10 seconds", "-e", "samples/stock/events.jsonl",
              "--engine", engine, "--no-progress")
    assert res.returncode == 1 and res.stdout == ""
    assert ("error: no event is of a type of the query (stock); the events' types are Stock (2,000); "
            "did you mean 'Stock' for 'stock'?") in res.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("subprocesses")
def test_explain_config_runs_on_the_core_install() -> None:
    """The pipeline model is free of Spark: `explain --config` runs where pyspark cannot be imported,
    and every distribution it imports is a core dependency (or one of theirs), not an extra's."""
    code = ("import sys, json; before = set(sys.modules); sys.modules['pyspark'] = None\n"
            "from greta_stream.cli import main\n"
            "sys.argv = ['greta-stream', 'explain', '--config', 'configs/pipeline.yaml']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(json.dumps(sorted({m.split('.')[0] for m, mod in sys.modules.items() "
            "if mod is not None and m not in before})))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stock_downtrends" in done.stdout and "shards: 4 per GROUP-BY" in done.stdout
    imported = json.loads(done.stdout.splitlines()[-1])
    dists = metadata.packages_distributions()  # a scan of every installed distribution: once
    used = {d for m in imported for d in dists.get(m, [])} - {"greta-stream"}
    assert used and used <= core_closure(), sorted(used - core_closure())


def core_closure() -> set[str]:
    """The distributions the core install brings: greta-stream's dependencies without extras, and theirs."""
    from packaging.requirements import Requirement

    def norm(name: str) -> str:
        return name.lower().replace("_", "-")

    seen: set[str] = set()
    todo = [norm(Requirement(r).name) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"]]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for r in metadata.requires(name) or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(norm(req.name))
    return {d for ds in metadata.packages_distributions().values() for d in ds if norm(d) in seen}


@pytest.mark.usefixtures("subprocesses")
def test_old_setting_names_warn_and_query_settings_stay_in_the_config_file(tmp_path: Path) -> None:
    """`--watermark` and `watermark_delay_s` are read as `--lateness` / `lateness_s` with a warning; both names
    at once, or a query setting as a flag beside --config, are one-line errors before Spark starts."""
    config = tmp_path / "old.yaml"
    config.write_text(f"source: {{format: jsonl, path: {ROOT / 'samples/stock'}}}\ncheckpoint: {tmp_path / 'chk'}\n"
                      f"watermark_delay_s: 10\nqueries:\n  - {{name: q, file: {ROOT / 'configs/q1_stock.greta'}, "
                      "sinks: [{format: console}]}\n")
    done = cli("explain", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"warning: {config}: watermark_delay_s is deprecated: use lateness_s (same meaning)\n"
    both = cli("run", "-q", "configs/q1_stock.greta", "-i", "samples/stock", "-o", str(tmp_path / "o"),
               "--checkpoint", str(tmp_path / "c"), "--watermark", "5", "--lateness", "5")
    assert both.returncode == 2 and both.stderr.splitlines() == [
        "warning: --watermark is deprecated: use --lateness (same meaning)",
        "error: --watermark is the old name of --lateness: give --lateness only"]
    one_line_error(cli("run", "--config", str(config), "--max-trends", "3", "--type-field", "kind"),
                   "--max-trends, --type-field: the config file holds the queries' settings; set them there")
