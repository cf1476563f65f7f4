"""Columnar engine benchmark: ``greta_stream.evaluate(..., engine="columnar")``.

Six tables, after a header naming the machine, the Python, the code version
and the exact command line, so that every number can be rebuilt:

1. **Q1 throughput.** ``configs/q1_stock.greta`` (10-minute windows sliding
   every 10 s, GROUP-BY sector) at 10k and 100k events per window (stock
   rates 16.7 and 167 events/s) on 100k, 300k and 1M events: the columnar
   engine on a DataFrame (``stock_frame``); the columnar engine on a list of
   dicts (``stock``) at the largest size and 100k per window; the general
   engine on dicts at the smallest size and 10k per window.
2. **Selectivity.** Q1 with its edge predicate replaced by the paper's
   variation ``S.price * X < NEXT(S).price``, X in 1, 1.05, 1.1, 1.15, 1.2,
   300k events at 10k per window, columnar.
3. **Groups.** The predicate-free Kleene query ``RETURN company, COUNT(*)
   PATTERN Stock S+ WHERE [company] GROUP-BY company WITHIN 10 minutes SLIDE
   10 seconds`` on 10 companies (10 groups), 10k and 50k events, columnar and
   general, next to the times reported for the GRETA authors' Java prototype.
4. **Events per window, one partition.** Q1 on one company in one sector at
   2k to 32k events per window (by rate), streams two windows long; time per
   event and the log-log slope of time vs events per window (least squares).
5. **Q2 throughput (SEQ).** ``configs/q2_cluster.greta`` (``SEQ(Start S,
   Measurement M+, End E)``, 1-minute windows sliding every 30 s) on
   ``cluster`` data (10 mappers, 10 jobs) as table 1: 10k and 100k events
   per window, columnar on a DataFrame and dicts, general on dicts.
6. **Q3 throughput (leading NOT).** ``configs/q3_traffic.greta``
   (``SEQ(NOT Accident A, Position P+)``, 5-minute windows sliding every
   minute) on ``traffic`` data, the same way (vehicles set the events per
   window).

Every measurement runs in a fresh child process (this script with the hidden
``--one`` flag), one after another, so its peak RSS (``ru_maxrss``) is its
own and runs do not compete for the cores. The child generates the events,
warms the engine up with one call on 1000 events of the same kind (the
columnar engine's numba kernels load from their on-disk cache, or compile, on
the first call), runs ``gc.collect()``, reports its RSS and says "ready"; only
then does the parent start the clock of the time budget, and the child times
the one ``evaluate`` call. A child past its time budget is killed and shown
as ``> budget``; one whose RSS passes ``--mem-limit-mb`` (checked every
0.1 s) is killed and shown as ``> memory``. Larger sizes of the same series
are then ``skipped``.

Where both engines ran on the same events (table 1: the general engine's
size; table 3: both sizes; tables 5 and 6 as table 1) their rows are compared (same windows, groups and
columns in the same order; integers exact, floats within a relative 1e-9);
a mismatch is printed loudly and the exit status is 1.

Usage::

    python benchmarks/bench_columnar.py [--budget-s 120] [--mem-limit-mb MIB] [--seed 0]
        [--repeat 3] [--json out.json] [--quick]

``--quick`` runs smaller sizes (about a minute). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchlib  # noqa: E402 - benchmarks/ is sys.path[0] when run as a script

# shared with the other benchmark scripts (benchlib.py)
_load_generators = benchlib.load_generators
_peak_rss_bytes = benchlib.peak_rss_bytes
_current_rss_bytes = benchlib.current_rss_bytes
_count_column = benchlib.count_column
_cpu_model = benchlib.cpu_model
_memory_gib = benchlib.memory_gib
_seconds = benchlib.seconds
_stop = benchlib.stop
_same_value = benchlib.same_value
Table = benchlib.Table
Outcome = benchlib.Outcome

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

WINDOW_S = 600  # WITHIN 10 minutes of every query here
Q1_PREDICATE = "S.price > NEXT(S).price"
SELECT_PREDICATE = "S.price * {x} < NEXT(S).price"
SELECT_XS = ("1", "1.05", "1.1", "1.15", "1.2")
GROUPS_QUERY = (
    "RETURN company, COUNT(*) PATTERN Stock S+ WHERE [company] "
    "GROUP-BY company WITHIN 10 minutes SLIDE 10 seconds"
)
# Seconds reported for the GRETA authors' Java prototype on a predicate-free
# Kleene query in 10 groups (not measured here: other machine, other data).
JAVA_REFERENCE_S = {10_000: "~3", 50_000: "~100"}
WARMUP_EVENTS = 1000
WATCH_S = 0.1  # how often the parent checks a running child's RSS
MEMORY = {"limit_bytes": 2**62}  # set from --mem-limit-mb in main()


def q1_text(predicate: str = Q1_PREDICATE) -> str:
    """``configs/q1_stock.greta``, with its edge predicate replaced by ``predicate``."""
    text = (ROOT / "configs" / "q1_stock.greta").read_text(encoding="utf-8")
    variant, found = re.subn(re.escape(Q1_PREDICATE), predicate, text)
    if found != 1:
        raise ValueError(f"q1_stock.greta: expected one '{Q1_PREDICATE}', found {found}")
    return variant


def rate_for(per_window: int, window_s: float = WINDOW_S) -> float:
    """Generator rate (events/s) giving ``per_window`` events per window of ``window_s``."""
    return per_window / window_s


@dataclass(frozen=True)
class Workload:
    """A throughput table's query and data: generator name (``<name>`` and ``<name>_frame``), fixed parameters."""

    number: str
    title: str
    text: str
    generator: str
    params: dict[str, Any]
    window_s: float
    per_vehicle_window: int = 0  # traffic: events per window are set by the vehicles, not a rate

    def sized(self, per_window: int) -> dict[str, Any]:
        """Generator parameters for about ``per_window`` events per window."""
        if self.per_vehicle_window:
            return {**self.params, "vehicles": per_window // self.per_vehicle_window}
        return {**self.params, "rate": round(rate_for(per_window, self.window_s), 3)}


def q1_workload() -> Workload:
    return Workload("1", "Q1 throughput: configs/q1_stock.greta (10 min windows, slide 10 s, GROUP-BY sector), "
                    "stock(companies=100, sectors=10)", q1_text(), "stock", {}, WINDOW_S)


def q2_workload() -> Workload:
    text = (ROOT / "configs" / "q2_cluster.greta").read_text(encoding="utf-8")
    return Workload("5", "Q2 throughput (SEQ): configs/q2_cluster.greta (1 min windows, slide 30 s, GROUP-BY mapper), "
                    "cluster(mappers=10, jobs=10)", text, "cluster", {}, 60.0)


def q3_workload() -> Workload:
    text = (ROOT / "configs" / "q3_traffic.greta").read_text(encoding="utf-8")
    return Workload("6", "Q3 throughput (leading NOT): configs/q3_traffic.greta (5 min windows, slide 1 min, "
                    "GROUP-BY segment), traffic(segments=20, a report per vehicle every 30 s: vehicles = "
                    "events per window / 10)", text, "traffic", {}, 300.0, per_vehicle_window=10)


# ------------------------------------------------------------ child process


def run_one(spec: dict[str, Any], result_file: Path) -> None:
    """Child: generate, warm up, say "ready", time one `evaluate` call, write the result."""
    import greta_stream

    generators = _load_generators()
    name = spec.get("generator", "stock")
    make = getattr(generators, f"{name}_frame" if spec["input"] == "frame" else name)
    text, engine, params = spec["query"], spec["engine"], spec["params"]
    warmup = make(WARMUP_EVENTS, seed=spec["seed"] + 1, **params)
    greta_stream.evaluate(text, warmup, engine=engine)
    del warmup
    events = make(spec["n"], seed=spec["seed"], **params)
    count_column = _count_column(text)
    gc.collect()
    rss_after_gen = _current_rss_bytes()
    print("ready", flush=True)
    cpu_start = time.process_time()
    start = time.perf_counter()
    rows = greta_stream.evaluate(text, events, engine=engine)
    wall_s = time.perf_counter() - start
    cpu_s = time.process_time() - cpu_start
    counts = [row[count_column] for row in rows]
    result = {
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "rows": len(rows),
        "engine_ran": rows.engine,
        "dead_letters": len(rows.dead_letters),
        "peak_rss_bytes": _peak_rss_bytes(),
        "rss_after_gen_bytes": rss_after_gen,
        "max_count_digits": len(str(max(counts))) if counts else 0,
    }
    if spec.get("keep_rows"):
        result["result_rows"] = [dict(row) for row in rows]
    result_file.write_text(json.dumps(result), encoding="utf-8")


# ------------------------------------------------------------ parent: measurements


def spec_of(
    query: str, engine: str, source: str, n: int, seed: int, keep_rows: bool = False, generator: str = "stock",
    **params: Any,
) -> dict[str, Any]:
    """What a child measures: query text, engine, input kind, size, generator and its parameters."""
    return {
        "generator": generator,
        "query": query,
        "engine": engine,
        "input": source,
        "n": n,
        "seed": seed,
        "params": params,
        "keep_rows": keep_rows,
    }


def measure(spec: dict[str, Any], budget_s: float) -> Outcome:
    """Run one measurement in a fresh child; kill it ``budget_s`` after it is ready,
    or as soon as its RSS passes ``MEMORY["limit_bytes"]``."""
    with tempfile.TemporaryDirectory(prefix="bench_columnar_") as tmp:
        result_file, err_file = Path(tmp) / "result.json", Path(tmp) / "stderr.txt"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--one",
            json.dumps(spec),
            "--result-file",
            str(result_file),
        ]
        with open(err_file, "w", encoding="utf-8") as err:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                if proc.stdout.readline().strip() == "ready":
                    status = _watch(proc, budget_s)
                    if status:
                        return Outcome(status)
                proc.wait()
            finally:
                _stop(proc)
        if proc.returncode != 0 or not result_file.exists():
            tail = err_file.read_text(encoding="utf-8").strip().splitlines()[-1:] or ["no output"]
            return Outcome("error", message=f"exit {proc.returncode}: {tail[0]}")
        return Outcome("ok", json.loads(result_file.read_text(encoding="utf-8")))


