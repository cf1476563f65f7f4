"""The streaming benchmark runs end to end and its streamed rows equal batch rows."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.nightly
def test_bench_stream_smoke(bench: Callable[..., str]) -> None:
    out = bench("bench_stream.py", "--per-window", "600", "--batch-s", "1,10", "--windows", "1.5",
                "--engines", "columnar,incremental,general")
    lines = [ln.split() for ln in out.splitlines()[1:] if ln.strip()]
    assert [(ln[0], ln[2]) for ln in lines] == [(e, b) for e in ("columnar", "incremental", "general")
                                                 for b in ("1", "10")]
    assert all(ln[-1] == "True" for ln in lines), out


def test_bench_stream_other_window(bench: Callable[..., str]) -> None:
    out = bench("bench_stream.py", "--within", "120", "--slide", "30", "--per-window", "300", "--batch-s", "30",
                "--windows", "3", "--engines", "columnar,incremental")
    lines = [ln.split() for ln in out.splitlines()[1:] if ln.strip()]
    assert [ln[0] for ln in lines] == ["columnar", "incremental"]
    assert all(ln[-1] == "True" and int(ln[3].replace(",", "")) == 900 for ln in lines), out


def test_bench_stream_floor(bench: Callable[..., str]) -> None:
    """`--floor` runs each engine again with no-op kernels: a last column of events/s."""
    out = bench("bench_stream.py", "--per-window", "3000", "--batch-s", "10", "--windows", "1.5",
                "--engines", "columnar,incremental", "--floor")
    head, *lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    assert head[-2:] == ["floor", "ev/s"]
    assert [ln[0] for ln in lines] == ["columnar", "incremental"]
    assert all(ln[-2] == "True" and int(ln[-1].replace(",", "")) > 0 for ln in lines), out
