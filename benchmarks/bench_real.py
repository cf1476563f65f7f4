"""Real-data benchmark: both engines on public records turned into events, rows compared.

The generators of ``generators.py`` write every number as a float and never
tie two times; real JSON does both. Here the events come from public data
sets bundled offline by ``vega_datasets`` (a dev extra; nothing is
downloaded), with numbers written as JavaScript's ``JSON.stringify`` and
Go's ``encoding/json`` write them: a whole float as an int (39.0 -> ``39``),
any other as a float, so one attribute mixes ints and floats.

Data sets (what is real, what was derived):

- ``stocks``: ``data.stocks()``, monthly closing prices of AAPL, AMZN, GOOG,
  IBM and MSFT, 2000-01 to 2010-03 (560 quotes), as ``{"type": "Stock",
  "time": "2000-01-01", "company": "MSFT", "price": 39.81}``. Real: every
  price, date and symbol; up to five quotes share each date (ties). Derived:
  the events are the (date x symbol) grid of the file, as a table of one
  column per symbol exported to JSON gives them, so GOOG's 55 months before
  its listing (2004-08) are ``Stock`` events with ``"price": null`` (615
  events). A query that reads ``price`` dead-letters them
  (``missing_attribute``); one that does not counts them.
- ``weather``: ``data.seattle_weather()``, Seattle's daily records
  2012-2015 (1,461 days) as ``Weather`` events with ``precipitation``,
  ``temp_max``, ``temp_min``, ``wind`` and the ``weather`` string (sun, fog,
  rain, drizzle, snow), time the ISO date. All real; no ties, no nulls.
- ``temps``: ``data.seattle_temps()`` and ``data.sf_temps()``, hourly
  temperatures (F) of Seattle and San Francisco in 2010 (8,759 hours each),
  as ``Weather`` events ``{"time": <seconds>, "station": ..., "temp": ...}``;
  the files' naive local hours are read as UTC seconds. Real: every reading;
  both stations share every hour (ties). Derived: the events are the full
  hourly grid of 2010 (8,760 hours x 2 stations), and the hour
  2010-03-14 03:00 missing from both files (the night the clocks change) is
  written as ``"temp": null`` for each station (17,520 events).

For each query (``QUERIES``: Kleene with an edge predicate, two edge
predicates, ``SEQ(X A, X S+)`` with MIN/MAX/SUM/AVG/COUNT, local predicates,
GROUP-BY, NOT, a pattern across the ties), ``greta_stream.evaluate`` runs
with ``engine="general"``, ``"columnar"`` and ``"auto"`` in this process:
one untimed warm-up call each (numba loads its kernels), then ``--repeat``
timed calls whose median gives events/s (events of the data set / wall s;
the events are built once, untimed). Where the columnar engine refuses the
query or the input (``ConfigError``), its cell says ``refused`` and the
reason is printed under the table. ``rows equal`` compares the columnar
(and auto) rows with the general ones: the same list of dicts, keys in the
same order, every value of the same type and equal, except that SUM and AVG
floats may differ by 1e-9 relative; and the same number of dead letters.
A difference prints ``!!! MISMATCH`` with the first differing row, and the
exit status is 1.

``--spark`` also writes each data set as JSON-lines files (one per symbol,
station or year: a natural layout, read in one micro-batch) and runs, per
query, ``greta-stream run --query ... --input ... --output ...
--checkpoint ... --once --flush-at-end --lateness <the data's time span>``
(README, "Streaming on Spark"), timing the whole command (Spark's start,
~30 s, included), and checks that the rows of its ``part-*.jsonl`` equal
``evaluate``'s (as JSON, in any order, SUM/AVG to 1e-9).

Usage::

    python benchmarks/bench_real.py [--quick] [--repeat 3] [--spark] [--spark-budget-s 600]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib  # benchmarks/ is sys.path[0] when run as a script
from benchlib import Table

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("general", "columnar", "auto")
YEAR = "WITHIN 365 days SLIDE 30 days"


@dataclass(frozen=True)
class Query:
    """One query a user might write on one data set."""

    name: str
    data: str  # a key of DATA_SETS
    text: str
    quick: bool = False  # also run with --quick


QUERIES = [
    Query("stk-fall", "stocks", "RETURN company, COUNT(*), AVG(S.price) PATTERN Stock S+ "
          f"WHERE [company] AND S.price > NEXT(S).price GROUP-BY company {YEAR}", quick=True),
    Query("stk-gentle", "stocks", "RETURN company, COUNT(*), SUM(S.price) PATTERN Stock S+ WHERE [company] "
          f"AND S.price > NEXT(S).price AND S.price * 0.9 < NEXT(S).price GROUP-BY company {YEAR}"),
    Query("stk-seq-mm", "stocks", "RETURN company, COUNT(*), MIN(S.price), MAX(S.price) "
          f"PATTERN SEQ(Stock A, Stock S+) WHERE [company] AND S.price > NEXT(S).price GROUP-BY company {YEAR}"),
    Query("stk-seq-sum", "stocks", "RETURN company, COUNT(*), COUNT(S), SUM(S.price), AVG(S.price) "
          "PATTERN SEQ(Stock A, Stock S+) WHERE [company] AND A.price < NEXT(S).price "
          f"AND S.price > NEXT(S).price GROUP-BY company {YEAR}"),
    Query("stk-local", "stocks", "RETURN company, COUNT(*), MIN(S.price) PATTERN Stock S+ "
          f"WHERE [company] AND S.price > 100 AND S.price < NEXT(S).price GROUP-BY company {YEAR}"),
    Query("stk-not", "stocks", "RETURN company, COUNT(*), MAX(S.price) PATTERN SEQ(Stock S+, NOT Stock N) "
          f"WHERE [company] AND S.price < NEXT(S).price AND N.price < 30 GROUP-BY company {YEAR}"),
    Query("stk-ties", "stocks", "RETURN COUNT(*), MAX(S.price) PATTERN Stock S+ WHERE S.price < NEXT(S).price "
          "WITHIN 90 days SLIDE 30 days", quick=True),
    Query("stk-all", "stocks", "RETURN company, COUNT(*) PATTERN Stock S+ WHERE [company] GROUP-BY company "
          "WITHIN 180 days SLIDE 30 days"),
    Query("wx-warm", "weather", "RETURN COUNT(*), MAX(W.temp_max), AVG(W.temp_max) PATTERN Weather W+ "
          "WHERE W.temp_max < NEXT(W).temp_max WITHIN 14 days SLIDE 1 day"),
    Query("wx-wet", "weather", "RETURN weather, COUNT(*), SUM(W.precipitation) PATTERN Weather W+ "
          "WHERE [weather] AND W.precipitation <= NEXT(W).precipitation GROUP-BY weather "
          "WITHIN 30 days SLIDE 7 days", quick=True),
    Query("wx-storm", "weather", "RETURN COUNT(*), MIN(R.temp_min), MAX(R.wind) "
          "PATTERN SEQ(Weather C, Weather R+) WHERE C.weather = 'sun' AND R.precipitation > 5 "
          "AND R.wind < NEXT(R).wind WITHIN 30 days SLIDE 10 days"),
    Query("wx-no-snow", "weather", "RETURN COUNT(*), AVG(R.temp_min) PATTERN SEQ(NOT Weather S, Weather R+) "
          "WHERE S.weather = 'snow' AND R.temp_min < NEXT(R).temp_min WITHIN 28 days SLIDE 7 days"),
    Query("tmp-rise", "temps", "RETURN station, COUNT(*), MAX(T.temp), AVG(T.temp) PATTERN Weather T+ "
          "WHERE [station] AND T.temp < NEXT(T).temp GROUP-BY station WITHIN 12 hours SLIDE 1 hour", quick=True),
    Query("tmp-gentle", "temps", "RETURN station, COUNT(*), SUM(T.temp) PATTERN Weather T+ WHERE [station] "
          "AND T.temp < NEXT(T).temp AND T.temp + 2 > NEXT(T).temp GROUP-BY station WITHIN 12 hours SLIDE 1 hour"),
    Query("tmp-count", "temps", "RETURN station, COUNT(*), COUNT(T) PATTERN Weather T+ WHERE [station] "
          "AND T.temp > NEXT(T).temp GROUP-BY station WITHIN 12 hours SLIDE 1 hour", quick=True),
    Query("tmp-dip", "temps", "RETURN station, COUNT(*), MIN(T.temp), SUM(T.temp) PATTERN SEQ(Weather A, Weather T+) "
          "WHERE [station] AND A.temp > NEXT(T).temp AND T.temp < NEXT(T).temp GROUP-BY station "
          "WITHIN 6 hours SLIDE 1 hour"),
    Query("tmp-ties", "temps", "RETURN COUNT(*), MIN(T.temp) PATTERN Weather T+ WHERE T.temp > NEXT(T).temp "
          "WITHIN 4 hours SLIDE 1 hour"),
]


# ------------------------------------------------------------ events


def json_number(value: Any) -> int | float | None:
    """A number as JS/Go JSON encoders write it: a whole float as an int; NaN as null."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    number = float(value)
    return int(number) if number.is_integer() else number


