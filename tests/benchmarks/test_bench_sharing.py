"""The many-query benchmarks run end to end, and every query's rows agree across their modes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.slow


def test_bench_sharing_smoke(bench: Callable[..., str]) -> None:
    out = bench("bench_sharing.py", "--sizes", "4", "--events", "3000")
    tables = [ln.split() for ln in out.splitlines() if ln.startswith("4 ")]
    assert len(tables) == 3 and all(t[-1] == "same" for t in tables), out  # uniform, bursty, middle
    assert all(int(t[4].replace(",", "")) > 0 for t in tables), out  # rows: the workloads match something


def test_bench_multiquery_smoke(bench: Callable[..., str]) -> None:
    out = bench("bench_multiquery.py", "--streams", "stock", "--sizes", "1,3", "--events", "2000")
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("stock ")]
    assert [r[1] for r in rows] == ["1", "3"] and all(r[-1] == "yes" for r in rows), out


@pytest.mark.spark
def test_bench_sharing_through_run_config(bench: Callable[..., str]) -> None:
    out = bench("bench_sharing.py", "--run-config", "--sizes", "4", "--events", "3000", "--files", "2", "--no-floor")
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("4 ")]
    assert [r[3] for r in rows] == ["on", "off"], out  # the floor's run (a third Spark start) left out here
    assert [r[-1] for r in rows] == ["same", "same"], out
    assert all(int(r[5].replace(",", "")) > 0 for r in rows), out  # rows written through the sinks
    assert "floor / off" not in out, out


def test_bench_sharing_lanes(bench: Callable[..., str]) -> None:
    out = bench("bench_sharing.py", "--lanes", "--events", "3000")
    rows = [ln.split() for ln in out.splitlines() if ln[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "2", "4", "8", "16", "20", "40", "80"], out
    assert all(float(r[1]) > 0 and float(r[-1]) > 0 for r in rows), out  # every width went through the kernel


def test_bench_sharing_choices(bench: Callable[..., str]) -> None:
    out = bench("bench_sharing.py", "--choices", "--workload", "bursty", "--sizes", "12", "--events", "3000")
    rows = [ln.split() for ln in out.splitlines() if ln[:1] == "T"]
    assert rows and all(r[-1] == "same" and r[6] in ("union", "apart") for r in rows), out
    assert all(1 < int(r[3]) <= int(r[2]) for r in rows), out  # lanes: two or more, at most one per query
    assert all(r[-2] in ("right", "close", "wrong") for r in rows), out
    tally = next(ln for ln in out.splitlines() if "choices:" in ln)
    assert sum(int(w) for w in tally.replace(",", " ").split() if w.isdigit()) == len(rows), out


def test_bench_sharing_ceiling(bench: Callable[..., str]) -> None:
    out = bench("bench_sharing.py", "--ceiling", "--workload", "middle", "--sizes", "8", "--events", "3000")
    rows = {ln[:34].strip(): ln[34:].split() for ln in out.splitlines()
            if ln.startswith(("MultiRunner", "one traversal", "a query per", "... but", "sharing on, kernels"))}
    assert len(rows) == 6, out
    assert [rows[k][-1] for k in ("MultiRunner, sharing off", "MultiRunner, sharing on",
                                  "one traversal per Kleene part")] == ["same"] * 3, out
    assert all(float(r[0]) > 0 for r in rows.values()), out
