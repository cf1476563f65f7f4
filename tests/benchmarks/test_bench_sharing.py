"""The many-query benchmarks run end to end, and every query's rows agree across their modes."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

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


@pytest.mark.nightly
@pytest.mark.spark
def test_bench_sharing_through_run_config(bench: Callable[..., str]) -> None:
    out = bench("bench_sharing.py", "--run-config", "--sizes", "4", "--events", "3000", "--files", "2", "--no-floor")
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("4 ")]
    assert [r[3] for r in rows] == ["on", "off"], out  # the floor's run (a third Spark start) left out here
    assert [r[-1] for r in rows] == ["same", "same"], out
    assert all(int(r[5].replace(",", "")) > 0 for r in rows), out  # rows written through the sinks
    assert "floor / off" not in out, out


def _bench_sharing() -> ModuleType:
    """benchmarks/bench_sharing.py as a module, in this process."""
    name = "greta_bench_sharing"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[2] / "benchmarks" / "bench_sharing.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_the_floors_files_hold_the_first_event_of_each_type() -> None:
    """What `--run-config`'s floor run reads (the smoke test above leaves that run out): per file, one event of
    each of the 10 types, the first of its type, in time order."""
    bench = _bench_sharing()
    events = bench.ticker_events(3000, seed=0, rate=50.0, bursty=False)
    for part in (events[:1500], events[1500:]):
        floor = bench.floor_part(part)
        assert sorted(e["type"] for e in floor) == sorted({e["type"] for e in part}) and len(floor) <= 10
        assert all(e is next(f for f in part if f["type"] == e["type"]) for e in floor)
        assert [e["time"] for e in floor] == sorted(e["time"] for e in floor)


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
