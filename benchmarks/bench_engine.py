"""Engine benchmark: throughput and memory of ``greta_stream.evaluate`` on Q1-Q3.

Two tables are printed, after a header naming the machine, the Python, the
code version and the exact command line, so that every number can be rebuilt:

1. **Engine.** For each of the paper's queries (``configs/q1_stock.greta``,
   ``q2_cluster.greta``, ``q3_traffic.greta``) and each size (default 10k,
   100k and 1M events of the seeded generators in ``benchmarks/generators.py``):
   events/s of ``evaluate``, its wall seconds, peak RSS and result rows.
2. **GRETA vs two-step.** For each query, a variant with a small tumbling
   window on a few events with few partitions, so that every trend can still
   be listed: GRETA's time against the brute-force baseline that enumerates
   every trend and then aggregates
   (``greta_stream.testing.oracle.oracle_rows``), the speedup, the largest
   ``COUNT(*)`` of a row (the trend explosion GRETA avoids), and whether both
   give equal rows (``MISMATCH`` is printed loudly, and the exit status is 1,
   if not).

Every measurement runs in a fresh child process (this script with the hidden
``--one`` flag), so its peak RSS (``ru_maxrss``) is its own. The child
generates the events, warms the query parser up, reports its RSS and says
"ready"; only then does the parent start the clock of the time budget, so
generation is never counted. A child past its budget is killed and shown as
``> budget``; larger sizes of the same query are then ``skipped``.

Usage::

    python benchmarks/bench_engine.py [--sizes 10000,100000,1000000] [--budget-s 120]
        [--queries q1,q2,q3] [--json out.json] [--small-sizes 50,100,200]
        [--baseline-budget-s 60] [--seed 0] [--skip-compare]

See ``benchmarks/README.md`` for what each column means.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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

ENGINE, SMALL_GRETA, SMALL_BASELINE = "engine", "small-greta", "small-baseline"
MODES = (ENGINE, SMALL_GRETA, SMALL_BASELINE)


@dataclass(frozen=True)
class Workload:
    """One of the paper's queries, its generator and its small-window variant."""

    label: str
    config: str
    generator: str
    small_window: str
    small_params: dict[str, Any]

    def query_text(self, small: bool) -> str:
        """The query of ``configs/``, or its variant with the small window."""
        text = (ROOT / "configs" / self.config).read_text(encoding="utf-8")
        if not small:
            return text
        variant, found = re.subn(r"^WITHIN\b.*$", self.small_window, text, flags=re.MULTILINE)
        if found != 1:
            raise ValueError(f"{self.config}: expected one WITHIN line, found {found}")
        return variant


# Small variants: tumbling windows holding ~40 events (Q1, Q2) or ~20 reports
# per vehicle (Q3, which reports every 30 s) in one or two partitions, so a row
# has up to ~10^4-10^5 trends: enough to show the explosion, few enough to list.
WORKLOADS: dict[str, Workload] = {
    "q1": Workload("Q1", "q1_stock.greta", "stock", "WITHIN 20 seconds", {"companies": 2, "sectors": 1, "rate": 2.0}),
    "q2": Workload("Q2", "q2_cluster.greta", "cluster", "WITHIN 20 seconds", {"mappers": 1, "jobs": 1, "rate": 2.0}),
    "q3": Workload("Q3", "q3_traffic.greta", "traffic", "WITHIN 10 minutes", {"vehicles": 4, "segments": 1}),
}


# ------------------------------------------------------------ child process


def _runner(mode: str, text: str) -> Any:
    """A warmed-up callable ``events -> rows`` for the mode (untimed parser load)."""
    import greta_stream
    from greta_stream.query import parse
    from greta_stream.testing.oracle import oracle_rows

    if mode == SMALL_BASELINE:
        parse(text)
        return lambda events: oracle_rows(parse(text), events)
    greta_stream.compile_query(text)
    return lambda events: greta_stream.evaluate(text, events)


def run_one(mode: str, key: str, size: int, seed: int, result_file: Path) -> None:
    """Child: generate, say "ready", run one measurement, write its result as JSON."""
    workload = WORKLOADS[key]
    small = mode != ENGINE
    text = workload.query_text(small)
    params = workload.small_params if small else {}
    events = getattr(_load_generators(), workload.generator)(size, seed=seed, **params)
    run = _runner(mode, text)
    count_column = _count_column(text)
    gc.collect()
    rss_after_gen = _current_rss_bytes()
    print("ready", flush=True)
    start = time.perf_counter()
    rows = run(events)
    wall_s = time.perf_counter() - start
    result = {
        "wall_s": wall_s,
        "rows": len(rows),
        "peak_rss_bytes": _peak_rss_bytes(),
        "rss_after_gen_bytes": rss_after_gen,
        "max_count": max((row[count_column] for row in rows), default=0),
    }
    if small:
        result["result_rows"] = [dict(row) for row in rows]
    result_file.write_text(json.dumps(result), encoding="utf-8")


# ------------------------------------------------------------ parent: measurements