def _watch(proc: subprocess.Popen, budget_s: float) -> str | None:
    """Wait for the child; "budget" or "memory" if it had to be killed, else None."""
    deadline = time.perf_counter() + budget_s
    while True:
        try:
            proc.wait(timeout=min(WATCH_S, max(deadline - time.perf_counter(), 0.0)))
            return None
        except subprocess.TimeoutExpired:
            pass
        if _rss_of(proc.pid) > MEMORY["limit_bytes"]:
            return "memory"
        if time.perf_counter() >= deadline:
            return "budget"


def _rss_of(pid: int) -> int:
    """Current RSS of process ``pid`` in bytes (Linux /proc; 0 where unknown)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def measure_median(spec: dict[str, Any], budget_s: float, repeat: int) -> Outcome:
    """``repeat`` fresh children; wall, CPU seconds and peak RSS are their medians."""
    runs = []
    for _ in range(repeat):
        outcome = measure(spec, budget_s)
        if outcome.status != "ok":
            return outcome
        runs.append(outcome.data)
    merged = dict(runs[0])
    for key in ("wall_s", "cpu_s", "peak_rss_bytes", "rss_after_gen_bytes"):
        merged[key] = statistics.median(run[key] for run in runs)
    merged["wall_s_runs"] = [run["wall_s"] for run in runs]
    return Outcome("ok", merged)


# ------------------------------------------------------------ comparing rows


def same_rows(columnar: list[dict], general: list[dict]) -> str | None:
    """None if the rows agree (ints exact, floats to 1e-9 relative), else the first difference."""
    if len(columnar) != len(general):
        return f"{len(columnar)} columnar rows vs {len(general)} general rows"
    for index, (want, have) in enumerate(zip(general, columnar, strict=True)):
        if list(want) != list(have) or not all(_same_value(want[k], have[k]) for k in want):
            return f"row {index}: columnar {have!r} vs general {want!r}"
    return None


def check(columnar: Outcome, general: Outcome) -> tuple[str, str | None]:
    """("equal" | "MISMATCH" | "n/a", difference) for the two engines' rows."""
    if columnar.status != "ok" or general.status != "ok":
        return "n/a", None
    difference = same_rows(columnar.data["result_rows"], general.data["result_rows"])
    return ("equal", None) if difference is None else ("MISMATCH", difference)


