"""The README as a user types it: every command and example runs here, as written.

Each logical command of a ```bash block and each ```python example runs for
real (in the repository folder, or in a scratch folder holding the
repository's samples and configs), and where the README states a result
(`# [...]` after an example) the result must equal it. A command no test runs
must be listed in `NOT_RUN` with the reason; `test_every_readme_command_is_run`
fails when the README gains a command nobody runs.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import httpx
import orjson
import pytest

from greta_stream import evaluate

if TYPE_CHECKING:
    from conftest import MainJob

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
       "GRETA_URL": "http://127.0.0.1:8000"}
ENV.pop("GRETA_API_KEY", None)


class Block(NamedTuple):
    line: int
    lang: str
    text: str


def blocks(lang: str) -> list[Block]:
    found, current, start, kind = [], None, 0, ""
    for n, line in enumerate(README.read_text().splitlines(), 1):
        if line.startswith("```"):
            if current is None:
                current, start, kind = [], n, line[3:].strip()
            else:
                if kind == lang:
                    found.append(Block(start, kind, "\n".join(current)))
                current = None
        elif current is not None:
            current.append(line)
    return found


def commands(block: Block) -> list[str]:
    """The block's logical commands: continued lines joined, multi-line quoted arguments kept whole."""
    out: list[str] = []
    pending = ""
    for line in block.text.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        if pending.rstrip().endswith("\\") or pending.count("'") % 2:
            continue
        if pending.strip():
            out.append(pending.strip())
        pending = ""
    return out


def block_with(text: str, lang: str = "bash") -> Block:
    (block,) = [b for b in blocks(lang) if text in b.text]
    return block


def command_with(text: str) -> str:
    (cmd,) = [c for b in blocks("bash") for c in commands(b) if text in c]
    return cmd


# Commands of the README that no test here runs, and why.
NOT_RUN = {
    "make test": "the test suite itself (.ci/run runs it)",
    "GRETA_API_KEY=secret greta-stream serve --host 0.0.0.0": "binds beyond loopback; tests/service/test_api.py "
                                                               "checks the key rule, the walkthrough runs `serve`",
    "greta-stream serve --log-json": "tests/service/test_api.py::test_logs_are_json_lines",
    "MAIN=$(python": "spark-submit to a cluster at a placeholder address; tests/spark/test_cluster.py runs the job "
                     "on a standalone cluster",
    "spark-submit": "as above",
    "source .venv/bin/activate": "every command here runs with .venv/bin first on PATH (ENV), which is what "
                                 "activating does",
    "curl -N": "run with a time limit by the walkthrough (a feed does not end)",
}
RUN_BY = {  # command prefix -> the test that runs it
    "make run": "test_make_run",
    "greta-stream evaluate --query configs/q1_stock.greta": "test_use_it_commands",
    "greta-stream explain  --query": "test_use_it_commands",
    "greta-stream run --query configs/q1_stock.greta --input events/": "test_streaming_commands_run_until_ctrl_c",
    "greta-stream run --query configs/q1_stock.greta --input samples/stock": "test_make_run (make run's command)",
    "greta-stream run --config configs/pipeline_delta.yaml": "test_delta_commands",
    "greta-stream run --query configs/q1_stock.greta --input samples/stock --output out/q1_delta": "test_delta_commands",
    "greta-stream run --config": "test_streaming_commands_run_until_ctrl_c",
    "greta-stream explain --config": "test_use_it_commands",
    "greta-stream serve": "test_service_walkthrough",
    "mkdir -p greta-data": "test_service_walkthrough",
    "curl -s": "test_service_walkthrough",
    "greta-stream queries": "test_service_walkthrough",
    "greta-stream evaluate --query 'RETURN TRENDS": "test_use_it_commands",
}


def test_every_readme_command_is_run() -> None:
    unrun = [c for b in blocks("bash") for c in commands(b)
             if not any(c.startswith(p) for p in [*NOT_RUN, *RUN_BY])]
    assert unrun == [], "README commands that no test runs (add a test, or a reason to NOT_RUN)"
    assert len(blocks("python")) == 7, "a new python example: run it in test_python_examples or another test"


