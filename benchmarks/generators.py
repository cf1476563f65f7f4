"""Seeded synthetic event streams for the three workloads of the GRETA paper.

The GRETA paper (Poppe et al., sec. 10.1 "Data Sets") runs Q1 on NYSE stock
transactions, Q2 on a generated Hadoop cluster-monitoring stream (Table 2) and
Q3 on streams from the Linear Road traffic simulator. This module builds
stand-ins for all three that anyone can rebuild from a seed:

- ``stock``: ``Stock`` transactions; each company's price is a geometric
  random walk (Q1, ``configs/q1_stock.greta``);
- ``cluster``: per mapper, tasks of ``Start``, ``Measurement``+, ``End`` with
  the attribute distributions of Table 2 (Q2, ``configs/q2_cluster.greta``);
- ``traffic``: Linear-Road-like ``Position`` reports of vehicles driving round
  a ring road of 1-mile segments, plus occasional ``Accident`` events
  (Q3, ``configs/q3_traffic.greta``).

Every workload comes in two forms built from the same numpy columns, so they
always agree: ``stock(...)`` returns a list of event dicts
``{"type", "time", "id", ...attributes}`` sorted by time, and
``stock_frame(...)`` returns the same events as a pandas DataFrame without
building any per-event dict (fast for millions of events). Ids are the
events' 0-based positions in that order. An attribute that an event type does
not have is absent from its dict and ``<NA>`` in the frame (``Accident``
events have no ``vehicle`` or ``speed``).

Times are seconds. ``stock`` and ``cluster`` use float times of a Poisson
process at ``rate`` events per second whose gaps are whole microseconds, so
times strictly increase and print with at most six decimals. ``traffic`` uses
integer seconds like Linear Road, so reports of different vehicles (and
accidents) may share a time; one vehicle's reports never do.

Needs only the standard library and numpy; pandas is imported by the
``*_frame`` functions alone. Must not import ``greta_stream``: the streams are
inputs to the engine and stay independent of it.

Command line (JSON lines to ``--out``, or to stdout)::

    python benchmarks/generators.py stock 10000 --seed 1 --out stock.jsonl
    python benchmarks/generators.py stock 2000 --seed 7 \\
        --param companies=20 --param sectors=4 --out samples/stock/events.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

Columns = dict[str, np.ndarray]
Event = dict[str, Any]

US_PER_S = 1_000_000

# stock: per-transaction log-return spread, starting price range, lot size
STOCK_VOLATILITY = 0.002
STOCK_START_PRICE = (10.0, 500.0)
STOCK_LOT = 100

# cluster: Table 2 of the paper
CPU_MEMORY_MAX = 1000
LOAD_LAMBDA = 100
CLUSTER_TYPES = np.array(["Start", "Measurement", "End"], dtype=object)
START, MEASUREMENT, END = range(3)

# traffic: Linear Road reports every 30 s; speeds in mph, segments 1 mile long
REPORT_INTERVAL_S = 30
SPEED_MAX = 100
SPEED_STEP = 8.0


# ------------------------------------------------------------ public API


def stock(
    n: int, *, seed: int = 0, companies: int = 100, sectors: int = 10, rate: float = 10.0
) -> list[Event]:
    """``n`` Stock events: company, sector = company % sectors, price, volume."""
    return _records(_stock_columns(n, seed, companies, sectors, rate))


def stock_frame(
    n: int, *, seed: int = 0, companies: int = 100, sectors: int = 10, rate: float = 10.0
) -> pd.DataFrame:
    """The events of :func:`stock` as a DataFrame, one column per field."""
    return _frame(_stock_columns(n, seed, companies, sectors, rate))


def cluster(
    n: int,
    *,
    seed: int = 0,
    mappers: int = 10,
    jobs: int = 10,
    rate: float = 10.0,
    measurements: float = 8.0,
) -> list[Event]:
    """``n`` Start/Measurement/End events: mapper, job, cpu, memory, load.

    Each mapper runs tasks one after another; a task is a Start, on average
    ``measurements`` (at least one) Measurement events and an End, all with
    one job drawn uniformly. The stream ends wherever ``n`` is reached, so a
    mapper's last task may be cut short.
    """
    return _records(_cluster_columns(n, seed, mappers, jobs, rate, measurements))


def cluster_frame(
    n: int,
    *,
    seed: int = 0,
    mappers: int = 10,
    jobs: int = 10,
    rate: float = 10.0,
    measurements: float = 8.0,
) -> pd.DataFrame:
    """The events of :func:`cluster` as a DataFrame, one column per field."""
    return _frame(_cluster_columns(n, seed, mappers, jobs, rate, measurements))


def traffic(
    n: int,
    *,
    seed: int = 0,
    vehicles: int = 200,
    segments: int = 20,
    accident_rate: float = 0.01,
) -> list[Event]:
    """``n`` events: Position (vehicle, segment, speed) and Accident (segment).

    Each vehicle reports every 30 s while its speed (0..100 mph) drifts and it
    moves round a ring of ``segments`` 1-mile segments. Each event is an
    Accident with probability ``accident_rate``, at a uniform time of the
    stream and in a uniform segment.
    """
    return _records(_traffic_columns(n, seed, vehicles, segments, accident_rate))


def traffic_frame(
    n: int,
    *,
    seed: int = 0,
    vehicles: int = 200,
    segments: int = 20,
    accident_rate: float = 0.01,
) -> pd.DataFrame:
    """The events of :func:`traffic` as a DataFrame (vehicle, speed nullable)."""
    return _frame(_traffic_columns(n, seed, vehicles, segments, accident_rate))


GENERATORS: dict[str, Callable[..., list[Event]]] = {
    "stock": stock,
    "cluster": cluster,
    "traffic": traffic,
}


def write_jsonl(events: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write ``events`` to ``path``, one JSON object per line; return the count."""
    with open(path, "w", encoding="utf-8") as out:
        return _dump(events, out)