# ------------------------------------------------------------ formatting


MEASURE_COLUMNS = [
    ("events/s", 10),
    ("wall s", 8),
    ("CPU s", 8),
    ("peak RSS MB", 11),
    ("Δ RSS MB", 8),
    ("rows", 7),
    ("count digits", 12),
]


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:,.0f}"


def measure_cells(n: int, outcome: Outcome, budget_s: float) -> list[str]:
    """The MEASURE_COLUMNS cells of one measurement."""
    if outcome.status != "ok":
        first = {"budget": "> budget", "memory": "> memory", "skipped": "skipped"}.get(outcome.status, "error")
        wall = f"> {budget_s:g}" if outcome.status == "budget" else "-"
        rss = f"> {_mb(MEMORY['limit_bytes'])}" if outcome.status == "memory" else "-"
        return [first, wall, "-", rss] + ["-"] * (len(MEASURE_COLUMNS) - 4)
    d = outcome.data
    return [
        f"{n / d['wall_s']:,.0f}",
        _seconds(d["wall_s"]),
        _seconds(d["cpu_s"]),
        _mb(d["peak_rss_bytes"]),
        _mb(d["peak_rss_bytes"] - d["rss_after_gen_bytes"]),
        f"{d['rows']:,}",
        str(d["max_count_digits"]),
    ]