def sh(cmd: str, cwd: Path = ROOT, timeout: float = 300, **kw: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=ENV, text=True, capture_output=True, timeout=timeout, **kw)
    assert done.returncode == 0, f"{cmd}\nexit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def run_checking_comments(code: str, namespace: dict[str, Any]) -> int:
    """Run `code` statement by statement; where a statement is followed by a comment `# [...]`
    or ends in a comment `...: [...]`, its value must equal that literal. Returns the checks made."""
    lines = code.splitlines()
    checks = 0
    for stmt in ast.parse(code).body:
        source = ast.get_source_segment(code, stmt)
        assert source is not None
        stated = _stated(lines, stmt.end_lineno or stmt.lineno)
        if isinstance(stmt, ast.Expr):
            value = eval(compile(ast.Expression(stmt.value), "<README>", "eval"), namespace)  # noqa: S307
        else:
            exec(compile(ast.Module([stmt], []), "<README>", "exec"), namespace)  # noqa: S102
            value = namespace[stmt.targets[0].id] if isinstance(stmt, ast.Assign) else None  # type: ignore[attr-defined]
        if stated is not None:
            assert [dict(r) for r in value] == stated, f"README says {stated}, got {list(value)}"
            checks += 1
    return checks


def _stated(lines: list[str], last: int) -> Any:
    inline = lines[last - 1].partition("#")[2]
    after = lines[last].strip() if last < len(lines) else ""
    for comment in (inline, after[1:] if after.startswith("#") else ""):
        literal = comment.strip()
        if not literal.startswith("[") and ": [" in literal:
            literal = literal[literal.index(": [") + 2:]
        if literal.startswith("["):
            return ast.literal_eval(literal)
    return None


def test_python_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {}
    checks = 0
    for block in blocks("python"):
        if not any(t in block.text for t in ("ServiceClient", "pyspark", "deltalake")):  # run by the tests below
            checks += run_checking_comments(block.text, namespace)
    assert checks == 3  # evaluate, open_stream's advance, CET


@pytest.mark.usefixtures("subprocesses")
def test_use_it_commands(tmp_path: Path) -> None:
    rows = [orjson.loads(line) for line in sh(command_with("--events samples/stock/events.jsonl   #")).stdout.splitlines()]
    events = [orjson.loads(line) for line in (ROOT / "samples/stock/events.jsonl").read_text().splitlines()]
    assert rows and rows == [dict(r) for r in evaluate((ROOT / "configs/q1_stock.greta").read_text(), events)]
    explained = sh(command_with("explain  --query configs/q3_traffic.greta")).stdout
    assert "template" in explained.lower()
    plan = sh(command_with("greta-stream explain --config")).stdout
    assert "stock_downtrends" in plan and "shards: 4 per GROUP-BY (stock_downtrends by sector" in plan
    trends = [orjson.loads(line) for line in sh(command_with("--mode cet --trends all")).stdout.splitlines()]
    assert trends and all(len(r["trend"]) >= 1 and r["total"] >= 1 for r in trends)
    per_window: dict[float, int] = {}
    for r in trends:
        per_window[r["window_start"]] = per_window.get(r["window_start"], 0) + 1
    assert max(per_window.values()) <= 100


def scratch(tmp_path: Path) -> Path:
    """A folder as a user's checkout has it: samples and configs."""
    for name in ("samples", "configs"):
        shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


