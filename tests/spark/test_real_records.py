"""Real public records through `greta-stream run`: nulls, ties, ints beside floats, history out of order.

Two public data sets bundled by vega_datasets, written as JSON encoders write them (a whole number
as an int: 18 beside 15.5; a missing reading as null): 406 cars of 1970-1982 (8 without a mileage,
6 without a horsepower; 12 model years, so hundreds of events share each timestamp) and a year of
hourly Seattle temperatures. Each source's files hold random parts of its span (files written by
parallel writers), with a lateness that covers the span. The run exits 0, names no misspelling
(a null is no typo), loses nothing to `future`, and writes exactly `evaluate`'s rows.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greta_stream import evaluate

pytestmark = pytest.mark.spark

ROOT = Path(__file__).parent.parent.parent
CARS = ("RETURN origin, COUNT(*), MAX(C.hp), AVG(C.mpg), MIN(C.accel) PATTERN Car C+ "
        "WHERE [origin] AND C.mpg < NEXT(C).mpg GROUP-BY origin WITHIN 1461 days SLIDE 365 days")
WEATHER = ("RETURN COUNT(*), MIN(W.temp), SUM(W.temp) PATTERN Weather W+ WHERE W.temp > NEXT(W).temp "
           "WITHIN 1 day SLIDE 6 hours")


def as_json_number(v: Any) -> Any:
    """A number as JavaScript's JSON.stringify writes it: whole floats as ints, NaN as null."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return int(v) if v.is_integer() else v
    return v


def cars() -> list[dict[str, Any]]:
    from vega_datasets import data

    out = []
    for i, r in enumerate(data.cars().itertuples()):
        out.append({"type": "Car", "time": r.Year.strftime("%Y-%m-%dT%H:%M:%SZ"), "id": i, "name": r.Name,
                    "origin": r.Origin, "mpg": as_json_number(r.Miles_per_Gallon),
                    "hp": as_json_number(r.Horsepower), "accel": as_json_number(r.Acceleration)})
    return out


def weather() -> list[dict[str, Any]]:
    from vega_datasets import data

    return [{"type": "Weather", "time": r.date.strftime("%Y-%m-%dT%H:%M:%SZ"), "id": i, "temp": as_json_number(r.temp)}
            for i, r in enumerate(data.seattle_temps().itertuples())]


def write_parts(folder: Path, events: list[dict[str, Any]], parts: int, seed: int) -> None:
    folder.mkdir(parents=True)
    shuffled = events[:]
    random.Random(seed).shuffle(shuffled)
    for p in range(parts):
        (folder / f"part-{p}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in shuffled[p::parts]))


def streamed(folder: Path) -> list[str]:
    return sorted(json.dumps(json.loads(line), sort_keys=True) for f in folder.glob("part-*.jsonl")
                  for line in f.read_text().splitlines())


@pytest.mark.usefixtures("subprocesses")
def test_real_records_with_nulls_and_history_out_of_order(tmp_path: Path) -> None:
    from greta_stream.connectors.jsonl import dumps

    sets = {"cars": (CARS, cars(), 14 * 366 * 86_400), "weather": (WEATHER, weather(), 366 * 86_400)}
    queries = []
    for name, (text, events, lateness) in sets.items():
        write_parts(tmp_path / "in" / name, events, 3, seed=len(name))
        queries.append({"name": name, "text": text, "lateness_s": lateness,
                        "source": {"format": "jsonl", "path": f"in/{name}"},
                        "sinks": [{"format": "jsonl", "path": f"out/{name}"}],
                        "dead_letter": {"format": "jsonl", "path": f"dead/{name}"}})
    config = {"source": queries[0].pop("source"), "checkpoint": "chk", "once": True, "queries": queries}
    (tmp_path / "pipeline.yaml").write_text(json.dumps(config))
    res = subprocess.run([sys.executable, "-m", "greta_stream", "run", "-c", str(tmp_path / "pipeline.yaml"),
                          "--flush-at-end"], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "error" not in res.stderr and "misspelled" not in res.stderr and "did you mean" not in res.stderr
    assert "; columnar engine" in res.stderr  # the progress lines name what each micro-batch ran on
    for name, (text, events, _) in sets.items():
        batch = evaluate(text, events)
        assert batch.problems == []
        dead = [json.loads(line) for f in (tmp_path / "dead" / name).glob("*.jsonl")
                for line in f.read_text().splitlines()]
        assert sorted(d["reason"] for d in dead) == sorted(d.reason for d in batch.dead_letters)
        assert {d["reason"] for d in dead} <= {"missing_attribute"}  # the nulls, and nothing future
        assert streamed(tmp_path / "out" / name) == sorted(json.dumps(json.loads(dumps(r)), sort_keys=True)
                                                           for r in batch)
    assert len([d for d in (tmp_path / "dead" / "cars").glob("*.jsonl")]) > 0
