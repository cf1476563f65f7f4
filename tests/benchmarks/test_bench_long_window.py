"""`bench_long_window.py` runs end to end at a tiny size: both sweeps in engine mode, one run through the CLI."""

from __future__ import annotations

from collections.abc import Callable

import pytest

COLUMNS = ["mode", "window", "slide", "rate ev/s", "ev/batch", "batches", "kept ev", "med ms", "max ms", "state B",
           "fill B/b", "RSS MB", "B/kept", "Δ B/kept", "store B/kept", "headroom x", "wall x", "note"]

pytestmark = pytest.mark.slow


def tables(out: str) -> list[list[dict[str, str]]]:
    """Each printed table's rows as {column: cell}; cells are two or more spaces apart, an empty note is left off."""
    lines, found = out.splitlines(), []
    for i, line in enumerate(lines):
        if line.startswith("mode "):
            assert [c.strip() for c in line.split("  ") if c.strip()] == COLUMNS, line
            rows = []
            for text in lines[i + 2:]:
                if not text.strip():
                    break
                rows.append(dict(zip(COLUMNS, [c.strip() for c in text.split("  ") if c.strip()])))
            found.append(rows)
    return found


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def check(row: dict[str, str]) -> None:
    """The figures every finished run has, and how they relate."""
    assert row.get("note", "") == "", row
    for column in ["rate ev/s", "ev/batch", "batches", "kept ev", "med ms", "max ms", "state B", "fill B/b", "RSS MB",
                   "B/kept", "headroom x"]:
        number(row[column])
    assert 0 < number(row["med ms"]) <= number(row["max ms"]), row
    assert number(row["state B"]) > 0 and number(row["RSS MB"]) > 0 and number(row["headroom x"]) > 0, row
    assert number(row["B/kept"]) == pytest.approx(number(row["RSS MB"]) * 2**20 / number(row["kept ev"]), rel=0.01)


@pytest.mark.nightly
def test_engine_mode_both_sweeps(bench: Callable[..., str]) -> None:
    out = bench("bench_long_window.py", "--modes", "engine", "--windows-min", "0.5,1", "--rate", "40",
                "--batch-s", "5", "--window-min", "1", "--rates", "40,80", "--batch-events", "200", "--budget-s", "120")
    window, rate = tables(out)
    assert [(r["window"], r["slide"], r["kept ev"], r["batches"]) for r in window] == [
        ("30s", "0.5s", "1,200", "9"), ("1m", "1s", "2,400", "18")], out
    assert [(r["rate ev/s"], r["ev/batch"], r["kept ev"], r["batches"]) for r in rate] == [
        ("40", "200", "2,400", "18"), ("80", "200", "4,800", "36")], out
    for row in window + rate:
        assert row["mode"] == "engine" and row["wall x"] == "-", row
        check(row)
        assert 0 < number(row["Δ B/kept"]) < number(row["B/kept"]), row
        assert 0 < number(row["store B/kept"]) < number(row["B/kept"]), row  # the map state's values
    assert "engine: bytes per kept event (RSS / kept): 30s@40:" in out, out
    assert "engine: headroom of 1h / 1m at 2,000 ev/s: not in this run" in out, out


@pytest.mark.nightly
@pytest.mark.spark
def test_run_mode_one_small_run(bench: Callable[..., str]) -> None:
    out = bench("bench_long_window.py", "--modes", "run", "--sweeps", "window", "--windows-min", "1", "--rate", "40",
                "--batch-s", "20", "--shards", "2", "--budget-s", "300")
    (rows,) = tables(out)
    (row,) = rows
    assert [row[c] for c in COLUMNS[:7]] == ["run", "1m", "1s", "40", "800", "5", "2,400"], row
    check(row)
    assert row["Δ B/kept"] == row["store B/kept"] == "-" and number(row["wall x"]) > 0, row


def test_same_length_streams_every_window_as_long_as_the_longest(bench: Callable[..., str]) -> None:
    """`--same-length`: the shorter window runs as many batches as the longest, so that the worker memory per
    kept event compares two steady runs."""
    out = bench("bench_long_window.py", "--modes", "engine", "--sweeps", "window", "--windows-min", "0.5,1",
                "--rate", "40", "--batch-s", "5", "--same-length", "--budget-s", "120")
    (window,) = tables(out)
    assert [(r["window"], r["kept ev"], r["batches"]) for r in window] == [("30s", "1,200", "18"),
                                                                           ("1m", "2,400", "18")], out
    for row in window:
        check(row)
    assert "engine: worker memory per kept event, 1m less 30s at 40 ev/s: RSS at the end" in out, out
