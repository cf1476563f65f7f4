"""The service as the number of registered queries grows: request latency, memory, disk, batch time.

One `greta-stream serve` in a subprocess (its own session, so the whole
tree goes at the end: the uvicorn process, its Spark JVM and pyspark's
Python workers), on a free loopback port, its data folder and every
source under one temporary folder, set by `GRETA_*` environment variables
(an API key, `path_roots`, `data_dir`; the rest the service's defaults:
a trigger every second, the SQLite results store). A background thread
writes one JSON-lines file of `--per-file` stock events (20 companies in
4 sectors, each company's price a random walk, `time` in seconds going up
`--file-s` per file) every second into each of `--sources` folders, for
the whole run.

Queries are registered one after another (no pause) with `POST /queries`,
round robin over the sources, up to `--queries`; each is Q1-like and cheap,
varied in its window, slide and a local price predicate, with no sink
(the results store only):

    RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price
    AND S.price > <k> GROUP-BY sector WITHIN <w> seconds SLIDE <s> seconds

At each size of `--sizes` one row, and once more `--settle-s` seconds
after the last registration (or later, once the first query's stream ran a
micro-batch), with no registration in between: the `+Ns` row:

- `post p50/p95/max s`: `POST /queries` latency over the block registered
  since the previous row;
- `list s`, `metrics s`: `GET /queries` and `GET /metrics`, the median of 3;
  `get s`: `GET /queries/{id}` of the first query;
- `RSS GB`: the resident memory of every process of the service's session
  summed (pages shared between processes count once per process), and of
  it `JVM GB` (java) and `py GB` (uvicorn and pyspark's workers);
- `data MB`: bytes under the data folder (registry and results store,
  checkpoints); `control MB` and `ctl files`: under the streams' query-set
  folders (`checkpoints/<stream>/control`, `greta_stream.spark.control`:
  a pickled query set per change, and the control rows);
- `log MB`: the service's log (info level); `starts`: Spark stream
  (re)starts the log reports so far (one per source is the least);
- `non-2xx`: requests so far answered with a status other than 2xx, or
  not answered (the connection reset: a 500 uvicorn could not send); the
  first one's body is printed when it happens (stderr) and at the end;
  a registration that failed is not retried;
- `batch ms`: the first query's stream's last micro-batch
  (`progress.batch_durations_ms`); `lag files`: the files written to the
  first source that its stream has not read yet (events written less
  `progress.input_rows`, over `--per-file`: above 2, the stream is behind);
- `min`: minutes since the first registration.

The run stops early, and says why, past `--max-minutes`, when the
service's processes together pass `--max-rss-gb` (sampled every 2 s), after
20 failed registrations in a row, or if the service exits. Progress goes to
stderr every `--progress-every` registrations. Numbers, not tests: the exit
status is 1 only when a request was answered with a non-2xx status.

    .venv/bin/python benchmarks/bench_many_queries.py --quick                 # 20 queries, about a minute
    .venv/bin/python benchmarks/bench_many_queries.py                         # up to 1,000 queries on one source
    .venv/bin/python benchmarks/bench_many_queries.py --queries 10000 --sources 100 --max-minutes 120
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Table, cpu_model, memory_gib  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEY = "many-queries-bench-key"
COMPANIES, SECTORS = 20, 4
WINDOWS = [(10, 5), (20, 5), (20, 10), (30, 10), (60, 10), (60, 30)]  # (WITHIN s, SLIDE s)
SIZES = (10, 100, 250, 500, 1000, 2500, 5000, 10_000)  # rows at these sizes (and at --queries) unless --sizes
START_MARK = re.compile(r"stream \S+ runs \d+ queries")  # `Registry._restart` starting a Spark stream


def query_text(i: int) -> str:
    """Query `i`: a window, slide and local price predicate drawn per query (seeded), so the queries differ."""
    rnd = random.Random(i)
    within, slide = rnd.choice(WINDOWS)
    k = round(rnd.uniform(60, 140), 2)
    return (f"RETURN sector, COUNT(*) PATTERN Stock S+ WHERE [company, sector] AND S.price > NEXT(S).price "
            f"AND S.price > {k} GROUP-BY sector WITHIN {within} seconds SLIDE {slide} seconds")


class Trickle(threading.Thread):
    """One file of stock events per second into each source folder (written atomically: Spark never sees half)."""

    def __init__(self, folders: list[Path], per_file: int, file_s: float) -> None:
        super().__init__(daemon=True)
        self.folders, self.per_file, self.file_s = folders, per_file, file_s
        self.written = 0  # files written to each folder
        self.prices = [[100.0] * COMPANIES for _ in folders]
        self.rnd = random.Random(7)
        self.stop_flag = threading.Event()

    def write_all(self) -> None:
        i = self.written
        for f, folder in enumerate(self.folders):
            events = []
            for k in range(self.per_file):
                c = self.rnd.randrange(COMPANIES)
                self.prices[f][c] = max(1.0, self.prices[f][c] + self.rnd.gauss(0, 2))
                events.append({"type": "Stock", "time": round((i + k / self.per_file) * self.file_s, 3),
                               "company": c, "sector": c % SECTORS, "price": round(self.prices[f][c], 2)})
            temp = folder.parent / f".{folder.name}-{i:06d}.tmp"
            temp.write_text("".join(json.dumps(e) + "\n" for e in events))
            os.replace(temp, folder / f"e-{i:06d}.jsonl")
        self.written = i + 1

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop_flag.wait(max(0.0, next_at - time.monotonic())):
            self.write_all()
            next_at += 1.0


# ------------------------------------------------------------ the service's processes and files


def service_pids(root: int) -> list[int]:
    """The processes of the service's session (it was started with `start_new_session`) and its descendants."""
    parent, session = {}, {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry.name)], session[int(entry.name)] = int(fields[1]), int(fields[3])
    tree, changed = {p for p, s in session.items() if s == root} | {root}, True
    while changed:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        changed = bool(more)
    return sorted(p for p in tree if p in parent)