def stock_events() -> list[dict[str, Any]]:
    """``Stock`` events of the (date x symbol) grid; no quote (GOOG before 2004-08) -> price null."""
    from vega_datasets import data

    wide = data.stocks().pivot(index="date", columns="symbol", values="price").sort_index()
    return [{"type": "Stock", "time": date.strftime("%Y-%m-%d"), "company": symbol, "price": json_number(price)}
            for date, prices in wide.iterrows() for symbol, price in prices.items()]


def weather_events() -> list[dict[str, Any]]:
    """Seattle's daily ``Weather`` records 2012-2015, every field real."""
    from vega_datasets import data

    fields = ("precipitation", "temp_max", "temp_min", "wind")
    return [{"type": "Weather", "time": row.date.strftime("%Y-%m-%d"),
             **{f: json_number(getattr(row, f)) for f in fields}, "weather": row.weather}
            for row in data.seattle_weather().itertuples()]


def temp_events() -> list[dict[str, Any]]:
    """Hourly ``Weather`` readings of two stations on 2010's full hourly grid; a missing hour -> temp null."""
    import pandas as pd
    from vega_datasets import data

    grid = pd.date_range("2010-01-01", "2010-12-31 23:00", freq="h")
    stations = {"Seattle": data.seattle_temps(), "San Francisco": data.sf_temps()}
    temps = {name: frame.set_index("date")["temp"].reindex(grid) for name, frame in stations.items()}
    return [{"type": "Weather", "time": int(hour.timestamp()), "station": name, "temp": json_number(temps[name][hour])}
            for hour in grid for name in stations]