def measure(mode: str, key: str, size: int, seed: int, budget_s: float) -> Outcome:
    """Run one measurement in a fresh child; kill it ``budget_s`` after it is ready."""
    with tempfile.TemporaryDirectory(prefix="bench_engine_") as tmp:
        result_file, err_file = Path(tmp) / "result.json", Path(tmp) / "stderr.txt"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--one",
            f"{mode}:{key}:{size}",
            "--seed",
            str(seed),
            "--result-file",
            str(result_file),
        ]
        with open(err_file, "w", encoding="utf-8") as err:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                if proc.stdout.readline().strip() == "ready":
                    proc.wait(timeout=budget_s)
                proc.wait()
            except subprocess.TimeoutExpired:
                return Outcome("budget")
            finally:
                _stop(proc)
        if proc.returncode != 0 or not result_file.exists():
            tail = err_file.read_text(encoding="utf-8").strip().splitlines()[-1:] or ["no output"]
            return Outcome("error", message=f"exit {proc.returncode}: {tail[0]}")
        return Outcome("ok", json.loads(result_file.read_text(encoding="utf-8")))


# ------------------------------------------------------------ formatting


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.0f}"


def _count(value: int) -> str:
    return f"{value:,}" if value < 10**15 else f"{value:.3e}"


def _ratio(value: float) -> str:
    return f"{value:.1f}x" if value < 10 else f"{value:,.0f}x"


# ------------------------------------------------------------ table 1: engine


ENGINE_TABLE = Table(
    [
        ("query", 5),
        ("events", 9),
        ("events/s", 9),
        ("wall s", 8),
        ("peak RSS MB", 11),
        ("RSS gen MB", 10),
        ("Δ RSS MB", 8),
        ("rows", 7),
    ]
)


def engine_cells(key: str, size: int, outcome: Outcome, budget_s: float) -> list[str]:
    """One row of the engine table."""
    lead = [WORKLOADS[key].label, f"{size:,}"]
    if outcome.status != "ok":
        first = {"budget": "> budget", "skipped": "skipped"}.get(outcome.status, "error")
        wall = f"> {budget_s:g}" if outcome.status == "budget" else "-"
        return [*lead, first, wall, "-", "-", "-", "-"]
    d = outcome.data
    return [
        *lead,
        f"{size / d['wall_s']:,.0f}",
        _seconds(d["wall_s"]),
        _mb(d["peak_rss_bytes"]),
        _mb(d["rss_after_gen_bytes"]),
        _mb(d["peak_rss_bytes"] - d["rss_after_gen_bytes"]),
        f"{d['rows']:,}",
    ]