# ------------------------------------------------------------ workloads


def _stock_columns(n: int, seed: int, companies: int, sectors: int, rate: float) -> Columns:
    """Columns of the stock stream (see :func:`stock`)."""
    _check_count(n)
    _check_positive(companies=companies, sectors=sectors, rate=rate)
    rng = np.random.default_rng(seed)
    time = _poisson_times_s(rng, n, rate)
    company = rng.integers(0, companies, n)
    start_price = rng.uniform(*STOCK_START_PRICE, companies)
    log_walk = _group_cumsum(rng.normal(0.0, STOCK_VOLATILITY, n), company)
    price = np.maximum(np.round(start_price[company] * np.exp(log_walk), 2), 0.01)
    volume = STOCK_LOT * rng.geometric(0.2, n)
    return _columns(
        np.full(n, "Stock", dtype=object),
        time,
        company=company,
        sector=company % sectors,
        price=price,
        volume=volume,
    )


def _cluster_columns(
    n: int, seed: int, mappers: int, jobs: int, rate: float, measurements: float
) -> Columns:
    """Columns of the cluster stream (see :func:`cluster`)."""
    _check_count(n)
    _check_positive(mappers=mappers, jobs=jobs, rate=rate, measurements=measurements)
    rng = np.random.default_rng(seed)
    time = _poisson_times_s(rng, n, rate)
    mapper = rng.integers(0, mappers, n)
    order, starts = _group_order(mapper)
    phase_sorted, task_sorted = _task_layout(rng, np.diff(np.r_[starts, n]), measurements)
    phase = np.empty(n, dtype=np.int64)
    phase[order] = phase_sorted
    job = np.empty(n, dtype=np.int64)
    job[order] = rng.integers(0, jobs, task_sorted.max(initial=-1) + 1)[task_sorted]
    return _columns(
        CLUSTER_TYPES[phase],
        time,
        mapper=mapper,
        job=job,
        cpu=rng.integers(0, CPU_MEMORY_MAX + 1, n),
        memory=rng.integers(0, CPU_MEMORY_MAX + 1, n),
        load=rng.poisson(LOAD_LAMBDA, n),
    )