DATA_SETS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "stocks": stock_events, "weather": weather_events, "temps": temp_events}
QUICK_EVENTS = {"stocks": None, "weather": 400, "temps": 600}  # --quick: the first n events (None: all)
FILE_KEY = {"stocks": "company", "weather": "time", "temps": "station"}  # --spark: one file per value (year)


def load_data(quick: bool) -> dict[str, list[dict[str, Any]]]:
    sets = {name: build() for name, build in DATA_SETS.items()}
    return {name: events[:QUICK_EVENTS[name]] if quick else events for name, events in sets.items()}


def describe(name: str, events: list[dict[str, Any]]) -> str:
    """events, ties (events sharing a time with another), nulls, ints and floats among numbers."""
    times: dict[Any, int] = {}
    for event in events:
        times[event["time"]] = times.get(event["time"], 0) + 1
    values = [v for e in events for k, v in e.items() if k not in ("type", "time")]
    ints = sum(isinstance(v, int) and not isinstance(v, bool) for v in values)
    floats = sum(isinstance(v, float) for v in values)
    tied = sum(n for n in times.values() if n > 1)
    return (f"{name:<8} {len(events):>6,} events, {len(times):,} times ({tied:,} events share theirs with another), "
            f"{sum(v is None for v in values)} nulls, numbers {ints:,} ints + {floats:,} floats; "
            f"{events[0]['time']} .. {events[-1]['time']}")


# ------------------------------------------------------------ rows