def _k(n: int) -> str:
    """10000 -> "10k", 1000000 -> "1M"."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


def _record(table: str, outcome: Outcome, **labels: Any) -> dict[str, Any]:
    """The JSON record of one measurement (result rows left out)."""
    data = {k: v for k, v in outcome.data.items() if k != "result_rows"}
    return {"table": table, **labels, "status": outcome.status, **data, "message": outcome.message}


def _note(outcome: Outcome) -> None:
    if outcome.message:
        print(f"      {outcome.message}", flush=True)


# ------------------------------------------------------------ table 1: Q1 throughput


def throughput_table(cfg: Config, report: Report, work: Workload) -> None:
    text = work.text
    print(f"\n## {work.number}. {work.title}; budget {cfg.budget_s:g} s\n", flush=True)
    table = Table([("engine", 8), ("input", 6), ("ev/window", 9), ("rate/s", 6), ("events", 9), *MEASURE_COLUMNS])
    table.header()
    kept: dict[tuple[int, int], Outcome] = {}
    general_n, general_w = cfg.sizes[0], cfg.per_window[0]
    dicts_n, dicts_w = cfg.sizes[-1], cfg.per_window[-1]

    def run(engine: str, source: str, per_window: int, n: int, skip: bool = False) -> Outcome:
        keep = engine == "general" or (n, per_window) == (general_n, general_w)
        spec = spec_of(text, engine, source, n, cfg.seed, keep, work.generator, **work.sized(per_window))
        outcome = Outcome("skipped") if skip else measure(spec, cfg.budget_s)
        lead = [engine, source, _k(per_window), f"{rate_for(per_window, work.window_s):.5g}", f"{n:,}"]
        table.row(lead + measure_cells(n, outcome, cfg.budget_s))
        _note(outcome)
        report.add(_record(f"throughput {work.generator}", outcome, engine=engine, input=source,
                           per_window=per_window, events=n))
        return outcome

    for per_window in cfg.per_window:
        failed = False
        for n in cfg.sizes:
            outcome = run("columnar", "frame", per_window, n, skip=failed)
            failed = failed or outcome.status != "ok"
            kept[(n, per_window)] = outcome
    run("columnar", "dicts", dicts_w, dicts_n)
    general = run("general", "dicts", general_w, general_n)
    columnar = kept[(general_n, general_w)]
    verdict, difference = check(columnar, general)
    print(f"\ncolumnar vs general rows at {general_n:,} events, {_k(general_w)} per window: {verdict}", flush=True)
    report.compare(f"table {work.number}, {general_n:,} events, {_k(general_w)} per window", verdict, difference)
    if columnar.status == "ok" and general.status == "ok":
        speedup = general.data["wall_s"] / columnar.data["wall_s"]
        print(f"speedup columnar (DataFrame) over general (dicts): {speedup:,.0f}x", flush=True)


# ------------------------------------------------------------ table 2: selectivity


def selectivity_table(cfg: Config, report: Report) -> None:
    n, per_window = cfg.select_size, cfg.per_window[0]
    rate = round(rate_for(per_window), 3)
    print(
        f"\n## 2. selectivity: Q1 with WHERE [company, sector] AND {SELECT_PREDICATE.format(x='X')}, "
        f"{n:,} events, {_k(per_window)} per window (rate {rate:g}/s), columnar, DataFrame\n",
        flush=True,
    )
    table = Table([("X", 5), *MEASURE_COLUMNS])
    table.header()
    for x in SELECT_XS:
        spec = spec_of(q1_text(SELECT_PREDICATE.format(x=x)), "columnar", "frame", n, cfg.seed, rate=rate)
        outcome = measure(spec, cfg.budget_s)
        table.row([x, *measure_cells(n, outcome, cfg.budget_s)])
        _note(outcome)
        report.add(_record("selectivity", outcome, x=x, per_window=per_window, events=n))


# ------------------------------------------------------------ table 3: groups


def groups_table(cfg: Config, report: Report) -> None:
    print(
        f"\n## 3. groups: {GROUPS_QUERY}\n"
        f"   stock(companies=10, sectors=10, rate=10): 10 groups, ~6k events per window; "
        f"columnar on a DataFrame, general on dicts\n"
        f"   Java s: reported for the GRETA authors' Java prototype on a predicate-free Kleene query "
        f"in 10 groups (not measured here)\n",
        flush=True,
    )
    table = Table([("events", 7), ("engine", 8), *MEASURE_COLUMNS, ("Java s", 6), ("check", 8)])
    table.header()
    for n in cfg.group_sizes:
        out = {}
        for engine, source in (("columnar", "frame"), ("general", "dicts")):
            spec = spec_of(GROUPS_QUERY, engine, source, n, cfg.seed, True, companies=10, sectors=10)
            out[engine] = measure(spec, cfg.budget_s)
        verdict, difference = check(out["columnar"], out["general"])
        for engine in out:
            last = verdict if engine == "general" else ""
            cells = measure_cells(n, out[engine], cfg.budget_s)
            table.row([f"{_k(n)}", engine, *cells, JAVA_REFERENCE_S.get(n, "-"), last])
            _note(out[engine])
            report.add(_record("groups", out[engine], engine=engine, events=n))
        report.compare(f"table 3, {n:,} events", verdict, difference)


# ------------------------------------------------------------ table 4: events per window


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(events per window)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def scaling_table(cfg: Config, report: Report) -> None:
    print(
        f"\n## 4. events per window, one partition: configs/q1_stock.greta on stock(companies=1, sectors=1), "
        f"streams 2 windows long, columnar, DataFrame; median of {cfg.repeat}\n",
        flush=True,
    )
    table = Table([("ev/window", 9), ("rate/s", 6), ("events", 7), ("µs/event", 8), *MEASURE_COLUMNS])
    table.header()
    text, points, failed = q1_text(), [], False
    for per_window in cfg.scaling:
        n, rate = 2 * per_window, round(rate_for(per_window), 3)
        spec = spec_of(text, "columnar", "frame", n, cfg.seed, companies=1, sectors=1, rate=rate)
        outcome = Outcome("skipped") if failed else measure_median(spec, cfg.budget_s, cfg.repeat)
        failed = failed or outcome.status != "ok"
        per_event = f"{outcome.data['wall_s'] / n * 1e6:.2f}" if outcome.status == "ok" else "-"
        table.row([_k(per_window), f"{rate:g}", f"{n:,}", per_event, *measure_cells(n, outcome, cfg.budget_s)])
        _note(outcome)
        report.add(_record("scaling", outcome, per_window=per_window, events=n))
        if outcome.status == "ok":
            points.append((per_window, outcome.data["wall_s"]))
    if len(points) >= 2:
        print(f"\nlog-log slope of time vs events per window: {slope(points):.2f}", flush=True)


# ------------------------------------------------------------ header, configuration, main


@dataclass
class Config:
    """What the tables run: sizes, budget, seed, repeats."""

    budget_s: float
    seed: int
    repeat: int
    mem_limit_mb: float
    per_window: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    sizes: tuple[int, ...] = (100_000, 300_000, 1_000_000)
    select_size: int = 300_000
    group_sizes: tuple[int, ...] = (10_000, 50_000)
    scaling: tuple[int, ...] = (2000, 4000, 8000, 16000, 32000)


QUICK = {
    "per_window": (10_000, 100_000),
    "sizes": (20_000, 100_000),
    "select_size": 30_000,
    "group_sizes": (10_000,),
    "scaling": (2000, 4000, 8000),
}


@dataclass
class Report:
    """Every measurement and every engine comparison, for --json and the exit status."""

    records: list[dict[str, Any]] = field(default_factory=list)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def compare(self, where: str, verdict: str, difference: str | None) -> None:
        self.comparisons.append({"where": where, "check": verdict, "difference": difference})
        if difference:
            print(f"      {difference}", flush=True)
            self.mismatches.append(f"{where}: {difference}")


def machine_info() -> dict[str, Any]:
    """What the numbers depend on: CPU, cores, memory, OS, Python, code version."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "greta_stream": _package_version("greta_stream"),
        "numba": _package_version("numba"),
        "numpy": _package_version("numpy"),
        "pandas": _package_version("pandas"),
        "git": _git_commit(),
    }