@contextlib.contextmanager
def background(cmd: str, cwd: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`cmd` running as a user's terminal runs it; Ctrl-C (SIGINT) at the end, then the rest of its group killed."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {cmd}"], cwd=cwd, env=ENV, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(90)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def until(check: Callable[[], Any], what: str, log: Path, proc: subprocess.Popen[bytes], limit: float = 300) -> Any:
    deadline = time.monotonic() + limit
    while not (result := check()):
        assert proc.poll() is None, f"{what}: it ended\n{log.read_text(errors='replace')[-4000:]}"
        assert time.monotonic() < deadline, f"{what}: not within {limit} s\n{log.read_text(errors='replace')[-4000:]}"
        time.sleep(1)
    return result


def part_rows(folder: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for p in sorted(folder.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


@pytest.mark.spark
@pytest.mark.usefixtures("subprocesses")
def test_streaming_commands_run_until_ctrl_c(tmp_path: Path) -> None:
    """`run --query` over a folder and `run --config`, side by side (other outputs and checkpoints), until Ctrl-C."""
    home = scratch(tmp_path)
    shutil.copytree(ROOT / "samples/stock", home / "events")
    by_query = command_with("greta-stream run --query configs/q1_stock.greta --input events/")
    by_config = command_with("greta-stream run --config configs/pipeline.yaml")
    logs = tmp_path / "run.log", tmp_path / "config.log"
    with background(by_query, home, logs[0]) as query, background(by_config, home, logs[1]) as config:
        until(lambda: part_rows(home / "out/q1"), "rows of `greta-stream run --query`", logs[0], query)
        until(lambda: part_rows(home / "out/pipeline-yaml/stock_downtrends"), "rows of `greta-stream run --config`",
              logs[1], config)
    for proc, log in zip((query, config), logs):
        assert proc.returncode == 0, log.read_text()[-3000:]
        assert "Traceback" not in log.read_text()


@pytest.mark.spark
@pytest.mark.usefixtures("subprocesses")
def test_delta_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Q1's rows to Delta tables through a config and through flags, read back with delta-rs as the README does."""
    from deltalake import DeltaTable

    home = scratch(tmp_path)
    events = [orjson.loads(line) for line in (ROOT / "samples/stock/events.jsonl").read_text().splitlines()]
    want = evaluate((ROOT / "configs/q1_stock.greta").read_text(), events)
    flags = command_with("--output-format delta")  # run beside the config's: other tables, another checkpoint
    with open(tmp_path / "flags.log", "wb") as log:
        beside = subprocess.Popen(["bash", "-c", flags], cwd=home, env=ENV, stdout=log, stderr=subprocess.STDOUT)
    try:
        sh(command_with("configs/pipeline_delta.yaml --flush-at-end"), cwd=home, timeout=600)
        assert beside.wait(600) == 0, f"{flags}\n{(tmp_path / 'flags.log').read_text(errors='replace')[-3000:]}"
    finally:
        if beside.poll() is None:
            beside.kill()
    monkeypatch.chdir(home)
    namespace: dict[str, Any] = {}
    exec(block_with("from deltalake import DeltaTable", "python").text, namespace)  # noqa: S102
    rows = namespace["rows"]
    assert (len(rows), sorted(rows.columns)) == (316, ["avg_S_price", "count", "sector", "window_end", "window_start"])
    got = sorted((r["window_start"], r["sector"], int(r["count"])) for r in rows.to_dict("records"))
    assert got == sorted((float(r["window_start"]), str(r["sector"]), r["count"]) for r in want)
    assert DeltaTable("out/delta/stock_downtrends").metadata().partition_columns == ["sector"]
    closed = DeltaTable("out/q1_delta").to_pandas()
    watermark = max(e["time"] for e in events) - 10
    assert len(closed) == sum(1 for r in want if r["window_end"] <= watermark) == 72


@pytest.mark.usefixtures("subprocesses")
def test_the_main_job_and_evaluate_need_no_maven(tmp_path: Path) -> None:
    """Maven fetches only Apache Kafka, for the tests and the demo: `make evaluate` runs with a
    `mvn` that fails, and `make run` would not call it."""
    if subprocess.run(["make", "-q", ".venv/bin/greta-stream"], cwd=ROOT).returncode != 0:
        pytest.skip("the virtualenv is older than pyproject.toml: make would reinstall it under the tests")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "mvn").write_text("#!/bin/sh\necho MAVEN-CALLED >&2\nexit 1\n")
    (shim / "mvn").chmod(0o755)
    env = {**ENV, "PATH": f"{shim}{os.pathsep}{ENV['PATH']}"}
    done = subprocess.run(["make", "evaluate"], cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
    assert done.returncode == 0 and "MAVEN-CALLED" not in done.stdout + done.stderr, done.stderr[-2000:]
    assert re.search(r"results: out/q1_stock.jsonl \((\d+) rows\)", done.stdout)
    planned = subprocess.run(["make", "-n", "run"], cwd=ROOT, env=env, text=True, capture_output=True, timeout=60)
    assert planned.returncode == 0 and "setup_jvm" not in planned.stdout and "mvn" not in planned.stdout


@pytest.mark.spark
def test_make_run(main_job: MainJob) -> None:
    if not main_job.by_make:
        pytest.skip("the virtualenv is older than pyproject.toml: `make run` would reinstall it under the tests")
    printed = re.search(r"results: out/q1_stock/part-\*\.jsonl \((\d+) rows\)", main_job.stdout)
    assert printed and int(printed.group(1)) == len(part_rows(ROOT / "out/q1_stock")) > 0, main_job.stdout[-2000:]
    assert "Traceback" not in main_job.stdout + main_job.stderr


@pytest.mark.spark
@pytest.mark.usefixtures("subprocesses")
def test_pyspark_example(tmp_path: Path) -> None:
    home = scratch(tmp_path)
    code = block_with("events = spark.readStream.text(\"samples/stock\")", "python").text
    check = """
got = spark.read.parquet("out/q1-parquet")
print("SCHEMA", got.schema.simpleString())
import json
print("ROWS", json.dumps([r.asDict() for r in got.collect()], default=str))
"""
    done = subprocess.run([sys.executable, "-c", code + check], cwd=home, env=ENV, text=True, capture_output=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    # a session of the user's own, and still no debugging dump at the stream's start: of pyspark's stateful
    # worker's five lines the first alone (printed before greta-stream's processor reaches it), and no
    # warning of Spark's state server (the end of each connection) or timers (a fired timer deleted twice)
    worker = [line for line in done.stderr.splitlines() if "TransformWithStateInPandas Python worker" in line]
    assert worker == ["Starting Streaming TransformWithStateInPandas Python worker."], done.stderr[-4000:]
    assert "TransformWithStateInPySparkStateServer" not in done.stderr and "TimerStateImpl" not in done.stderr
    schema = next(line for line in done.stdout.splitlines() if line.startswith("SCHEMA"))
    assert schema == ("SCHEMA struct<window_start:double,window_end:double,sector:string,count:decimal(38,0),"
                      "avg_S_price:double>")
    got = orjson.loads(next(line for line in done.stdout.splitlines() if line.startswith("ROWS"))[5:])
    assert "window_start" in done.stdout and "|" in done.stdout  # show() printed its table
    events = [orjson.loads(line) for line in (ROOT / "samples/stock/events.jsonl").read_text().splitlines()]
    want = {(r["window_start"], str(r["sector"])): r for r in evaluate((ROOT / "configs/q1_stock.greta").read_text(), events)}
    assert got
    for row in got:  # the windows the watermark closed, each exactly as the batch evaluator has it
        expected = want[(row["window_start"], row["sector"])]
        assert int(row["count"]) == expected["count"] and row["avg_S_price"] == pytest.approx(expected["avg_S_price"])
    watermark = max(e["time"] for e in events) - 30
    assert len(got) == sum(1 for r in want.values() if r["window_end"] <= watermark)


@pytest.mark.spark
@pytest.mark.usefixtures("subprocesses")
def test_pyspark_batch_example(tmp_path: Path) -> None:
    home = scratch(tmp_path)
    code = block_with('history = spark.read.json("samples/stock")', "python").text
    check = """
import json
got = spark.read.parquet("out/q1-backfill")
print("SCHEMA", got.schema.simpleString())
print("ROWS", json.dumps([{**r.asDict(), "count": int(r["count"])} for r in got.collect()]))
"""
    done = subprocess.run([sys.executable, "-c", code + check], cwd=home, env=ENV, text=True, capture_output=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "window_start" in done.stdout and "|" in done.stdout  # show() printed its table
    schema = next(line for line in done.stdout.splitlines() if line.startswith("SCHEMA"))
    assert schema == ("SCHEMA struct<window_start:double,window_end:double,sector:bigint,count:decimal(38,0),"
                      "avg_S_price:double>")
    got = orjson.loads(next(line for line in done.stdout.splitlines() if line.startswith("ROWS"))[5:])
    events = [orjson.loads(line) for line in (ROOT / "samples/stock/events.jsonl").read_text().splitlines()]
    want = evaluate((ROOT / "configs/q1_stock.greta").read_text(), events)
    assert len(got) == len(want) > 0  # every window, as the batch evaluator has them
    by_key = {(r["window_start"], r["sector"]): r for r in want}
    for row in got:
        expected = by_key[(row["window_start"], row["sector"])]
        assert row["count"] == expected["count"] and row["avg_S_price"] == pytest.approx(expected["avg_S_price"])


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.service
@pytest.mark.usefixtures("subprocesses")
def test_service_walkthrough(tmp_path: Path) -> None:
    if not _port_free(8000):
        pytest.fail("port 8000 is taken: the README's walkthrough needs it")
    home = scratch(tmp_path)
    q1 = (ROOT / "configs/q1_stock.greta").read_text()
    events = [orjson.loads(line) for line in (ROOT / "samples/stock/events.jsonl").read_text().splitlines()]
    log = tmp_path / "serve.log"
    with background(command_with("greta-stream serve                      #"), home, log) as proc:
        until(lambda: _get("/healthz") == 200, "the service listening", log, proc)  # as soon as it answers
        register, results = block_with("mkdir -p greta-data/stock"), block_with("queries/q1/results?from=-600")
        mkdir, post = commands(register)
        sh(mkdir, cwd=home)
        starting = _get("/readyz") != 200
        created = orjson.loads(sh(post, cwd=home).stdout)
        assert created["name"] == "q1" and created["status"] in ("starting", "running"), created
        if starting:  # sent while Spark starts: accepted, then run once it is up
            assert created["status"] == "starting", created
            until(lambda: httpx.get("http://127.0.0.1:8000/queries/q1").json()["status"] == "running",
                  "q1 running once Spark is up", log, proc)
        until(lambda: _rows("q1"), "q1's first rows", log, proc)
        until(_settled("q1"), "q1's rows settled", log, proc)
        page = orjson.loads(sh(commands(results)[0], cwd=home).stdout)
        want = [r for r in evaluate(q1.replace("COUNT(*), AVG(S.price)", "COUNT(*)"), events)
                if r["sector"] == 3 and -600 <= r["window_start"] <= 0]
        assert page["rows"] and all(r in want for r in page["rows"])
        feed = subprocess.run(["bash", "-c", f"timeout 5 {commands(results)[1]}"], cwd=home, env=ENV,
                              capture_output=True, text=True)
        assert feed.returncode == 124  # connected, and still open when cut
        replayed = [orjson.loads(line[len("data: "):]) for line in feed.stdout.splitlines() if line.startswith("data: ")]
        assert len(replayed) == _rows("q1") and all(r in replayed for r in page["rows"])  # every stored row

        cli = commands(block_with("greta-stream queries add --name q1-cli"))
        sh(cli[0], cwd=home)
        listed = sh(cli[1], cwd=home).stdout
        assert "q1 " in listed and "q1-cli" in listed
        stored = [orjson.loads(line) for line in sh(cli[2], cwd=home).stdout.splitlines()]
        assert len(stored) == _rows("q1")
        sh(cli[3], cwd=home)
        assert httpx.get("http://127.0.0.1:8000/queries/q1-cli").json()["status"] == "stopped"

        namespace: dict[str, Any] = {}
        cwd = Path.cwd()
        os.chdir(home)
        try:
            exec(block_with("ServiceClient", "python").text, namespace)  # noqa: S102
        finally:
            os.chdir(cwd)
        assert namespace["rows"] and all(r["window_start"] >= -600 for r in namespace["rows"])
    assert "Traceback" not in log.read_text(errors="replace")


def _get(path: str) -> int:
    try:
        return httpx.get("http://127.0.0.1:8000" + path, timeout=5).status_code
    except httpx.TransportError:
        return 0


def _settled(name: str) -> Callable[[], bool]:
    """A check: the query's stored row count stayed the same over the last 8 s."""
    seen: list[tuple[float, int]] = []

    def check() -> bool:
        seen.append((time.monotonic(), _rows(name)))
        old = [n for t, n in seen if t <= seen[-1][0] - 8]
        return bool(old) and old[-1] == seen[-1][1]

    return check


def _rows(name: str) -> int:
    r = httpx.get(f"http://127.0.0.1:8000/queries/{name}", timeout=5)
    return int(r.json()["progress"]["result_rows"]) if r.status_code == 200 else 0
