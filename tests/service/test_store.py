"""The results store alone (no server): retention, latest rows per group, and exports of exact values."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pyarrow.parquet as pq

from greta_service.export import export
from greta_service.store import ResultRow, Retention, SQLiteStore


def rows(batch: int, groups: tuple[str, ...] = ("a", "b")) -> list[ResultRow]:
    """One window per batch (starts 10 * batch), a row per group."""
    return [ResultRow(10.0 * batch, 10.0 * batch + 30, json.dumps([g]),
                      json.dumps({"window_start": 10 * batch, "g": g, "count": batch})) for g in groups]


def payloads(store: SQLiteStore, query: str = "q") -> list[dict]:
    return [json.loads(p) for p in store.page(query, limit=1000)[1]]


def test_retention_by_rows_keeps_the_newest_and_counts_everything(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite", Retention(max_rows=5))
    for b in range(4):
        store.write_batch("q", b, rows(b), {"late": 1})
    store.write_batch("other", 0, rows(0), {})
    assert [(r["window_start"], r["g"]) for r in payloads(store)] == [(10, "b"), (20, "a"), (20, "b"), (30, "a"),
                                                                       (30, "b")]
    counts = store.counts("q")
    assert (counts.rows, counts.batches, counts.dead_by_reason) == (8, 4, {"late": 4})
    assert len(payloads(store, "other")) == 2  # per query
    store.write_batch("q", 3, rows(3), {"late": 1})  # a replayed batch replaces its rows, as without retention
    assert len(payloads(store)) == 5 and store.counts("q").rows == 8


def test_retention_by_age_drops_rows_of_old_batches(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite", Retention(max_age_s=0.5))
    store.write_batch("q", 0, rows(0), {})
    time.sleep(0.6)
    store.write_batch("q", 1, rows(1), {})
    assert {r["window_start"] for r in payloads(store)} == {10}
    assert SQLiteStore(tmp_path / "t.sqlite").retention == Retention()  # no bound by default


def test_latest_is_each_groups_row_of_its_latest_window(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    store.write_batch("q", 0, rows(0, ("a", "b", "c")), {})
    store.write_batch("q", 1, rows(1, ("a",)), {})
    store.write_batch("q", 2, rows(2, ("b",)), {})
    got = [json.loads(p) for p in store.latest("q")]
    assert [(r["g"], r["window_start"]) for r in got] == [("a", 10), ("b", 20), ("c", 0)]
    assert store.latest("nothing") == []


def test_exports_keep_exact_values_and_types() -> None:
    big = 3**80  # an exact count past 64 bits
    data = [{"window_start": 0, "window_end": 10.5, "sector": "tech", "count": big, "avg": 1.5, "n": 2},
            {"window_start": 10, "window_end": 20.5, "sector": None, "count": 7, "avg": None, "n": 3}]
    texts = [json.dumps(r) for r in data]
    columns = ["window_start", "window_end", "sector", "count", "avg", "n"]
    assert export("jsonl", columns, texts).decode().splitlines() == texts
    table = list(csv.reader(io.StringIO(export("csv", columns, texts).decode())))
    assert table[0] == columns and table[1][3] == str(big) and table[2][2] == ""
    parquet = pq.read_table(io.BytesIO(export("parquet", columns, texts)))
    assert str(parquet.schema.field("n").type) == "int64" and str(parquet.schema.field("avg").type) == "double"
    assert parquet.column("count").to_pylist() == [str(big), "7"]  # exact, as text
    assert parquet.column("sector").to_pylist() == ["tech", None]
    assert export("csv", columns, []).decode() == ",".join(columns) + "\n"


def test_counts_add_the_batches_written_since_and_follow_a_replay(tmp_path: Path) -> None:
    """A read of a query's counts reads the batches written since the last read (they are kept for
    ever: a whole read grew with the stream's age); a batch written again (a replay) or results
    cleared are counted anew."""
    store = SQLiteStore(tmp_path / "s.sqlite")
    for b in range(3):
        store.write_batch("q", b, rows(b), {"late": 1})
    first = store.counts("q")
    assert (first.rows, first.batches, first.last_batch_id, first.dead_by_reason) == (6, 3, 2, {"late": 3})
    first.dead_by_reason["late"] = 99  # a caller's copy: the store's own stays
    store.write_batch("q", 3, rows(3, ("a",)), {"malformed": 2})
    second = store.counts("q")
    assert (second.rows, second.batches, second.last_batch_id) == (7, 4, 3)
    assert second.dead_by_reason == {"late": 3, "malformed": 2}
    store.write_batch("q", 1, rows(1, ("a",)), {})  # batch 1 replayed with other outputs
    again = store.counts("q")
    assert (again.rows, again.batches, again.dead_by_reason) == (6, 4, {"late": 2, "malformed": 2})
    store.clear_results("q")
    assert store.counts("q").batches == 0 and store.counts("other").rows == 0