def _package_version(name: str) -> str:
    try:
        return importlib.import_module(name).__version__
    except ImportError:
        return "not importable"


def _git_commit() -> str:
    """The commit of HEAD, read from ``.git`` (no git process; uncommitted changes are not checked)."""
    git = ROOT / ".git"
    try:
        head = (git / "HEAD").read_text(encoding="ascii").strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).exists():
            return (git / ref).read_text(encoding="ascii").strip()[:12]
        for line in (git / "packed-refs").read_text(encoding="ascii").splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        pass
    return "unknown"


def print_header(info: dict[str, Any], command: str, cfg: Config, quick: bool) -> None:
    print("# greta-stream columnar engine benchmark" + (" (--quick)" if quick else ""))
    print(f"command : {command}")
    print(f"cwd     : {os.getcwd()}")
    print(
        f"machine : {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable), "
        f"{info['memory_gib']} GiB RAM, {info['os']}"
    )
    print(f"python  : {info['python']} ({sys.executable})")
    print(
        f"code    : greta_stream {info['greta_stream']}, git {info['git']} (HEAD; working tree not checked); "
        f"numba {info['numba']}, numpy {info['numpy']}, pandas {info['pandas']}"
    )
    print(
        f"data    : benchmarks/generators.py, seed {cfg.seed}; one fresh process per measurement, "
        f"run one after another; generation and a {WARMUP_EVENTS}-event warm-up call not timed; "
        f"budget {cfg.budget_s:g} s and {cfg.mem_limit_mb:,.0f} MiB RSS per measurement",
        flush=True,
    )