def tolerant_columns(text: str) -> set[str]:
    """Result columns of the query's SUM and AVG: floats there may differ by 1e-9 relative."""
    from greta_stream.query import parse
    from greta_stream.query.ast import Aggregate

    return {item.column for item in parse(text).returns
            if isinstance(item, Aggregate) and item.func.upper() in ("SUM", "AVG")}


def same_value(want: Any, have: Any, tolerant: bool) -> bool:
    """Equal and of the same type; a SUM/AVG float within 1e-9 relative."""
    if tolerant and isinstance(want, float) and isinstance(have, float):
        return math.isclose(have, want, rel_tol=1e-9, abs_tol=1e-12)
    return type(want) is type(have) and want == have


def first_difference(want: list[dict[str, Any]], have: list[dict[str, Any]], tolerant: set[str]) -> str | None:
    """None if the lists of rows agree, else the first difference."""
    if len(want) != len(have):
        return f"{len(have)} rows vs {len(want)} general rows"
    for index, (w, h) in enumerate(zip(want, have, strict=True)):
        if list(w) != list(h) or not all(same_value(w[k], h[k], k in tolerant) for k in w):
            return f"row {index}: {h!r} vs general {w!r}"
    return None


# ------------------------------------------------------------ evaluate


@dataclass
class Run:
    """One engine on one query: median wall seconds of the timed calls, the rows of the last."""

    wall_s: float = math.nan
    rows: list[dict[str, Any]] | None = None
    ran: str = ""  # rows.engine
    dead: int = 0
    refusal: str = ""


def run_engine(text: str, events: list[dict[str, Any]], engine: str, repeat: int) -> Run:
    """One untimed warm-up call, then ``repeat`` timed ones; a ConfigError (columnar refusal) -> refusal."""
    import greta_stream
    from greta_stream.errors import ConfigError

    walls: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # rows.problems: not this benchmark's business
        try:
            greta_stream.evaluate(text, events, engine=engine)
        except ConfigError as exc:
            return Run(refusal=refusal_reason(str(exc)))
        for _ in range(repeat):
            start = time.perf_counter()
            rows = greta_stream.evaluate(text, events, engine=engine)
            walls.append(time.perf_counter() - start)
    return Run(statistics.median(walls), list(rows), rows.engine, len(rows.dead_letters))


def refusal_reason(message: str) -> str:
    """'input: ...' or 'query: ...' from the columnar engine's ConfigError."""
    for prefix, short in (("the columnar engine cannot take this input: ", "input: "),
                          ("the columnar engine does not cover this query: ", "query: ")):
        if message.startswith(prefix):
            return short + message.removeprefix(prefix)
    return message


def verdict(query: Query, runs: dict[str, Run]) -> tuple[str, list[str]]:
    """The 'rows equal' cell and the differences behind a 'no'."""
    general, tolerant = runs["general"], tolerant_columns(query.text)
    differences = []
    for engine in ("columnar", "auto"):
        run = runs[engine]
        if run.rows is None:
            continue
        difference = first_difference(general.rows or [], run.rows, tolerant)
        if difference is None and run.dead != general.dead:
            difference = f"{run.dead} dead letters vs {general.dead} general"
        if difference:
            differences.append(f"{query.name}: engine={engine} ({run.ran}) vs general: {difference}")
    if differences:
        return "no", differences
    refusal = runs["columnar"].refusal
    return (f"refused: {refusal}" if refusal else "yes"), []


def rate(events: int, run: Run) -> str:
    return "refused" if run.refusal else f"{events / run.wall_s:,.0f}"


EVAL_TABLE = Table([("query", 12), ("data", 7), ("events", 7), ("rows", 6), ("dead", 4), ("auto ran", 8),
                    ("general ev/s", 12), ("columnar ev/s", 13), ("rows equal", 10)])


