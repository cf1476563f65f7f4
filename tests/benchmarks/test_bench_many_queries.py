"""`bench_many_queries.py --quick` runs end to end against a real service: its table is printed, every request 2xx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

pytestmark = [pytest.mark.service, pytest.mark.slow]

COLUMNS = ["queries", "post p50 s", "p95 s", "max s", "list s", "metrics s", "get s", "RSS GB", "JVM GB", "py GB",
           "data MB", "control MB", "ctl files", "log MB", "starts", "non-2xx", "batch ms", "lag files", "min"]


def test_bench_many_queries_quick() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_many_queries.py"), "--quick"],
                          capture_output=True, text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]  # 1: some request was answered with a non-2xx status
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("queries ") and "post p50 s" in line)
    assert [c.strip() for c in lines[head].split("  ") if c.strip()] == COLUMNS, out
    rows = [[c.strip() for c in line.split("  ") if c.strip()] for line in lines[head + 2:head + 6]]
    assert [r[0] for r in rows[:3]] == ["5", "10", "20"] and rows[3][0].startswith("20 +"), out
    for r in rows:
        assert len(r) == len(COLUMNS), r
        cell = dict(zip(COLUMNS, r))
        assert cell["non-2xx"] == "0", out
        assert float(cell["RSS GB"]) > 0 and float(cell["JVM GB"]) > 0, out
        assert int(cell["ctl files"].replace(",", "")) > 0 and cell["starts"] == "1", out  # one source, one stream
    settled = dict(zip(COLUMNS, rows[3]))
    assert settled["post p50 s"] == "-", out  # no registration since the row before
    assert settled["batch ms"] != "-", out  # the stream ran a micro-batch by then
    assert "non-2xx answers: 0" in out and "STOPPED EARLY" not in out, out