def _default_mem_limit_mb() -> float:
    gib = _memory_gib()
    return round(gib * 1024 / 2) if gib else 8192.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--budget-s", type=float, default=120.0, help="seconds a run may take before it is killed")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--repeat", type=int, help="children per size of table 4, median taken (default 3; 1 with --quick)")
    parser.add_argument(
        "--mem-limit-mb",
        type=float,
        default=_default_mem_limit_mb(),
        help="MiB of RSS past which a run is killed (default: half the machine's memory)",
    )
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run of about a minute")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child: JSON spec
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        if args.result_file is None:
            raise SystemExit("--one needs --result-file")
        run_one(json.loads(args.one), args.result_file)
        return 0
    repeat = args.repeat or (1 if args.quick else 3)
    MEMORY["limit_bytes"] = int(args.mem_limit_mb * 2**20)
    cfg = Config(
        budget_s=args.budget_s,
        seed=args.seed,
        repeat=repeat,
        mem_limit_mb=args.mem_limit_mb,
        **(QUICK if args.quick else {}),
    )
    command = shlex.join([sys.executable, *sys.argv])
    info = machine_info()
    print_header(info, command, cfg, args.quick)
    report = Report()
    started = time.perf_counter()
    throughput_table(cfg, report, q1_workload())
    selectivity_table(cfg, report)
    groups_table(cfg, report)
    scaling_table(cfg, report)
    throughput_table(cfg, report, q2_workload())
    throughput_table(cfg, report, q3_workload())
    print(f"\ntotal {time.perf_counter() - started:,.0f} s", flush=True)
    for mismatch in report.mismatches:
        banner = f"!!! MISMATCH: the columnar and general engines disagree on {mismatch}"
        print(banner, flush=True)
        print(banner, file=sys.stderr, flush=True)
    if args.json:
        doc = {"command": command, "machine": info, "config": vars(cfg), **vars(report)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
        print(f"\nresults written to {args.json}")
    return 1 if report.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