def evaluate_table(queries: list[Query], data: dict[str, list[dict[str, Any]]], repeat: int) -> list[str]:
    """Table 1; returns the mismatches."""
    print(f"\n## evaluate: general, columnar and auto (median of {repeat} timed calls after a warm-up)\n", flush=True)
    EVAL_TABLE.header()
    mismatches: list[str] = []
    for query in queries:
        events = data[query.data]
        runs = {engine: run_engine(query.text, events, engine, repeat) for engine in ENGINES}
        cell, differences = verdict(query, runs)
        general = runs["general"]
        EVAL_TABLE.row([query.name, query.data, f"{len(events):,}", f"{len(general.rows or []):,}", str(general.dead),
                        runs["auto"].ran, rate(len(events), general), rate(len(events), runs["columnar"]), cell])
        for difference in differences:
            print(f"      {difference}", flush=True)
        mismatches += differences
    return mismatches


# ------------------------------------------------------------ --spark


def seconds_of(time_value: Any) -> float:
    """Event time in seconds: a number as is, an ISO date or timestamp as UTC."""
    from datetime import UTC, datetime

    if isinstance(time_value, (int, float)):
        return float(time_value)
    stamp = datetime.fromisoformat(time_value)
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def write_input(folder: Path, name: str, events: list[dict[str, Any]]) -> int:
    """JSON-lines files, one per symbol, station or year (mtimes in file order); the lateness covering them."""
    from greta_stream.connectors.jsonl import dumps

    key = FILE_KEY[name]
    files: dict[str, list[str]] = {}
    for event in events:
        part = str(event[key])[:4] if key == "time" else str(event[key]).replace(" ", "_")
        files.setdefault(part, []).append(dumps(event))
    folder.mkdir(parents=True)
    base = time.time() - 3600
    for index, (part, lines) in enumerate(files.items()):
        path = folder / f"{name}-{part}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.utime(path, (base + index, base + index))
    times = [seconds_of(event["time"]) for event in events]
    return math.ceil(max(times) - min(times)) + 1


def streamed_rows(output: Path) -> list[dict[str, Any]]:
    from greta_stream.connectors.jsonl import loads

    return [loads(line) for f in sorted(output.glob("part-*.jsonl"))
            for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


def as_json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``evaluate``'s rows as the stream writes them (times as ISO text), sorted by window and group."""
    from greta_stream.connectors.jsonl import dumps, loads

    return sorted((loads(dumps(row)) for row in rows), key=row_key)


def row_key(row: dict[str, Any]) -> str:
    from greta_stream.connectors.jsonl import dumps

    return dumps({k: v for k, v in row.items() if not isinstance(v, (int, float)) or k.startswith("window_")})


def spark_run(query: Query, folder: Path, lateness_s: int, work: Path, budget_s: float) -> dict[str, Any]:
    """``greta-stream run --once --flush-at-end`` of one query: wall seconds and its rows, or the error."""
    out, chk = work / f"out-{query.name}", work / f"chk-{query.name}"
    command = [sys.executable, "-m", "greta_stream", "run", "--query", query.text, "--input", str(folder),
               "--output", str(out), "--checkpoint", str(chk), "--once", "--flush-at-end",
               "--lateness", str(lateness_s)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=budget_s, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"> {budget_s:g} s"}
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": failure(query, done), "wall_s": wall_s}
    return {"wall_s": wall_s, "rows": sorted(streamed_rows(out), key=row_key)}


def failure(query: Query, done: subprocess.CompletedProcess[str]) -> str:
    """The exit status, the first line naming an error, and where the whole stderr was kept."""
    fd, kept = tempfile.mkstemp(prefix=f"bench_real_{query.name}_", suffix=".stderr")
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(done.stderr)
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line or "Exception" in line or line.startswith("error")]
    return f"exit {done.returncode}: {(named or lines or ['no output'])[0][:300]} (stderr in {kept})"


SPARK_TABLE = Table([("query", 12), ("data", 7), ("events", 7), ("rows", 6), ("wall s", 7), ("events/s", 8),
                     ("rows equal", 10)])