def engine_table(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Table 1: every (query, size); larger sizes are skipped after a blown budget."""
    print(
        f"\n## Engine: greta_stream.evaluate on the paper's queries "
        f"(time budget {args.budget_s:g} s per measurement)\n",
        flush=True,
    )
    ENGINE_TABLE.header()
    records = []
    for key in args.queries:
        failed = False
        for size in args.sizes:
            outcome = Outcome("skipped") if failed else measure(ENGINE, key, size, args.seed, args.budget_s)
            failed = failed or outcome.status in ("budget", "error")
            ENGINE_TABLE.row(engine_cells(key, size, outcome, args.budget_s))
            if outcome.message:
                print(f"      {outcome.message}", flush=True)
            records.append({"query": key, "events": size, "status": outcome.status, **outcome.data})
    return records


# ------------------------------------------------------------ table 2: GRETA vs two-step


COMPARE_TABLE = Table(
    [
        ("query", 5),
        ("events", 6),
        ("rows", 4),
        ("max COUNT(*)", 12),
        ("GRETA s", 8),
        ("two-step s", 10),
        ("speedup", 8),
        ("check", 8),
    ]
)


def same_rows(expected: list[dict], got: list[dict]) -> str | None:
    """None if the rows agree (ints exact, floats to 1e-9 relative), else the first difference."""
    if len(expected) != len(got):
        return f"{len(got)} GRETA rows vs {len(expected)} two-step rows"
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        if list(want) != list(have) or not all(_same_value(want[k], have[k]) for k in want):
            return f"row {index}: GRETA {have!r} vs two-step {want!r}"
    return None


def compare_cells(key: str, size: int, greta: Outcome, base: Outcome, check: str) -> list[str]:
    """One row of the comparison table."""

    def time_of(outcome: Outcome) -> str:
        if outcome.status == "ok":
            return _seconds(outcome.data["wall_s"])
        return "> budget" if outcome.status == "budget" else "error"

    ok = greta.status == "ok"
    rows = f"{greta.data['rows']:,}" if ok else "-"
    max_count = _count(greta.data["max_count"]) if ok else "-"
    speedup = _ratio(base.data["wall_s"] / greta.data["wall_s"]) if ok and base.status == "ok" else "-"
    return [WORKLOADS[key].label, f"{size:,}", rows, max_count, time_of(greta), time_of(base), speedup, check]


def compare_check(greta: Outcome, base: Outcome) -> tuple[str, str | None]:
    """("equal" | "MISMATCH" | "n/a", difference) for one pair of measurements."""
    if greta.status != "ok" or base.status != "ok":
        return "n/a", None
    difference = same_rows(base.data["result_rows"], greta.data["result_rows"])
    return ("equal", None) if difference is None else ("MISMATCH", difference)


def compare_table(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str]]:
    """Table 2: GRETA vs the two-step baseline on the small-window variants."""
    print(
        f"\n## GRETA vs two-step baseline (enumerate every trend, then aggregate) on small windows "
        f"(baseline budget {args.baseline_budget_s:g} s)\n",
        flush=True,
    )
    for key in args.queries:
        w = WORKLOADS[key]
        params = ", ".join(f"{k}={v}" for k, v in w.small_params.items())
        print(f"   {w.label}: configs/{w.config} with '{w.small_window}' (tumbling); {w.generator}({params})")
    print(flush=True)
    COMPARE_TABLE.header()
    records, mismatches = [], []
    for key in args.queries:
        for size in args.small_sizes:
            greta = measure(SMALL_GRETA, key, size, args.seed, args.budget_s)
            base = measure(SMALL_BASELINE, key, size, args.seed, args.baseline_budget_s)
            check, difference = compare_check(greta, base)
            COMPARE_TABLE.row(compare_cells(key, size, greta, base, check))
            for message in (greta.message, base.message, difference):
                if message:
                    print(f"      {message}", flush=True)
            if difference:
                mismatches.append(f"{WORKLOADS[key].label} n={size}: {difference}")
            records.append(_compare_record(key, size, greta, base, check))
    return records, mismatches


def _compare_record(key: str, size: int, greta: Outcome, base: Outcome, check: str) -> dict[str, Any]:
    """The JSON record of one comparison (result rows left out)."""

    def strip(outcome: Outcome) -> dict[str, Any]:
        data = {k: v for k, v in outcome.data.items() if k != "result_rows"}
        return {"status": outcome.status, **data}

    return {"query": key, "events": size, "greta": strip(greta), "baseline": strip(base), "check": check}


# ------------------------------------------------------------ header, arguments, main


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
        "greta_stream": _package_version(),
        "git": _git_revision(),
    }


def _package_version() -> str:
    try:
        import greta_stream

        return greta_stream.__version__
    except ImportError:
        return "not importable"


def _git_revision() -> str:
    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        commit = git("rev-parse", "--short", "HEAD")
    except OSError:
        return "unknown"
    if not commit:
        return "unknown"
    return commit + (" + uncommitted changes" if git("status", "--porcelain") else "")


def print_header(info: dict[str, Any], command: str, args: argparse.Namespace) -> None:
    print("# greta-stream engine benchmark")
    print(f"command : {command}")
    print(f"cwd     : {os.getcwd()}")
    print(
        f"machine : {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable), "
        f"{info['memory_gib']} GiB RAM, {info['os']}"
    )
    print(f"python  : {info['python']} ({sys.executable})")
    print(f"code    : greta_stream {info['greta_stream']}, git {info['git']}")
    print(
        f"data    : benchmarks/generators.py, seed {args.seed}; one fresh process per measurement, "
        f"run one after another; generation not timed",
        flush=True,
    )


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return sorted(set(values))


def _query_list(text: str) -> list[str]:
    keys = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [k for k in keys if k not in WORKLOADS]
    if not keys or unknown:
        raise argparse.ArgumentTypeError(f"queries must be among {', '.join(WORKLOADS)}, got {text!r}")
    return list(dict.fromkeys(keys))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=_int_list, default="10000,100000,1000000", help="events per engine measurement, comma-separated"
    )
    parser.add_argument(
        "--budget-s", type=float, default=120.0, help="seconds a GRETA run may take before it is killed"
    )
    parser.add_argument("--queries", type=_query_list, default="q1,q2,q3", help="queries to run")
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    parser.add_argument(
        "--small-sizes", type=_int_list, default="50,100,200", help="events per GRETA vs two-step comparison"
    )
    parser.add_argument(
        "--baseline-budget-s",
        type=float,
        default=60.0,
        help="seconds the two-step baseline may take before it is killed",
    )
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--skip-compare", action="store_true", help="print only the engine table")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child: MODE:QUERY:SIZE
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def child_main(args: argparse.Namespace) -> int:
    mode, key, size = args.one.split(":")
    if mode not in MODES or key not in WORKLOADS or args.result_file is None:
        raise SystemExit(f"bad --one {args.one!r}")
    run_one(mode, key, int(size), args.seed, args.result_file)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        return child_main(args)
    command = shlex.join([sys.executable, *sys.argv])
    info = machine_info()
    print_header(info, command, args)
    report: dict[str, Any] = {"command": command, "machine": info, "engine": engine_table(args)}
    mismatches: list[str] = []
    if not args.skip_compare:
        report["comparison"], mismatches = compare_table(args)
    for mismatch in mismatches:
        banner = f"!!! MISMATCH: GRETA and the two-step baseline disagree on {mismatch}"
        print(banner, flush=True)
        print(banner, file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        print(f"\nresults written to {args.json}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