def service_rss(root: int) -> dict[str, int]:
    """Resident bytes of the service's processes: `jvm` (java) and `py` (everything else)."""
    out = {"jvm": 0, "py": 0}
    try:
        import psutil

        procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        for p in procs:
            try:
                out["jvm" if p.name() == "java" else "py"] += p.memory_info().rss
            except psutil.Error:
                continue
        return out
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - the service just exited: the /proc reading says so too
        return out
    for pid in service_pids(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        name = re.search(r"^Name:\s*(\S+)", status, re.M)
        rss = re.search(r"^VmRSS:\s*(\d+) kB", status, re.M)
        if rss:
            out["jvm" if name and name.group(1) == "java" else "py"] += int(rss.group(1)) * 1024
    return out


def folder_size(path: Path) -> tuple[int, int]:
    """(bytes, files) under `path`; files that vanish meanwhile (Spark's cleanSource) are skipped."""
    size = files = 0
    for base, _, names in os.walk(path):
        for name in names:
            try:
                size += os.lstat(os.path.join(base, name)).st_size
                files += 1
            except OSError:
                continue
    return size, files


def control_size(data: Path) -> tuple[int, int]:
    """(bytes, files) under every stream's `control` folder (`greta_stream.spark.control.CONTROL_FOLDER`)."""
    sizes = [folder_size(c) for c in (data / "checkpoints").glob("*/control")]
    return sum(s for s, _ in sizes), sum(f for _, f in sizes)


class RssGuard(threading.Thread):
    """Samples the service's RSS every 2 s: the peak, and whether it passed the limit."""

    def __init__(self, pid: int, limit_bytes: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit = pid, limit_bytes
        self.peak = 0
        self.over = threading.Event()
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.wait(2.0):
            total = sum(service_rss(self.pid).values())
            self.peak = max(self.peak, total)
            if total > self.limit:
                self.over.set()


# ------------------------------------------------------------ the API


class Api:
    """An httpx client that times each request and counts the answers that are not 2xx."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=600)
        self.errors = 0
        self.first_error: str | None = None

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[float, httpx.Response | None]:
        """Seconds the request took and its answer; None when the connection failed (counted as an error too)."""
        t = time.perf_counter()
        try:
            r: httpx.Response | None = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            r = None
            error = f"{method} {path}: no answer: {type(exc).__name__}: {exc}"
        took = time.perf_counter() - t
        if r is not None and not r.is_success:
            error = f"{method} {path}: {r.status_code} {r.text[:500]}"
        if r is None or not r.is_success:
            self.errors += 1
            if self.first_error is None:
                self.first_error = error
                print(f"!! first non-2xx answer: {error}", file=sys.stderr, flush=True)
        return took, r

    def median_s(self, path: str, n: int = 3) -> float:
        return statistics.median(self.call("GET", path)[0] for _ in range(n))


def start_service(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`greta-stream serve` on a free loopback port, configured by environment variables; waits for /readyz."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GRETA_API_KEY": KEY, "GRETA_HOST": "127.0.0.1", "GRETA_PORT": str(port),
           "GRETA_DATA_DIR": str(tmp / "data"), "GRETA_PATH_ROOTS": str(tmp), "GRETA_SPARK_LOG_LEVEL": "ERROR"}
    env.pop("GRETA_SERVICE_CONFIG", None)
    with open(tmp / "service.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "greta_stream", "serve"], stdout=log, stderr=subprocess.STDOUT,
                                cwd=tmp, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    stop_service(proc)
    raise SystemExit("the service did not start:\n" + (tmp / "service.log").read_text(errors="replace")[-3000:])


def stop_service(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server alone (its lifespan stops the streams, then the JVM), then SIGKILL of what is left
    of its session's group (as tests/service/service_helpers.py stops it)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=120)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


# ------------------------------------------------------------ measuring


COLUMNS = [("queries", 9), ("post p50 s", 10), ("p95 s", 6), ("max s", 6), ("list s", 6), ("metrics s", 9),
           ("get s", 6), ("RSS GB", 6), ("JVM GB", 6), ("py GB", 5), ("data MB", 8), ("control MB", 10),
           ("ctl files", 9), ("log MB", 6), ("starts", 6), ("non-2xx", 7), ("batch ms", 8), ("lag files", 9),
           ("min", 5)]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def measure(label: str, posts: list[float], api: Api, first: str, run: dict[str, Any]) -> dict[str, Any]:
    """One row's figures (see the module docstring)."""
    row: dict[str, Any] = {"queries": label}
    if posts:
        row.update(post_p50_s=statistics.median(posts), post_p95_s=pct(posts, 0.95), post_max_s=max(posts))
    row["list_s"] = api.median_s("/queries")
    row["metrics_s"] = api.median_s("/metrics")
    row["get_s"], r = api.call("GET", f"/queries/{first}")
    written = run["trickle"].written * run["per_file"]
    if r is not None and r.is_success:
        progress = r.json()["progress"]
        row["batch_ms"] = (progress["batch_durations_ms"] or [None])[-1]
        row["lag_files"] = (written - progress["input_rows"]) / run["per_file"]
    rss = service_rss(run["proc"].pid)
    row.update(rss_gb=sum(rss.values()) / 2**30, jvm_gb=rss["jvm"] / 2**30, py_gb=rss["py"] / 2**30)
    row["data_mb"] = folder_size(run["data"])[0] / 2**20
    control_bytes, row["control_files"] = control_size(run["data"])
    row["control_mb"] = control_bytes / 2**20
    with open(run["log"], errors="replace") as log:  # line by line: at thousands of queries it is large
        starts = sum(1 for line in log if " runs " in line and START_MARK.search(line))
    row.update(log_mb=run["log"].stat().st_size / 2**20, starts=starts, non_2xx=api.errors)
    row["minutes"] = (time.monotonic() - run["t0"]) / 60
    return row


def cells(row: dict[str, Any]) -> list[str]:
    def f(key: str, fmt: str) -> str:
        value = row.get(key)
        return "-" if value is None else format(value, fmt)

    return [row["queries"], f("post_p50_s", ".3f"), f("post_p95_s", ".3f"), f("post_max_s", ".3f"), f("list_s", ".3f"),
            f("metrics_s", ".3f"), f("get_s", ".3f"), f("rss_gb", ".2f"), f("jvm_gb", ".2f"), f("py_gb", ".2f"),
            f("data_mb", ",.1f"), f("control_mb", ",.1f"), f("control_files", ","), f("log_mb", ",.1f"),
            f("starts", "d"), f("non_2xx", "d"), f("batch_ms", ","), f("lag_files", ".1f"), f("minutes", ".1f")]


def git_state() -> str:
    """HEAD, and which files of the code measured (service/, greta_stream/) differ from it."""
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    changed = git("diff", "--name-only", "HEAD", "--", "service", "greta_stream").split()
    return git("rev-parse", "--short", "HEAD") + (f" + uncommitted changes in {', '.join(changed)}" if changed else "")


def code_state() -> str:
    """Where the service's packages come from (as the service will import them: same interpreter and environment),
    and the git state when that is this checkout."""
    import importlib.util

    found = {name: Path(spec.origin).parent if (spec := importlib.util.find_spec(name)) and spec.origin else None
             for name in ("greta_stream", "greta_service")}
    where = ", ".join(f"{name} from {path}" for name, path in found.items())
    mine = all(path is not None and path.is_relative_to(ROOT) for path in found.values())
    return where + (f"; git of {ROOT}: {git_state()}" if mine else "")


def print_header(args: argparse.Namespace, sizes: list[int]) -> None:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print("# greta-stream service with many registered queries" + " (--quick)" * args.quick)
    print(f"command : {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine : {cpu_model()}, {os.cpu_count()} cores, {memory_gib()} GiB RAM, load average {load}")
    print(f"code    : {code_state()}")
    print(f"input   : {args.sources} source folder(s), each a file of {args.per_file} stock events per second "
          f"({args.file_s:g} s of event time per file)")
    print(f"queries : up to {args.queries}, rows at {', '.join(map(str, sizes))}; e.g. {query_text(0)}")
    print(f"limits  : {args.max_minutes or 'no'} minutes, {args.max_rss_gb:g} GB RSS of the service's processes\n",
          flush=True)


# ------------------------------------------------------------ main


def register(api: Api, i: int, sources: list[Path]) -> tuple[float, str | None]:
    body = {"name": f"mq-{i:05d}", "text": query_text(i),
            "source": {"format": "jsonl", "path": str(sources[i % len(sources)])}}
    took, r = api.call("POST", "/queries", json=body)
    return took, (r.json()["id"] if r is not None and r.is_success else None)


def settle(api: Api, first: str, settle_s: float) -> float:
    """Wait `settle_s` seconds, and on until the first query's stream ran a micro-batch (3 minutes at most)."""
    t = time.monotonic()
    time.sleep(settle_s)
    while time.monotonic() - t < settle_s + 180:
        _, r = api.call("GET", f"/queries/{first}")
        if r is not None and r.is_success and r.json()["progress"]["batch_durations_ms"]:
            break
        time.sleep(1.0)
    return time.monotonic() - t


def why_stop(args: argparse.Namespace, run: dict[str, Any], guard: RssGuard, failed_in_row: int) -> str | None:
    if run["proc"].poll() is not None:
        return f"the service exited with status {run['proc'].returncode}"
    if guard.over.is_set():
        return f"the service's processes passed {args.max_rss_gb:g} GB RSS (--max-rss-gb)"
    if args.max_minutes and time.monotonic() - run["start"] > args.max_minutes * 60:
        return f"{args.max_minutes:g} minutes passed (--max-minutes)"
    if failed_in_row >= 20:
        return "20 registrations in a row failed"
    return None


def run_bench(args: argparse.Namespace, sizes: list[int], tmp: Path, run: dict[str, Any]) -> list[dict[str, Any]]:
    """Start the service and the files, register, print a row at each size; the rows."""
    sources = [tmp / f"in-{j:03d}" for j in range(args.sources)]
    for folder in sources:
        folder.mkdir()
    run["proc"], url = start_service(tmp)
    api, guard = Api(url), RssGuard(run["proc"].pid, args.max_rss_gb * 2**30)
    run["trickle"] = Trickle(sources, args.per_file, args.file_s)
    run["trickle"].write_all()
    run["trickle"].start()
    guard.start()
    table, rows, block, first, failed_in_row, stopped = Table(COLUMNS), [], [], None, 0, None
    table.header()
    run["t0"] = time.monotonic()
    n = 0
    while n < args.queries and (stopped := why_stop(args, run, guard, failed_in_row)) is None:
        took, qid = register(api, n, sources)
        n += 1
        block.append(took)
        first = first or qid
        failed_in_row = 0 if qid else failed_in_row + 1
        if n % args.progress_every == 0:
            print(f"   ... {n} queries in {(time.monotonic() - run['t0']) / 60:.1f} min, last POST {took:.3f} s, "
                  f"RSS {sum(service_rss(run['proc'].pid).values()) / 2**30:.2f} GB", file=sys.stderr, flush=True)
        if n in sizes and first:
            rows.append(measure(str(n), block, api, first, run))
            table.row(cells(rows[-1]))
            block = []
    run["registering_s"] = time.monotonic() - run["t0"]
    if stopped is None and first:  # a last row at rest
        rows.append(measure(f"{n} +{settle(api, first, args.settle_s):.0f}s", [], api, first, run))
        table.row(cells(rows[-1]))
    elif first and block and run["proc"].poll() is None:  # stopped early: the block since the last row
        rows.append(measure(f"{n} stop", block, api, first, run))
        table.row(cells(rows[-1]))
    guard.stop_flag.set()
    summary(n, run, api, guard, stopped)
    return rows


def summary(n: int, run: dict[str, Any], api: Api, guard: RssGuard, stopped: str | None) -> None:
    took_s = run["registering_s"]
    print(f"\npeak RSS of the service's processes (sampled every 2 s): {guard.peak / 2**30:.2f} GB; "
          f"{n} queries registered in {took_s / 60:.1f} min ({n / took_s * 60:.1f} per minute)")
    if stopped:
        print(f"STOPPED EARLY: {stopped}")
    print(f"non-2xx answers: {api.errors}" + (f"; the first: {api.first_error}" if api.first_error else ""))
    run["errors"] = api.errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=1000, help="queries to register (default 1000)")
    ap.add_argument("--sizes", help="comma-separated sizes to print a row at (default 10, 100, 250, 500, 1000, "
                                    "2500, 5000, 10000 up to --queries, and --queries)")
    ap.add_argument("--sources", type=int, default=1, help="source folders the queries are spread over")
    ap.add_argument("--per-file", type=int, default=20, help="events per file")
    ap.add_argument("--file-s", type=float, default=1.0, help="event seconds per file")
    ap.add_argument("--settle-s", type=float, default=30.0, help="seconds after the last registration for the last row")
    ap.add_argument("--max-minutes", type=float, help="stop registering after this many minutes")
    ap.add_argument("--max-rss-gb", type=float, default=8.0, help="stop when the service's processes pass this RSS")
    ap.add_argument("--progress-every", type=int, default=50, help="a progress line (stderr) every this many queries")
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 queries, rows at 5,10,20, 5 s to settle")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (data, sources, service.log)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args()
    if args.quick:
        args.queries, args.sizes, args.settle_s, args.progress_every = 20, args.sizes or "5,10,20", 5.0, 10
    sizes = sorted({int(s) for s in args.sizes.split(",")} if args.sizes else
                   {s for s in SIZES if s <= args.queries} | {args.queries})
    print_header(args, sizes)
    tmp = Path(tempfile.mkdtemp(prefix="greta-many-queries-"))
    run: dict[str, Any] = {"data": tmp / "data", "log": tmp / "service.log", "per_file": args.per_file,
                           "start": time.monotonic(), "errors": 0}
    try:
        rows = run_bench(args, sizes, tmp, run)
    finally:
        if "trickle" in run:
            run["trickle"].stop_flag.set()
        if "proc" in run:
            stop_service(run["proc"])
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": sys.argv, "rows": rows}, indent=1))
    return 1 if run["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