def _task_layout(
    rng: np.random.Generator, counts: np.ndarray, measurements: float
) -> tuple[np.ndarray, np.ndarray]:
    """Phase (START/MEASUREMENT/END) and global task number of each event.

    ``counts[m]`` events of mapper ``m`` follow each other in the result, in
    time order. A task has at least three events, so ``count // 3 + 1`` task
    lengths always cover a mapper's events; the last task may be cut.
    """
    phases, tasks, first_task = [], [], 0
    for count in counts:
        lengths = 2 + np.maximum(1, rng.poisson(measurements, count // 3 + 1))
        task = np.repeat(np.arange(lengths.size), lengths)[:count]
        step = np.arange(count) - (np.cumsum(lengths) - lengths)[task]
        last = lengths[task] - 1
        phases.append(np.where(step == 0, START, np.where(step == last, END, MEASUREMENT)))
        tasks.append(task + first_task)
        first_task += lengths.size
    empty = np.empty(0, dtype=np.int64)
    return np.concatenate([empty, *phases]), np.concatenate([empty, *tasks])


def _traffic_columns(
    n: int, seed: int, vehicles: int, segments: int, accident_rate: float
) -> Columns:
    """Columns of the traffic stream (see :func:`traffic`), sorted by time."""
    _check_count(n)
    _check_positive(vehicles=vehicles, segments=segments)
    if not 0.0 <= accident_rate <= 1.0:
        raise ValueError(f"accident_rate must be in [0, 1], got {accident_rate!r}")
    rng = np.random.default_rng(seed)
    accidents = int(rng.binomial(n, accident_rate))
    time, vehicle, segment, speed = _position_reports(rng, n - accidents, vehicles, segments)
    horizon_s = int(time[-1]) if time.size else 0
    time = np.r_[time, rng.integers(0, horizon_s + 1, accidents)]
    segment = np.r_[segment, rng.integers(0, segments, accidents)]
    is_accident = np.r_[np.zeros(n - accidents, bool), np.ones(accidents, bool)]
    order = np.argsort(time, kind="stable")
    missing = is_accident[order]
    return _columns(
        np.where(missing, "Accident", "Position").astype(object),
        time[order],
        vehicle=np.ma.array(np.r_[vehicle, np.zeros(accidents, np.int64)][order], mask=missing),
        segment=segment[order],
        speed=np.ma.array(np.r_[speed, np.zeros(accidents, np.int64)][order], mask=missing),
    )


def _position_reports(
    rng: np.random.Generator, count: int, vehicles: int, segments: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first ``count`` reports (time, vehicle, segment, speed) in time order.

    Reports form a grid: row ``k`` holds every vehicle's ``k``-th report, at
    its own offset within ``[30k, 30k + 30)``, so rows never overlap in time.
    Speed is a reflected random walk in 0..100; a vehicle moves on at the speed
    of its previous report.
    """
    rounds = -(-count // vehicles)
    offset_s = rng.integers(0, REPORT_INTERVAL_S, vehicles)
    time = offset_s + REPORT_INTERVAL_S * np.arange(rounds)[:, None]
    walk = rng.uniform(0, SPEED_MAX, vehicles) + np.cumsum(
        rng.normal(0.0, SPEED_STEP, (rounds, vehicles)), axis=0
    )
    speed = np.rint(_reflect(walk, SPEED_MAX)).astype(np.int64)
    miles_per_report = (np.cumsum(speed, axis=0) - speed) * REPORT_INTERVAL_S / 3600
    segment = (rng.uniform(0, segments, vehicles) + miles_per_report).astype(np.int64) % segments
    vehicle = np.broadcast_to(np.arange(vehicles), time.shape)
    order = np.argsort(time.ravel(), kind="stable")[:count]
    return time.ravel()[order], vehicle.ravel()[order], segment.ravel()[order], speed.ravel()[order]


# ------------------------------------------------------------ numpy helpers


def _poisson_times_s(rng: np.random.Generator, n: int, rate: float) -> np.ndarray:
    """Strictly increasing float seconds of a Poisson process at ``rate``/s.

    Gaps are rounded to whole microseconds, at least one.
    """
    gaps_us = np.maximum(1, np.rint(rng.exponential(US_PER_S / rate, n))).astype(np.int64)
    return np.cumsum(gaps_us) / US_PER_S


def _group_order(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stable order that sorts ``groups``, and where each group starts in it."""
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    boundary = np.ones(ordered.size, dtype=bool)
    boundary[1:] = ordered[1:] != ordered[:-1]
    return order, np.flatnonzero(boundary)


def _group_cumsum(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` within each group, in input order."""
    order, starts = _group_order(groups)
    ordered = values[order]
    running = np.cumsum(ordered)
    before_group = running[starts] - ordered[starts]
    result = np.empty_like(running)
    result[order] = running - np.repeat(before_group, np.diff(np.r_[starts, values.size]))
    return result


def _reflect(x: np.ndarray, high: float) -> np.ndarray:
    """Fold ``x`` into ``[0, high]`` as if it bounced off both ends."""
    return high - np.abs(np.mod(x, 2 * high) - high)


def _columns(types: np.ndarray, time: np.ndarray, **attrs: np.ndarray) -> Columns:
    """The columns of a stream in field order: type, time, id, attributes."""
    return {"type": types, "time": time, "id": np.arange(time.size), **attrs}


# ------------------------------------------------------------ output forms


def _records(columns: Columns) -> list[Event]:
    """One dict per event; masked (missing) attributes are left out."""
    names = list(columns)
    rows = zip(*(column.tolist() for column in columns.values()))
    if not any(np.ma.isMaskedArray(column) for column in columns.values()):
        return [dict(zip(names, row)) for row in rows]
    return [{k: v for k, v in zip(names, row) if v is not None} for row in rows]


def _frame(columns: Columns) -> pd.DataFrame:
    """A DataFrame of the columns; masked integer columns become nullable Int64."""
    import pandas as pd

    data = {
        name: (
            pd.arrays.IntegerArray(column.data.astype(np.int64), np.ma.getmaskarray(column))
            if np.ma.isMaskedArray(column)
            else column
        )
        for name, column in columns.items()
    }
    return pd.DataFrame(data)


def _dump(events: Iterable[Mapping[str, Any]], out: IO[str]) -> int:
    """Write events as JSON lines to an open text stream; return the count."""
    count = 0
    for event in events:
        out.write(json.dumps(event, separators=(",", ":")))
        out.write("\n")
        count += 1
    return count


# ------------------------------------------------------------ checks


def _check_count(n: int) -> None:
    """Reject a negative or non-integer number of events."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")


def _check_positive(**values: float) -> None:
    """Reject the first argument that is not a positive number."""
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


# ------------------------------------------------------------ command line


def _param(text: str) -> tuple[str, int | float]:
    """Parse ``NAME=NUMBER`` from ``--param``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, got {text!r}")
    try:
        return name, int(value)
    except ValueError:
        pass
    try:
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number in {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Write a synthetic GRETA workload as JSON lines.")
    parser.add_argument("workload", choices=sorted(GENERATORS))
    parser.add_argument("n", type=int, help="number of events")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="NAME=NUMBER",
        help="a generator keyword, e.g. companies=20 (repeatable)",
    )
    parser.add_argument("--out", type=Path, help="output file (default: stdout)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Generate one workload and write it as JSON lines."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        events = GENERATORS[args.workload](args.n, seed=args.seed, **dict(args.param))
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    if args.out is None:
        _dump(events, sys.stdout)
    else:
        write_jsonl(events, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
