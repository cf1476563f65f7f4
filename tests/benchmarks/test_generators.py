"""Tests of benchmarks/generators.py: seeded, sorted, well-formed workloads.

``benchmarks/`` holds scripts, not an installed package, so the module is
loaded from its path; that works under ``pytest`` and ``python -m pytest``.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_generators():
    spec = importlib.util.spec_from_file_location(
        "greta_benchmark_generators", ROOT / "benchmarks" / "generators.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generators()

WORKLOADS = sorted(gen.GENERATORS)


def _frame_records(frame: pd.DataFrame) -> list[dict]:
    """Rows of a frame as dicts, leaving out missing values like the dicts do."""
    return [
        {k: v for k, v in row.items() if not (v is pd.NA or v is None)}
        for row in frame.to_dict("records")
    ]


def _by(events: list[dict], key: str) -> dict:
    groups = defaultdict(list)
    for event in events:
        groups[event[key]].append(event)
    return groups


@pytest.mark.parametrize("name", WORKLOADS)
def test_same_seed_same_stream_other_seed_other_stream(name):
    make = gen.GENERATORS[name]
    assert make(500, seed=3) == make(500, seed=3)
    assert make(500, seed=3) != make(500, seed=4)


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_count_ids_and_time_order(name, n):
    events = gen.GENERATORS[name](n, seed=1)
    assert len(events) == n
    assert [e["id"] for e in events] == list(range(n))
    times = [e["time"] for e in events]
    assert times == sorted(times)
    assert all(isinstance(e["type"], str) for e in events)


@pytest.mark.parametrize("name", WORKLOADS)
def test_dict_and_frame_variants_agree(name):
    events = gen.GENERATORS[name](2000, seed=5)
    frame = getattr(gen, f"{name}_frame")(2000, seed=5)
    assert list(frame.columns[:3]) == ["type", "time", "id"]
    assert _frame_records(frame) == events


def test_stock_attributes():
    events = gen.stock(3000, seed=2, companies=30, sectors=4, rate=50.0)
    assert {e["type"] for e in events} == {"Stock"}
    assert {e["company"] for e in events} == set(range(30))
    for e in events:
        assert e["sector"] == e["company"] % 4
        assert e["price"] > 0 and e["price"] == round(e["price"], 2)
        assert isinstance(e["volume"], int) and e["volume"] > 0
    times = [e["time"] for e in events]
    assert all(a < b for a, b in itertools.pairwise(times))
    assert 3000 / 50.0 * 0.8 < times[-1] < 3000 / 50.0 * 1.2


def test_stock_prices_walk_per_company():
    for trade in _by(gen.stock(5000, seed=4, companies=5), "company").values():
        prices = np.array([e["price"] for e in trade])
        assert np.all(np.abs(np.diff(np.log(prices))) < 0.05)


def test_cluster_attributes():
    events = gen.cluster(5000, seed=2, mappers=6, jobs=4)
    assert {e["type"] for e in events} == {"Start", "Measurement", "End"}
    for e in events:
        assert 0 <= e["mapper"] < 6 and 0 <= e["job"] < 4
        assert 0 <= e["cpu"] <= 1000 and 0 <= e["memory"] <= 1000
        assert e["load"] >= 0
    assert 90 < np.mean([e["load"] for e in events]) < 110


TASK_STEPS = {
    ("Start", "Measurement"),
    ("Measurement", "Measurement"),
    ("Measurement", "End"),
    ("End", "Start"),
}


def test_cluster_tasks_run_start_measurements_end_per_mapper():
    for run in _by(gen.cluster(5000, seed=6, mappers=4), "mapper").values():
        assert run[0]["type"] == "Start"
        assert sum(e["type"] == "End" for e in run) > 10
        for prev, cur in itertools.pairwise(run):
            assert (prev["type"], cur["type"]) in TASK_STEPS
            if cur["type"] != "Start":
                assert cur["job"] == prev["job"]  # one job per task


def test_traffic_attributes():
    events = gen.traffic(20000, seed=2, vehicles=50, segments=8, accident_rate=0.02)
    positions = [e for e in events if e["type"] == "Position"]
    accidents = [e for e in events if e["type"] == "Accident"]
    assert len(positions) + len(accidents) == len(events)
    assert 200 < len(accidents) < 600
    assert all(set(e) == {"type", "time", "id", "segment"} for e in accidents)
    for e in positions:
        assert 0 <= e["vehicle"] < 50 and 0 <= e["segment"] < 8
        assert isinstance(e["speed"], int) and 0 <= e["speed"] <= 100
    assert all(isinstance(e["time"], int) for e in events)
    assert all(0 <= e["segment"] < 8 for e in accidents)


def test_traffic_vehicles_report_every_30_seconds_and_move():
    events = gen.traffic(10000, seed=3, vehicles=40, segments=10, accident_rate=0.0)
    for reports in _by(events, "vehicle").values():
        times = [e["time"] for e in reports]
        assert set(np.diff(times)) == {30}
        assert len({e["segment"] for e in reports}) > 1


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("stock", {"rate": 0}),
        ("stock", {"companies": 0}),
        ("cluster", {"mappers": -1}),
        ("traffic", {"accident_rate": 1.5}),
    ],
)
def test_bad_arguments_are_rejected(name, kwargs):
    with pytest.raises(ValueError):
        gen.GENERATORS[name](10, **kwargs)
    with pytest.raises(ValueError):
        gen.GENERATORS[name](-1)


def test_cli_writes_jsonl_that_reads_back(tmp_path):
    out = tmp_path / "stock.jsonl"
    argv = ["stock", "300", "--seed", "1", "--param", "companies=5", "--out", str(out)]
    assert gen.main(argv) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == gen.stock(300, seed=1, companies=5)


def test_bundled_sample_matches_its_generator():
    path = ROOT / "samples" / "stock" / "events.jsonl"
    with path.open(encoding="utf-8") as lines:
        sample = [json.loads(line) for line in lines]
    assert sample == gen.stock(2000, seed=7, companies=20, sectors=4)