def spark_table(queries: list[Query], data: dict[str, list[dict[str, Any]]], budget_s: float) -> list[str]:
    """Table 2: one ``greta-stream run`` per query against ``evaluate``; returns the mismatches."""
    import greta_stream

    mismatches: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench_real_") as tmp:
        work = Path(tmp)
        inputs = {name: (work / f"in-{name}", write_input(work / f"in-{name}", name, events))
                  for name, events in data.items() if any(q.data == name for q in queries)}
        print("\n## greta-stream run --once --flush-at-end on local Spark, one command per query "
              "(wall s: the whole command, Spark's start included)", flush=True)
        for name, (folder, lateness_s) in inputs.items():
            print(f"   {name}: {len(list(folder.iterdir()))} files, --lateness {lateness_s}", flush=True)
        print(flush=True)
        SPARK_TABLE.header()
        for query in queries:
            events = data[query.data]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                want = as_json_rows(list(greta_stream.evaluate(query.text, events)))
            folder, lateness_s = inputs[query.data]
            got = spark_run(query, folder, lateness_s, work, budget_s)
            lead = [query.name, query.data, f"{len(events):,}"]
            if "error" in got:
                SPARK_TABLE.row([*lead, "-", benchlib.seconds(got.get("wall_s", math.nan)), "-", "error"])
                print(f"      {got['error']}", flush=True)
                mismatches.append(f"{query.name}: greta-stream run failed: {got['error']}")
                continue
            difference = first_difference(want, got["rows"], tolerant_columns(query.text))
            SPARK_TABLE.row([*lead, f"{len(got['rows']):,}", benchlib.seconds(got["wall_s"]),
                             f"{len(events) / got['wall_s']:,.0f}", "no" if difference else "yes"])
            if difference:
                print(f"      {difference}", flush=True)
                mismatches.append(f"{query.name}: greta-stream run vs evaluate: {difference}")
    return mismatches


# ------------------------------------------------------------ header, arguments, main


def print_header(args: argparse.Namespace, command: str, data: dict[str, list[dict[str, Any]]]) -> None:
    import numba
    import vega_datasets

    import greta_stream

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print("# greta-stream real-data benchmark: general vs columnar engine on public records" + " (--quick)" * args.quick)
    print(f"command : {command}")
    print(f"machine : {benchlib.cpu_model()}, {os.cpu_count()} cores ({usable} usable), {benchlib.memory_gib()} GiB "
          f"RAM, load average {load}, {platform.platform()}")
    print(f"python  : {platform.python_version()} ({sys.executable}); numba {numba.__version__}; "
          f"vega_datasets {vega_datasets.__version__}")
    print(f"code    : greta_stream {greta_stream.__version__} imported from {Path(greta_stream.__file__).parent}; "
          f"git of {ROOT}: {benchlib.git_state()}")
    for name, events in data.items():
        print(f"data    : {describe(name, events)}")
    print("measure : in this process, one after another; events built once, untimed; per engine one warm-up call, "
          f"then the median of {args.repeat}; events/s = events of the data set / wall s", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: the queries marked quick, on the first 400 weather and 600 temps events")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per engine and query (median shown)")
    parser.add_argument("--spark", action="store_true", help="also run each query with greta-stream run on Spark")
    parser.add_argument("--spark-budget-s", type=float, default=600.0, help="seconds one greta-stream run may take")
    parser.add_argument("--queries", help="comma-separated query names (default: all, or the quick ones)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    names = {q.name for q in QUERIES}
    wanted = args.queries.split(",") if args.queries else None
    if wanted and not set(wanted) <= names:
        parser.error(f"--queries: unknown {sorted(set(wanted) - names)}; known: {', '.join(q.name for q in QUERIES)}")
    args.selected = [q for q in QUERIES if (q.name in wanted if wanted else q.quick or not args.quick)]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, *sys.argv])
    data = load_data(args.quick)
    print_header(args, command, data)
    print("\nqueries:")
    for query in args.selected:
        print(f"  {query.name:<11} {query.text}")
    started = time.perf_counter()
    mismatches = evaluate_table(args.selected, data, args.repeat)
    if args.spark:
        mismatches += spark_table(args.selected, data, args.spark_budget_s)
    print(f"\ntotal {time.perf_counter() - started:,.0f} s", flush=True)
    for mismatch in mismatches:
        banner = f"!!! MISMATCH: {mismatch}"
        print(banner, flush=True)
        print(banner, file=sys.stderr, flush=True)
    return 1 if mismatches else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
