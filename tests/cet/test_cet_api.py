"""CET mode through `evaluate` and `greta-stream evaluate --mode cet`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from greta_stream import evaluate
from greta_stream.connectors.jsonl import loads

ROOT = Path(__file__).resolve().parents[2]
STOCK = ("RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price "
         "GROUP-BY sector WITHIN 20 s SLIDE 10 s")


def stock_events() -> list[dict]:
    prices = [10, 12, 9, 11, 8, 7, 13, 6, 5, 9, 4, 3]
    return [{"type": "Stock", "time": i * 2, "id": i, "company": i % 2, "sector": "tech" if i % 4 < 2 else "bank",
             "price": p} for i, p in enumerate(prices)]


def test_evaluate_cet_records_and_columns() -> None:
    rows = evaluate(STOCK, stock_events(), mode="cet", trends="all", max_trends=3)
    assert rows.columns == ["window_start", "window_end", "sector", "trend", "total", "truncated"]
    assert rows and all(list(r) == rows.columns for r in rows)
    counts = {(r["window_start"], r["sector"]): r["count"] for r in evaluate(STOCK, stock_events())}
    for r in rows:
        assert r["total"] == counts[(r["window_start"], r["sector"])]
        assert r["truncated"] == (r["total"] > 3)
    frame = rows.to_pandas()
    assert list(frame.columns) == rows.columns and len(frame) == len(rows)


def test_return_trends_defaults_to_cet_and_rejects_aggregate_mode() -> None:
    text = "RETURN TRENDS PATTERN SEQ(A, B) WITHIN 10 s"
    events = [{"type": "A", "time": 1, "id": "a"}, {"type": "B", "time": 2, "id": "b"}, {"type": "B", "time": "x"}]
    rows = evaluate(text, events, with_events=True)
    assert rows == [{"window_start": 0, "window_end": 10, "trend": ["a", "b"], "total": 1, "truncated": False,
                     "aliases": ["A", "B"], "events": events[:2]}]
    assert [d.reason for d in rows.dead_letters] == ["bad_time"]
    with pytest.raises(ValueError):
        evaluate(text, events, mode="aggregate")
    with pytest.raises(ValueError):
        evaluate(text, events, trends="most")


@pytest.mark.usefixtures("subprocesses")
def test_cli_cet_mode(tmp_path: Path) -> None:
    src = tmp_path / "events.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in stock_events()))
    args = [sys.executable, "-m", "greta_stream", "evaluate", "-q", STOCK, "-e", str(src), "--no-progress"]
    res = subprocess.run([*args, "--mode", "cet", "--trends", "complete", "--max-trends", "2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    got = [loads(line) for line in res.stdout.splitlines()]
    assert got == evaluate(STOCK, stock_events(), mode="cet", max_trends=2)
    assert got
    res = subprocess.run([*args, "--mode", "cet", "--max-trends", "0"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert res.returncode == 2 and "max_trends" in res.stderr
