"""The greta-stream command, run for real as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from greta_stream import evaluate
from greta_stream.connectors.jsonl import loads

ROOT = Path(__file__).parent.parent


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greta_stream", *args], capture_output=True, text=True,
                          input=stdin, cwd=ROOT, timeout=120)


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


def test_evaluate_with_custom_field_names_and_huge_counts(tmp_path: Path) -> None:
    n = 15_000  # 2**15000 - 1 has 4,516 digits: past Python's default int-to-str limit
    src = tmp_path / "e.jsonl"
    src.write_text("".join(json.dumps({"kind": "A", "ts": i, "key": f"e{i}"}) + "\n" for i in range(n)))
    res = cli("evaluate", "-q", "RETURN COUNT(*) PATTERN A+ WITHIN 1 day", "-e", str(src),
              "--type-field", "kind", "--time-field", "ts", "--id-field", "key", "--no-progress")
    assert res.returncode == 0, res.stderr
    (row,) = [loads(line) for line in res.stdout.splitlines()]
    assert row["count"] == 2**n - 1


def test_bad_query_exits_2_with_position() -> None:
    res = cli("explain", "--query", "RETURN COUNT(*) PATTERN (SEQ(A, NOT B))+ WITHIN 1 s")
    assert res.returncode == 2
    assert "NOT can end only the outermost SEQ of the pattern (line 1, column 33)" in res.stderr


def test_explain_prints_templates() -> None:
    res = cli("explain", "--query", "configs/q3_traffic.greta")
    assert res.returncode == 0, res.stderr
    assert "leading NOT" in res.stdout and "partition by: segment" in res.stdout


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


def test_version() -> None:
    import subprocess
    import sys

    from greta_stream import __version__

    out = subprocess.run([sys.executable, "-m", "greta_stream", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"greta-stream {__version__}"
